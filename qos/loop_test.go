package qos

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/monitor"
)

type chanUsage struct {
	mu sync.Mutex
	u  monitor.Usage
	ch chan struct{}
}

func (c *chanUsage) Usage() monitor.Usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.u
}
func (c *chanUsage) Subscribe() (<-chan struct{}, func()) { return c.ch, func() {} }
func (c *chanUsage) set(u monitor.Usage) {
	c.mu.Lock()
	c.u = u
	c.mu.Unlock()
	c.ch <- struct{}{}
}

type syncActuator struct {
	fakeActuator
	calls chan string
}

func (s *syncActuator) SetCPUQuota(_ context.Context, id string, _ int64) error {
	s.calls <- "quota " + id
	return nil
}

func TestRunEventDriven(t *testing.T) {
	ic, err := NewInterference(Options{"warmup": "2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := &chanUsage{ch: make(chan struct{})}
	act := &syncActuator{calls: make(chan string, 10)}
	a := NewApplier(act, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	// An hour between ticks: only notifications drive the rounds.
	go func() { done <- Run(ctx, src, ic, a, LoopConfig{Interval: time.Hour}, nil) }()
	src.set(node(0, time.Millisecond, "be"))
	src.set(node(1, time.Millisecond, "be"))
	src.set(node(2, 20*time.Millisecond, "be")) // degraded latency reports arrive:
	src.set(node(3, 20*time.Millisecond, "be")) // the second in a row corrects (persist=2)
	if got := <-act.calls; got != "quota be" {
		t.Fatalf("actuator call %q", got)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if act := a.Active(); len(act) != 1 || act[0].Trigger.Signal != SignalAppLatency {
		t.Fatalf("active = %+v", act)
	}
	// Containers that went away are forgotten.
	a.Prune(&monitor.Usage{})
	if len(a.Active()) != 0 {
		t.Fatal("prune kept a gone container")
	}
}
