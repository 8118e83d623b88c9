package master

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkersReuseBoundAndEnd: one after another, calls share one worker
// (its grown stack); at once, no more than max run; idle, workers end.
func TestWorkersReuseBoundAndEnd(t *testing.T) {
	w := newWorkers(2, 200*time.Millisecond)
	for range 5 {
		ran := false
		w.do(func() { ran = true })
		if !ran {
			t.Fatal("do returned before its function ran")
		}
		// Let the worker get back to waiting for a job: a call that
		// comes before it does starts another worker (seen under load).
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(w.sem); n != 1 {
		t.Fatalf("%d workers after 5 calls one after another, want 1", n)
	}

	var running, most atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.do(func() {
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-release
				running.Add(-1)
			})
		}()
	}
	for most.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a third would start now if it could
	close(release)
	wg.Wait()
	if m := most.Load(); m != 2 {
		t.Fatalf("%d ran at once, want at most (and here exactly) 2", m)
	}

	deadline := time.Now().Add(10 * time.Second)
	for len(w.sem) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still there 10 s after the last call (idle 200 ms)", len(w.sem))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
