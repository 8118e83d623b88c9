package scheduler_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/brimnode/brim/scheduler"
)

// TestRetryDelayBounded: with no master to reach, Run retries after
// delays that grow to at most 3 s (2 s, jittered by half). With 5 s
// (up to 7.5 s) frameworks that had found no master through an outage
// reached the leader elected after it 6.3-6.9 s late (make chaos, seed
// 20261130; bound TTL + 2 s).
func TestRetryDelayBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there: every attempt is refused
	d, err := scheduler.New(scheduler.Options{Master: addr, Name: "f"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	delays := make(chan time.Duration, 100)
	done := make(chan error, 1)
	go func() {
		done <- d.Run(ctx, scheduler.Callbacks{Disconnected: func(_ context.Context, _ error, retryIn time.Duration) { delays <- retryIn }})
	}()
	defer func() { cancel(); <-done }()
	var longest time.Duration
	for i := range 9 { // 0.2, 0.4, 0.8, 1.6, then the longest
		select {
		case d := <-delays:
			longest = max(longest, d)
		case <-time.After(time.Minute):
			t.Fatalf("attempt %d never came", i+1)
		}
	}
	if longest > 3*time.Second || longest < time.Second {
		t.Fatalf("longest retry delay %v, want 1-3 s (2 s jittered)", longest)
	}
}
