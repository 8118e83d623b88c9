package qos

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/monitor"
)

// chanUsage is a UsageSource driven by the test: set notifies the loop
// and waits until a round has read the new usage, so no round sees a
// later snapshot than the one it was notified for.
type chanUsage struct {
	mu        sync.Mutex
	read      *sync.Cond
	u         monitor.Usage
	gen, seen int
	ch        chan struct{}
}

func newChanUsage() *chanUsage {
	c := &chanUsage{ch: make(chan struct{})}
	c.read = sync.NewCond(&c.mu)
	return c
}

func (c *chanUsage) Usage() monitor.Usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = c.gen
	c.read.Broadcast()
	return c.u
}
func (c *chanUsage) Subscribe() (<-chan struct{}, func()) { return c.ch, func() {} }
func (c *chanUsage) set(u monitor.Usage) {
	c.mu.Lock()
	c.u = u
	c.gen++
	gen := c.gen
	c.mu.Unlock()
	c.ch <- struct{}{}
	c.mu.Lock()
	for c.seen < gen {
		c.read.Wait()
	}
	c.mu.Unlock()
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
	src := newChanUsage()
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
	if got := recv(t, act.calls); got != "quota be" {
		t.Fatalf("actuator call %q", got)
	}
	cancel()
	if err := recv(t, done); !errors.Is(err, context.Canceled) {
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

// scriptedController fails or succeeds as told, reports each call on
// calls, and is pending while pending > 0 (decremented per call).
type scriptedController struct {
	fail    func(call int) bool
	calls   chan int
	n       int
	pending int
}

func (s *scriptedController) Corrections(context.Context, monitor.Usage) ([]Correction, error) {
	s.n++
	if s.pending > 0 {
		s.pending--
	}
	s.calls <- s.n
	if s.fail(s.n) {
		return nil, errors.New("plugin unavailable")
	}
	return nil, nil
}

func (s *scriptedController) Pending() bool { return s.pending > 0 }

// recordHandler keeps the records logged through it.
type recordHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

// messages returns "LEVEL message failed_rounds=N" for each record.
func (h *recordHandler) messages() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		s := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "failed_rounds" {
				s += " failed_rounds=" + a.Value.String()
			}
			return true
		})
		out = append(out, s)
	}
	return out
}

// A controller that keeps failing is logged once per interval, not once
// per round (a monitor round makes a tick round and a notified round, and
// every latency report another): here five rounds within one interval
// give one warning; its recovery and the next run of failures are logged.
func TestRunLogsControllerFailuresOncePerInterval(t *testing.T) {
	h := &recordHandler{}
	c := &scriptedController{fail: func(n int) bool { return n != 6 }, calls: make(chan int)}
	// Rounds 1–5 fail, 6 succeeds, 7 and 8 fail (round 8 only makes
	// sure round 7 has logged before the loop is stopped).
	src := newChanUsage()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, src, c, NewApplier(&fakeActuator{}, nil), LoopConfig{Interval: time.Hour}, slog.New(h))
	}()
	for want := 1; want <= 8; want++ {
		src.set(node(want, time.Millisecond))
		if got := recv(t, c.calls); got != want {
			t.Fatalf("call %d, want %d", got, want)
		}
	}
	cancel()
	if err := recv(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	want := []string{
		"WARN qos controller failed; no corrections this round failed_rounds=1",
		"INFO qos controller recovered failed_rounds=5",
		"WARN qos controller failed; no corrections this round failed_rounds=1",
	}
	if got := h.messages(); !slices.Equal(got, want) {
		t.Fatalf("log records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// While the controller has a degradation to confirm (Pender), the loop
// runs rounds every Recheck without waiting for a tick or a notification.
func TestRunRechecksPendingDegradation(t *testing.T) {
	c := &scriptedController{fail: func(int) bool { return false }, calls: make(chan int), pending: 3}
	src := newChanUsage()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, src, c, NewApplier(&fakeActuator{}, nil), LoopConfig{Interval: time.Hour, Recheck: time.Millisecond}, nil)
	}()
	src.set(node(0, time.Millisecond)) // the only notification
	for want := 1; want <= 3; want++ {
		if got := recv(t, c.calls); got != want {
			t.Fatalf("call %d, want %d", got, want)
		}
	}
	// No longer pending: no round until the next tick (an hour).
	select {
	case n := <-c.calls:
		t.Fatalf("round %d without a pending degradation", n)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if err := recv(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
}

// recv receives from ch, failing the test after a minute (a loop that
// never runs the round a test waits for must not hang the suite).
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("nothing on %T within a minute", ch)
		panic("unreachable")
	}
}
