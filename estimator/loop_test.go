package estimator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/brimnode/brim/monitor"
)

type staticUsage struct{ u monitor.Usage }

func (s staticUsage) Usage() monitor.Usage { return s.u }

func TestRunForwardsThroughHysteresis(t *testing.T) {
	fixed, err := NewFixed(Options{"resources": "cpus:2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sent := make(chan Estimate, 10)
	calls := 0
	forward := func(_ context.Context, est Estimate) error {
		calls++
		sent <- est
		if calls == 1 {
			return errors.New("master unreachable")
		}
		return nil
	}
	f := NewForwarder(ForwarderConfig{})
	done := make(chan error, 1)
	go func() { done <- Run(ctx, staticUsage{}, fixed, f, 5*time.Millisecond, forward, nil) }()
	// The first send fails, so the same estimate is sent again; after
	// that an unchanged estimate is not sent.
	for range 2 {
		if est := <-sent; est.Revocable.CPUs() != 2000 {
			t.Fatalf("forwarded %s", est.Revocable)
		}
	}
	for { // let the loop run more rounds (several Decide calls)
		cur, at := f.Current()
		if _, fwdAt, _ := f.Forwarded(); at.After(fwdAt.Add(20*time.Millisecond)) && cur.Revocable.CPUs() == 2000 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if len(sent) != 0 {
		t.Fatalf("unchanged estimate forwarded again: %d more sends", len(sent))
	}
}
