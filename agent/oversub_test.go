package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/estimator"
	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/qos"
	"github.com/brimnode/brim/resources"
)

// fakeCgroups records the QoS cgroup changes.
type fakeCgroups struct {
	mu    sync.Mutex
	calls []string
	// freezing, when set, receives the id of every Freeze, which then
	// waits for unfreeze (a freeze waiting for tasks in D state).
	freezing, unfreeze chan string
}

func (f *fakeCgroups) record(s string) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.mu.Unlock()
}

func (f *fakeCgroups) SetCPUQuota(_ context.Context, id string, milli int64) error {
	f.record("quota " + id + " " + FormatMilli(milli))
	return nil
}
func (f *fakeCgroups) Freeze(_ context.Context, id string) error {
	if f.freezing != nil {
		f.freezing <- id
		<-f.unfreeze
	}
	f.record("freeze " + id)
	return nil
}
func (f *fakeCgroups) Thaw(_ context.Context, id string) error { f.record("thaw " + id); return nil }

func (f *fakeCgroups) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, ", ")
}

// newOversubAgent returns a recovered agent with oversubscription whose
// first estimate is computed (the loops run at long intervals).
func newOversubAgent(t *testing.T, est estimator.Estimator, name string, cg CgroupActuator) *Agent {
	t.Helper()
	return newOversubAgentAt(t, t.TempDir(), newFakeRuntime(t.TempDir()), est, name, cg, nil)
}

// newOversubAgentAt is newOversubAgent over state dir dir and runtime rt,
// with cgs as Options.Cgroups (pause, top).
func newOversubAgentAt(t *testing.T, dir string, rt *fakeRuntime, est estimator.Estimator, name string, cg CgroupActuator, cgs ContainerCgroups) *Agent {
	t.Helper()
	a, err := New(Options{
		StateDir: dir, Runtime: rt, Cgroups: cgs,
		Resources: Resources{MilliCPUs: 2000, MemMiB: 1000}, CgroupParent: "/brim",
		Oversub: &Oversub{
			Host: monitor.NoHost, Estimator: est, EstimatorName: name, Cgroups: cg,
			MonitorInterval: time.Hour, EstimatorInterval: time.Hour, QoSInterval: time.Hour,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if err := a.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.over.start(a)
	return a
}

func fixed(t *testing.T, res string) estimator.Estimator {
	t.Helper()
	e, err := estimator.NewFixed(estimator.Options{"resources": res}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestRevocableAdmission(t *testing.T) {
	ctx := context.Background()
	a := newOversubAgent(t, fixed(t, "cpus:1;mem:200"), "fixed", nil)
	be := Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 600, MemMiB: 100}, Revocable: true}
	if _, err := a.Launch(ctx, be); err != nil {
		t.Fatal(err)
	}
	// The pool is the estimate plus what revocable containers hold: 0.4
	// cpus are left whether or not the estimator has run since.
	_, err := a.Launch(ctx, be)
	var ie *InsufficientResourcesError
	if !errors.As(err, &ie) || !errors.Is(err, ErrInsufficientResources) || ie.Pool != "revocable" ||
		ie.Free.CPUs() != 400 || !strings.Contains(err.Error(), "insufficient revocable resources: asked cpus:0.6, free cpus:0.4") {
		t.Fatalf("second revocable launch: %v", err)
	}
	// Revocable containers do not use the agent's own resources.
	if _, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 2000, MemMiB: 1000}}); err != nil {
		t.Fatalf("non-revocable launch of the whole node beside a revocable one: %v", err)
	}
	in := a.Info()
	if in.Used != (Resources{MilliCPUs: 2000, MemMiB: 1000}) || in.Oversub == nil || in.Oversub.Used != (Resources{MilliCPUs: 600, MemMiB: 100}) ||
		in.Oversub.Pool != (Resources{MilliCPUs: 1000, MemMiB: 200}) || in.Oversub.Free != (Resources{MilliCPUs: 400, MemMiB: 100}) {
		t.Fatalf("info = %+v oversub %+v", in, in.Oversub)
	}
	// After a new estimate (which subtracts the revocable in use) the pool
	// is unchanged. Sample first: launches only ask for a monitor round, so
	// the last snapshot may predate the revocable container.
	if err := a.over.mon.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.over.est.Estimate(ctx, a.over.mon.Usage()); err != nil {
		t.Fatal(err)
	}
	if st, _ := a.Oversubscription(); st.Pool != (Resources{MilliCPUs: 1000, MemMiB: 200}) || st.Current.Offered() != (Resources{MilliCPUs: 400, MemMiB: 100}) {
		t.Fatalf("after re-estimate: pool %s offered %s", st.Pool, st.Current.Offered())
	}
	// Growing a revocable container is checked against the pool too.
	c := a.List()[0]
	if _, err := a.Resize(ctx, c.ID, Update{MilliCPUs: 1100}); !errors.As(err, &ie) || ie.Pool != "revocable" {
		t.Fatalf("resize beyond the pool: %v", err)
	}
	if _, err := a.Resize(ctx, c.ID, Update{MilliCPUs: 1000}); err != nil {
		t.Fatalf("resize within the pool: %v", err)
	}
}

func TestRevocableRefusedWithNoop(t *testing.T) {
	a := newOversubAgent(t, nil, "", nil)
	_, err := a.Launch(context.Background(), Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}, Revocable: true})
	if !errors.Is(err, ErrInsufficientResources) || !strings.Contains(err.Error(), "estimator noop") ||
		!strings.Contains(err.Error(), "never offers revocable resources") {
		t.Fatalf("revocable launch with noop: %v", err)
	}
	if len(a.List()) != 0 {
		t.Fatalf("refused launch left a record: %+v", a.List())
	}
}

func TestCorrectionsBlockAdmissionAndKillThaws(t *testing.T) {
	ctx := context.Background()
	cg := &fakeCgroups{}
	a := newOversubAgent(t, fixed(t, "cpus:1;mem:200"), "fixed", cg)
	c, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}, Revocable: true})
	if err != nil {
		t.Fatal(err)
	}
	trig := qos.Trigger{Signal: qos.SignalAppLatency, Victim: "lc", Value: 0.004, Baseline: 0.001, Threshold: 0.002}
	if err := a.over.applier.Apply(ctx, []qos.Correction{{Type: qos.Freeze, ContainerID: c.ID, Reason: "test", Trigger: trig}}); err != nil {
		t.Fatal(err)
	}
	_, err = a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}, Revocable: true})
	if !errors.Is(err, ErrInsufficientResources) || !strings.Contains(err.Error(), "QoS corrections are in force") {
		t.Fatalf("revocable launch during a freeze: %v", err)
	}
	st, _ := a.Oversubscription()
	if len(st.Active) != 1 || st.Active[0].Trigger != trig || st.Blocking == "" {
		t.Fatalf("status = %+v", st)
	}
	// The QoS kill goes through the agent with reason CONTAINER_PREEMPTED
	// and thaws the container first.
	if err := a.over.applier.Apply(ctx, []qos.Correction{{Type: qos.Kill, ContainerID: c.ID, Reason: "test", Trigger: trig}}); err != nil {
		t.Fatal(err)
	}
	got, err := a.Get(c.ID)
	if err != nil || got.Exit == nil || got.Exit.Reason != ReasonPreempted {
		t.Fatalf("killed container = %+v, %v", got, err)
	}
	if calls := cg.String(); !strings.HasPrefix(calls, "freeze "+c.ID+", thaw "+c.ID) {
		t.Fatalf("cgroup calls = %s", calls)
	}
	if st, _ := a.Oversubscription(); len(st.Active) != 0 || st.Used != (Resources{}) {
		t.Fatalf("after kill: %+v", st)
	}
	// An operator's kill of a frozen container thaws it first, without
	// recording a correction.
	a.over.applier.Forget(c.ID)
	c2, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}, Revocable: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.over.applier.Apply(ctx, []qos.Correction{{Type: qos.Freeze, ContainerID: c2.ID, Reason: "test", Trigger: trig}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Kill(ctx, c2.ID, 0); err != nil {
		t.Fatal(err)
	}
	if calls := cg.String(); !strings.HasSuffix(calls, "freeze "+c2.ID+", thaw "+c2.ID) {
		t.Fatalf("cgroup calls = %s", calls)
	}
	for _, r := range a.over.applier.Recent() {
		if r.Type == qos.Thaw {
			t.Fatalf("thaw before an operator's kill recorded as a correction: %+v", r)
		}
	}
}

// TestAdmissionAfterCorrectionsLift: an estimate computed while a QoS
// correction was in force offers nothing; once the corrections are
// lifted, admission takes the last estimate computed without one, not
// that empty one until the next estimate (an estimator interval, 15 s by
// default). TestCorrectionsBlockAdmissionAndKillThaws failed so when the
// estimator loop's first estimate fell within its freeze.
func TestAdmissionAfterCorrectionsLift(t *testing.T) {
	ctx := context.Background()
	a := newOversubAgent(t, fixed(t, "cpus:1;mem:200"), "fixed", &fakeCgroups{})
	spec := Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}, Revocable: true}
	c, err := a.Launch(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	trig := qos.Trigger{Signal: qos.SignalAppLatency, Victim: "lc", Value: 0.004, Baseline: 0.001, Threshold: 0.002}
	if err := a.over.applier.Apply(ctx, []qos.Correction{{Type: qos.Freeze, ContainerID: c.ID, Reason: "test", Trigger: trig}}); err != nil {
		t.Fatal(err)
	}
	// The estimator loop's estimate, during the freeze.
	if est, err := a.over.est.Estimate(ctx, a.over.mon.Usage()); err != nil || !estimator.Blocked(est) {
		t.Fatalf("estimate during a freeze: %+v, %v; want the guard's", est, err)
	}
	if err := a.over.applier.Apply(ctx, []qos.Correction{{Type: qos.Kill, ContainerID: c.ID, Reason: "test", Trigger: trig}}); err != nil {
		t.Fatal(err)
	}
	if why := a.over.applier.Blocking(); why != "" {
		t.Fatalf("still blocking after the kill: %s", why)
	}
	if _, err := a.Launch(ctx, spec); err != nil {
		t.Fatalf("revocable launch once the corrections are lifted: %v", err)
	}
}

func TestReportLatency(t *testing.T) {
	ctx := context.Background()
	a := newOversubAgent(t, nil, "", nil)
	c, err := a.Launch(ctx, Spec{Name: "lc", Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.ReportLatency("lc", LatencyReport{P50: time.Millisecond, P99: 3 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := a.over.mon.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	cu := a.over.mon.Usage()
	u := cu.Container(c.ID)
	if u == nil || u.Latest.AppLatency == nil || u.Latest.AppLatency.P99 != 3*time.Millisecond || u.Latest.AppLatency.Source != "app" {
		t.Fatalf("usage after report = %+v", u)
	}
	if err := a.ReportLatency("lc", LatencyReport{P50: 2 * time.Millisecond, P99: time.Millisecond}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("p50 > p99: %v", err)
	}
	if err := a.ReportLatency("nope", LatencyReport{P99: time.Millisecond}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown container: %v", err)
	}
	plain, err := New(Options{StateDir: t.TempDir(), Runtime: newFakeRuntime(t.TempDir()), Resources: Resources{MilliCPUs: 1000, MemMiB: 100}})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Launch(ctx, Spec{Name: "lc", Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}}); err != nil {
		t.Fatal(err)
	}
	if err := plain.ReportLatency("lc", LatencyReport{P99: time.Millisecond}); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("without oversubscription: %v", err)
	}
	if _, ok := plain.Oversubscription(); ok || plain.Metrics() != nil {
		t.Fatal("oversubscription status without oversubscription")
	}
}

func TestSetForward(t *testing.T) {
	ctx := context.Background()
	a, err := New(Options{
		StateDir: t.TempDir(), Runtime: newFakeRuntime(t.TempDir()),
		Resources: Resources{MilliCPUs: 2000, MemMiB: 1000},
		Oversub: &Oversub{
			Host: monitor.NoHost, Estimator: fixed(t, "cpus:1;mem:200"), EstimatorName: "fixed",
			MonitorInterval: time.Hour, EstimatorInterval: 10 * time.Millisecond, QoSInterval: time.Hour,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	a.over.start(a)
	// Without a forward function the estimate is kept locally.
	if st, _ := a.Oversubscription(); !st.HasForwarded || st.Forwarded.Offered() != (Resources{MilliCPUs: 1000, MemMiB: 200}) {
		t.Fatalf("status before SetForward: %+v", st)
	}
	type forwarded struct {
		estimator.Estimate
		inUse resources.Resources // ForwardedInUse inside the call
	}
	sent := make(chan forwarded, 16)
	a.SetForward(func(_ context.Context, e estimator.Estimate) error {
		select {
		case sent <- forwarded{e, a.ForwardedInUse(func(string) bool { return true })}:
		default:
		}
		return nil
	})
	// The next check forwards the unchanged estimate (hysteresis reset).
	select {
	case e := <-sent:
		if (Estimate{Estimate: e.Estimate}).Offered() != (Resources{MilliCPUs: 1000, MemMiB: 200}) || len(e.inUse) != 0 {
			t.Fatalf("forwarded %s, in use %s (want nothing in use)", e.Revocable, e.inUse)
		}
	case <-time.After(time.Minute):
		t.Fatal("nothing forwarded after SetForward")
	}
	// Launching revocable work changes the estimate, which is forwarded.
	if _, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 600, MemMiB: 100}, Revocable: true}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(time.Minute)
	for {
		select {
		case e := <-sent:
			if (Estimate{Estimate: e.Estimate}).Offered() == (Resources{MilliCPUs: 400, MemMiB: 100}) {
				// The master adds back what was in use in the same
				// snapshot (master: revocablePoolLocked).
				if !e.inUse.Equal(resources.MustParse("cpus{REV}:0.6;mem{REV}:100")) {
					t.Fatalf("forwarded 0.4 cpus with %q in use, want cpus{REV}:0.6;mem{REV}:100", e.inUse)
				}
				// Containers the caller leaves out (not the master's
				// tasks) are not in it.
				if none := a.ForwardedInUse(func(string) bool { return false }); len(none) != 0 {
					t.Fatalf("in use with every container left out: %s", none)
				}
				return
			}
		case <-deadline:
			t.Fatal("the smaller estimate was never forwarded")
		}
	}
}

func TestRestartLiftsCorrections(t *testing.T) {
	ctx := context.Background()
	dir, rt := t.TempDir(), newFakeRuntime(t.TempDir())
	opts := func(cg CgroupActuator) Options {
		return Options{StateDir: dir, Runtime: rt, Resources: Resources{MilliCPUs: 2000, MemMiB: 1000},
			Oversub: &Oversub{Host: monitor.NoHost, Estimator: fixed(t, "cpus:1;mem:200"), EstimatorName: "fixed", Cgroups: cg,
				MonitorInterval: time.Hour, EstimatorInterval: time.Hour, QoSInterval: time.Hour}}
	}
	a, err := New(opts(&fakeCgroups{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	a.over.start(a)
	be, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 300, MemMiB: 50}, Revocable: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 300, MemMiB: 50}}); err != nil {
		t.Fatal(err)
	}
	a.Close()

	cg := &fakeCgroups{}
	b, err := New(opts(cg))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	b.over.start(b)
	// Only the revocable container is touched, and its pool accounting
	// is recovered.
	if got, want := cg.String(), "thaw "+be.ID+", quota "+be.ID+" 0"; got != want {
		t.Fatalf("cgroup calls at start = %q, want %q", got, want)
	}
	if st, _ := b.Oversubscription(); st.Used != (Resources{MilliCPUs: 300, MemMiB: 50}) || st.Free != (Resources{MilliCPUs: 700, MemMiB: 150}) {
		t.Fatalf("recovered pool: %+v", st)
	}
	if in := b.Info(); in.Used != (Resources{MilliCPUs: 300, MemMiB: 50}) {
		t.Fatalf("recovered non-revocable use: %s", in.Used)
	}
}

// countingController counts its rounds.
type countingController struct {
	mu     sync.Mutex
	rounds int
}

func (c *countingController) Corrections(context.Context, monitor.Usage) ([]qos.Correction, error) {
	c.mu.Lock()
	c.rounds++
	c.mu.Unlock()
	return nil, nil
}

func (c *countingController) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rounds
}

// A reload swaps the estimator (the next estimate is the new one's) and
// the QoS controller, but not while corrections are in force.
func TestSwapEstimatorAndController(t *testing.T) {
	ctx := context.Background()
	a := newOversubAgent(t, fixed(t, "cpus:1;mem:200"), "fixed", &fakeCgroups{})
	if err := a.SwapEstimator(fixed(t, "cpus:0.5;mem:100"), "fixed-small"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.over.est.Estimate(ctx, a.over.mon.Usage()); err != nil {
		t.Fatal(err)
	}
	if st, _ := a.Oversubscription(); st.Estimator != "fixed-small" || st.Current.Offered() != (Resources{MilliCPUs: 500, MemMiB: 100}) {
		t.Fatalf("after the swap: estimator %q offered %s", st.Estimator, st.Current.Offered())
	}

	c, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}, Revocable: true})
	if err != nil {
		t.Fatal(err)
	}
	trig := qos.Trigger{Signal: qos.SignalAppLatency, Victim: "lc", Value: 0.004, Baseline: 0.001, Threshold: 0.002}
	if err := a.over.applier.Apply(ctx, []qos.Correction{{Type: qos.Freeze, ContainerID: c.ID, Reason: "test", Trigger: trig}}); err != nil {
		t.Fatal(err)
	}
	next := &countingController{}
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := a.SwapController(tctx, next, "counting"); !errors.Is(err, qos.ErrCorrectionsInForce) {
		t.Fatalf("swap with a freeze in force = %v, want ErrCorrectionsInForce", err)
	}
	if st, _ := a.Oversubscription(); st.QoS != "noop" {
		t.Fatalf("refused swap renamed the controller: %q", st.QoS)
	}
	if err := a.over.applier.Apply(ctx, []qos.Correction{{Type: qos.Thaw, ContainerID: c.ID, Reason: "test", Trigger: trig}}); err != nil {
		t.Fatal(err)
	}
	if err := a.SwapController(tctx, next, "counting"); err != nil {
		t.Fatalf("swap once the freeze is lifted: %v", err)
	}
	if st, _ := a.Oversubscription(); st.QoS != "counting" {
		t.Fatalf("controller %q after the swap", st.QoS)
	}
	// The loop runs the new controller at once (its interval is an hour).
	for deadline := time.Now().Add(time.Minute); next.count() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the new controller never ran")
		}
	}
}

// TestNoFreezeDuringAKill: a QoS freeze that comes while a kill is under
// way (the process signalled, not yet gone) is refused, and the kill
// thaws the container whatever the applier's record says. A freeze that
// raced a kill once left a disk writer, signalled in an fsync, frozen:
// the kill waited 100 s for the controller's own thaw (colocation
// experiment).
func TestNoFreezeDuringAKill(t *testing.T) {
	ctx := context.Background()
	cg := &fakeCgroups{}
	a := newOversubAgent(t, fixed(t, "cpus:1;mem:200"), "fixed", cg)
	rt := a.rt.(*fakeRuntime)
	c, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}, Revocable: true})
	if err != nil {
		t.Fatal(err)
	}
	rt.heldKills = make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		_, err := a.Kill(ctx, c.ID, 0)
		done <- err
	}()
	select {
	case <-rt.heldKills:
	case <-time.After(10 * time.Second):
		t.Fatal("the kill never reached the runtime")
	}
	if calls := cg.String(); calls != "thaw "+c.ID {
		t.Errorf("cgroup calls before the signal = %q, want a thaw (no freeze recorded, none needed)", calls)
	}
	// The monitor's source says so, for the guards and the controller.
	if infos, err := a.Containers(ctx); err != nil || len(infos) != 1 || !infos[0].Stopping {
		t.Errorf("Containers during the kill = %+v, %v; want it listed as stopping", infos, err)
	}
	trig := qos.Trigger{Signal: qos.SignalAppLatency, Victim: "lc", Value: 0.004, Baseline: 0.001, Threshold: 0.002}
	err = a.over.applier.Apply(ctx, []qos.Correction{{Type: qos.Freeze, ContainerID: c.ID, Reason: "test", Trigger: trig}})
	if !errors.Is(err, ErrNotRunning) {
		t.Errorf("freeze during the kill: %v, want ErrNotRunning", err)
	}
	if calls := cg.String(); strings.Contains(calls, "freeze") {
		t.Errorf("cgroup calls = %q: frozen while being killed", calls)
	}
	rt.finish(c.ID, &ExitStatus{Code: 137, Signal: 9, Reason: "killed"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A kill that gives up waiting (ErrStillExiting) leaves the mark: the
	// process is still dying, and a freeze now would stop it. Its exit
	// clears the mark.
	a.opts.KillExitTimeout = 100 * time.Millisecond
	c3, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}, Revocable: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Kill(ctx, c3.ID, 0); !errors.Is(err, ErrStillExiting) {
		t.Fatalf("kill of a container that does not exit: %v, want ErrStillExiting", err)
	}
	<-rt.heldKills
	err = a.over.applier.Apply(ctx, []qos.Correction{{Type: qos.Freeze, ContainerID: c3.ID, Reason: "test", Trigger: trig}})
	if !errors.Is(err, ErrNotRunning) || strings.Contains(cg.String(), "freeze "+c3.ID) {
		t.Errorf("freeze of a container still dying after its kill gave up waiting: %v; calls %q", err, cg.String())
	}
	rt.finish(c3.ID, &ExitStatus{Code: 137, Signal: 9, Reason: "killed"})
	if _, err := a.Wait(ctx, c3.ID); err != nil {
		t.Fatal(err)
	}
	if a.over.isKilling(c3.ID) {
		t.Error("the kill mark outlived the container's exit")
	}
	// So does a kill whose caller stops waiting (its context ends).
	a.opts.KillExitTimeout = time.Hour
	c4, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}, Revocable: true})
	if err != nil {
		t.Fatal(err)
	}
	kctx, kcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer kcancel()
	if _, err := a.Kill(kctx, c4.ID, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("kill whose caller gave up: %v, want its context's error", err)
	}
	<-rt.heldKills
	if !a.over.isKilling(c4.ID) {
		t.Error("the kill mark went with the caller, the process still dying")
	}
	rt.finish(c4.ID, &ExitStatus{Code: 137, Signal: 9, Reason: "killed"})
	if _, err := a.Wait(ctx, c4.ID); err != nil {
		t.Fatal(err)
	}
	if a.over.isKilling(c4.ID) {
		t.Error("the kill mark outlived the container's exit")
	}
	// The kill over, the mark is gone: another container freezes as before.
	c2, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}, Revocable: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.over.applier.Apply(ctx, []qos.Correction{{Type: qos.Freeze, ContainerID: c2.ID, Reason: "test", Trigger: trig}}); err != nil {
		t.Fatal(err)
	}
	if a.over.isKilling(c.ID) || !strings.HasSuffix(cg.String(), "freeze "+c2.ID) {
		t.Errorf("after the kill: marked %v, calls %q", a.over.isKilling(c.ID), cg.String())
	}
}

// TestKillDuringAFreeze: a kill that begins while a QoS freeze is still
// writing (waiting for tasks in uninterruptible sleep) thaws after the
// freeze, and the agent's listing (the monitor's Stopping) does not wait
// for the freeze meanwhile.
func TestKillDuringAFreeze(t *testing.T) {
	ctx := context.Background()
	cg := &fakeCgroups{freezing: make(chan string), unfreeze: make(chan string)}
	a := newOversubAgent(t, fixed(t, "cpus:1;mem:200"), "fixed", cg)
	c, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 100, MemMiB: 10}, Revocable: true})
	if err != nil {
		t.Fatal(err)
	}
	trig := qos.Trigger{Signal: qos.SignalAppLatency, Victim: "lc", Value: 0.004, Baseline: 0.001, Threshold: 0.002}
	froze := make(chan error, 1)
	go func() {
		froze <- a.over.applier.Apply(ctx, []qos.Correction{{Type: qos.Freeze, ContainerID: c.ID, Reason: "test", Trigger: trig}})
	}()
	<-cg.freezing // the freeze is writing
	killed := make(chan error, 1)
	go func() {
		_, err := a.Kill(ctx, c.ID, 0)
		killed <- err
	}()
	listed := make(chan bool, 1)
	go func() {
		for !a.over.isKilling(c.ID) {
			time.Sleep(time.Millisecond)
		}
		infos, err := a.Containers(ctx)
		listed <- err == nil && len(infos) == 1 && infos[0].Stopping
	}()
	select {
	case ok := <-listed:
		if !ok {
			t.Error("the container being killed is not listed as stopping")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the listing waited behind the freeze")
	}
	cg.unfreeze <- c.ID
	if err := <-froze; err != nil {
		t.Fatal(err)
	}
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	if calls := cg.String(); calls != "freeze "+c.ID+", thaw "+c.ID {
		t.Errorf("cgroup calls = %q, want the freeze, then the kill's thaw", calls)
	}
}

// TestLentRevocableAdmission: a revocable container on capacity the
// master lends (Spec.Lent) is admitted against the agent's own free
// resources, not its oversubscription pool, which the noop estimator
// leaves empty (it was refused there: "never offers revocable
// resources"); it takes the agent's own resources from the others.
func TestLentRevocableAdmission(t *testing.T) {
	ctx := context.Background()
	a := newOversubAgent(t, nil, "", nil)
	c, err := a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 1500, MemMiB: 500}, Revocable: true, Lent: true})
	if err != nil {
		t.Fatalf("lent revocable launch: %v", err)
	}
	if !c.Revocable || !c.Lent {
		t.Fatalf("container revocable %v lent %v, want both", c.Revocable, c.Lent)
	}
	_, err = a.Launch(ctx, Spec{Command: []string{"x"}, Resources: Resources{MilliCPUs: 1000, MemMiB: 100}})
	var ie *InsufficientResourcesError
	if !errors.As(err, &ie) || ie.Pool == "revocable" {
		t.Fatalf("non-revocable launch beside the lent container: %v, want the agent's own resources short", err)
	}
	if in := a.Info(); in.Used != (Resources{MilliCPUs: 1500, MemMiB: 500}) {
		t.Fatalf("used = %+v, want the lent container's", in.Used)
	}
}
