package qos

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/monitor"
)

// listController returns the corrections queued on it, one list per
// round, and reports each round on calls.
type listController struct {
	name   string
	rounds chan []Correction
	calls  chan string
}

func (l *listController) Corrections(context.Context, monitor.Usage) ([]Correction, error) {
	l.calls <- l.name
	select {
	case cs := <-l.rounds:
		return cs, nil
	default:
		return nil, nil
	}
}

// A controller is replaced between rounds, never while the corrections it
// made are in force: the new one would not know to lift them.
func TestSwitchReplacesBetweenRounds(t *testing.T) {
	calls := make(chan string, 10)
	a := &listController{name: "a", rounds: make(chan []Correction, 2), calls: calls}
	b := &listController{name: "b", rounds: make(chan []Correction, 1), calls: calls}
	src := newChanUsage()
	io := &ioActuator{}
	ap := NewApplier(io, nil)
	sw := NewSwitch()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, src, a, ap, LoopConfig{Interval: time.Hour, Switch: sw}, nil) }()

	a.rounds <- []Correction{{Type: Throttle, ContainerID: "be", CPUQuota: 100}}
	src.set(node(0, time.Millisecond, "be"))
	if got := recv(t, calls); got != "a" {
		t.Fatalf("round by %s, want a", got)
	}
	waitActive(t, ap, 1)
	old, err := sw.Replace(ctx, b)
	if !errors.Is(err, ErrCorrectionsInForce) || old != nil {
		t.Fatalf("replace with a throttle in force = %v, %v; want ErrCorrectionsInForce", old, err)
	}
	// a lifts its correction; now b may take over.
	a.rounds <- []Correction{{Type: Unthrottle, ContainerID: "be"}}
	src.set(node(1, time.Millisecond, "be"))
	if got := recv(t, calls); got != "a" {
		t.Fatalf("round by %s, want a (the replacement was refused)", got)
	}
	waitActive(t, ap, 0)
	old, err = sw.Replace(ctx, b)
	if err != nil || old != Controller(a) {
		t.Fatalf("replace = %v, %v; want a, nil", old, err)
	}
	// The new controller runs a round at once, and every round after.
	if got := recv(t, calls); got != "b" {
		t.Fatalf("round by %s after the replacement, want b", got)
	}
	src.set(node(2, time.Millisecond, "be"))
	if got := recv(t, calls); got != "b" {
		t.Fatalf("round by %s, want b", got)
	}
	// A slow start's limit does not hold b: it is lifted, and a takes
	// over (idle work stays parked for good; a reload was refused for
	// good with it).
	b.rounds <- []Correction{{Type: ThrottleIO, ContainerID: "be", IOBytesPerSec: 1 << 20, Trigger: Trigger{Signal: SignalSlowStart}}}
	src.set(node(3, time.Millisecond, "be"))
	if got := recv(t, calls); got != "b" {
		t.Fatalf("round by %s, want b", got)
	}
	waitActive(t, ap, 1)
	if old, err := sw.Replace(ctx, a); err != nil || old != Controller(b) {
		t.Fatalf("replace with a slow start in force = %v, %v; want b, nil", old, err)
	}
	if len(ap.Active()) != 0 || !strings.Contains(strings.Join(io.calls, "|"), "io=0 be") {
		t.Fatalf("after the replacement: in force %v, io calls %v; want the slow start lifted", ap.Active(), io.calls)
	}
	if got := recv(t, calls); got != "a" {
		t.Fatalf("round by %s after the replacement, want a", got)
	}
	cancel()
	if err := recv(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	// A loop that is not running does not take the request.
	tctx, tcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer tcancel()
	if _, err := sw.Replace(tctx, a); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("replace without a loop = %v, want DeadlineExceeded", err)
	}
}

// waitActive waits until a has n corrections in force (the loop applies
// them after the round the test saw).
func waitActive(t *testing.T, a *Applier, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for len(a.Active()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("corrections in force %v, want %d", a.Active(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
