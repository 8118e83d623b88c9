package master

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestOutbox: messages come out in order, a queue past its limit ends the
// stream, and a nil outbox (a disconnected peer) drops what is sent.
func TestOutbox(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := NewOutbox[int](cancel, 3)
	for i := 1; i <= 3; i++ {
		if !o.send(i) {
			t.Fatalf("send %d refused below the limit", i)
		}
	}
	select {
	case <-o.ready:
	default:
		t.Fatal("ready not signalled after sends")
	}
	if got := o.Take(); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("take = %v, want [1 2 3]", got)
	}
	if got := o.Take(); len(got) != 0 {
		t.Fatalf("second take = %v, want empty", got)
	}
	if ctx.Err() != nil {
		t.Fatal("stream ended below the limit")
	}
	for i := 0; i < 3; i++ {
		o.send(i)
	}
	if o.send(99) {
		t.Fatal("send past the limit accepted")
	}
	if ctx.Err() == nil {
		t.Fatal("a queue past its limit did not end the stream")
	}
	var none *Outbox[int]
	if none.send(1) {
		t.Fatal("nil outbox accepted a message")
	}
}

// TestOutboxDrain: an outbox that drains itself sends everything in
// order, one drain call at a time, starting with a first call before
// anything is queued; a drain error ends the stream; nothing is sent
// once stopDrain returns.
func TestOutboxDrain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := NewOutbox[int](cancel, 1000)
	var (
		mu      sync.Mutex
		got     []int
		calls   int
		running atomic.Int32
	)
	o.StartDrain(func(batch []int) error {
		if running.Add(1) != 1 {
			t.Error("two drain calls at once")
		}
		defer running.Add(-1)
		mu.Lock()
		defer mu.Unlock()
		calls++
		got = append(got, batch...)
		return nil
	})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := calls
		mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no first drain call with nothing queued")
		}
	}
	for i := 0; i < 500; i++ {
		o.send(i)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 500 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("drained %d of 500", n)
		}
		time.Sleep(time.Millisecond)
	}
	o.StopDrain()
	mu.Lock()
	for i, v := range got {
		if v != i {
			t.Fatalf("message %d is %d: out of order", i, v)
		}
	}
	mu.Unlock()
	o.send(500)
	time.Sleep(10 * time.Millisecond)
	mu.Lock()
	if len(got) != 500 {
		t.Errorf("sent after stopDrain: %v", got[500:])
	}
	mu.Unlock()
	if ctx.Err() != nil {
		t.Fatal("stream ended without a drain error")
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	failing := NewOutbox[int](cancel2, 10)
	failing.StartDrain(func([]int) error { return errors.New("broken stream") })
	failing.send(1)
	select {
	case <-ctx2.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a drain error did not end the stream")
	}
	failing.StopDrain()
}
