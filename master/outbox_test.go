package master

import (
	"context"
	"testing"
)

// TestOutbox: messages come out in order, a queue past its limit ends the
// stream, and a nil outbox (a disconnected peer) drops what is sent.
func TestOutbox(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := newOutbox[int](cancel, 3)
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
	if got := o.take(); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("take = %v, want [1 2 3]", got)
	}
	if got := o.take(); len(got) != 0 {
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
	var none *outbox[int]
	if none.send(1) {
		t.Fatal("nil outbox accepted a message")
	}
}
