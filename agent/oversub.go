package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/brimnode/brim/estimator"
	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/pressure"
	"github.com/brimnode/brim/qos"
	"github.com/brimnode/brim/resources"
	"github.com/prometheus/client_golang/prometheus"
)

// Oversub configures oversubscription in the agent: the monitor sampling
// the containers, the resource estimator offering revocable resources, and
// the QoS controller protecting non-revocable work from revocable work.
// Zero fields take the defaults.
//
// With Oversub set, revocable containers are admitted against the
// revocable pool — what the estimator currently offers plus the revocable
// resources already in use — and no longer count against the agent's
// (non-revocable) Resources. Without a master the local estimate is the
// pool; with a Forward function (the master link) it is the larger of the
// current estimate and the last one forwarded, since the master allocates
// from what was forwarded.
type Oversub struct {
	// MonitorInterval is the sampling interval; default 1 s.
	MonitorInterval time.Duration
	// Signals add to each sample (the run-queue latency source).
	Signals []monitor.SignalSource
	// Host samples node-wide figures; nil: gopsutil.
	Host monitor.HostSource

	// Estimator computes the revocable resources; nil: noop.
	// EstimatorName names it in errors and status ("fixed").
	Estimator     estimator.Estimator
	EstimatorName string
	// EstimatorInterval is the estimator's check interval; default 15 s.
	EstimatorInterval time.Duration
	// Forward sends an estimate on (to the master) when the Forwarder's
	// hysteresis lets it through; nil keeps estimates local.
	Forward estimator.ForwardFunc

	// Controller computes QoS corrections; nil: noop. QoSName names it.
	Controller qos.Controller
	QoSName    string
	// QoSInterval is the QoS round interval (rounds also run on every
	// monitor notification); default 1 s.
	QoSInterval time.Duration
	// Cgroups throttles, freezes and thaws containers (the cgroups
	// isolator); kills go through the agent. nil: such corrections fail
	// with an error wrapping ErrNotSupported.
	Cgroups CgroupActuator

	// RunQueueSource names the run-queue latency source in Info ("ebpf",
	// "schedstat-mean"); informational.
	RunQueueSource string

	// MemoryGuard, when set, runs a pressure.MemoryGuard over the agent's
	// containers: it evicts revocable containers under memory pressure
	// (reason CONTAINER_PREEMPTED). MemoryScope reads the memory they
	// share (the cgroups isolator's parent); nil: PSI only.
	MemoryGuard *pressure.MemoryConfig
	MemoryScope pressure.ScopeReader
	// IOGuard, when set with IOThrottler (the cgroups isolator), runs a
	// pressure.IOGuard that throttles revocable containers' IO while a
	// non-revocable one stalls on IO.
	IOGuard     *pressure.IOConfig
	IOThrottler pressure.IOThrottler
}

// CgroupActuator changes a running container's cgroups for QoS
// corrections: *cgroups.Isolator implements it. SetCPUQuota with milli = 0
// restores the container's own limit.
type CgroupActuator interface {
	SetCPUQuota(ctx context.Context, id string, milli int64) error
	Freeze(ctx context.Context, id string) error
	Thaw(ctx context.Context, id string) error
}

// Estimate is the estimator's latest result as the agent holds it.
type Estimate struct {
	estimator.Estimate
	// At is when it was computed; zero before the first.
	At time.Time
	// InUse are the revocable resources allocated when it was computed
	// (the estimate does not count them).
	InUse Resources
	// inUseBy is InUse per revocable container (ForwardedInUse).
	inUseBy map[string]Resources
}

// Offered is the estimate's revocable resources in the agent's units.
// Revocable bandwidth is borrowed, never accounted: net_bw is left out.
func (e Estimate) Offered() Resources {
	r := resourcesOf(e.Revocable.Revocable())
	r.NetMbit = 0
	return r
}

// Oversubscription is the oversubscription status: the estimate, the
// revocable pool and the QoS corrections.
type Oversubscription struct {
	Estimator, QoS string
	// Current is the latest estimate; Forwarded the last one sent on
	// (HasForwarded false before the first).
	Current      Estimate
	Forwarded    Estimate
	HasForwarded bool
	// Blocking says why no new revocable resources are offered or
	// admitted (QoS corrections in force); empty otherwise.
	Blocking string
	// Pool is the revocable pool; Used what revocable containers hold;
	// Free what a new revocable container may take.
	Pool, Used, Free Resources
	// Active are the corrections in force; Recent the last applied.
	Active []qos.Correction
	Recent []qos.Applied
	// RunQueueSource names the run-queue latency source.
	RunQueueSource string
	// Evictions are the memory guard's last evictions; IOThrottled the
	// containers whose IO the IO guard throttles.
	Evictions   []pressure.Eviction
	IOThrottled []string
}

// oversub is the agent's oversubscription machinery.
type oversub struct {
	cfg     Oversub
	mon     *monitor.Monitor
	applier *qos.Applier
	fwd     *estimator.Forwarder
	est     *recorder
	ctrl    qos.Controller
	reg     *prometheus.Registry
	kick    chan struct{} // a monitor round is wanted (sample)
	memG    *pressure.MemoryGuard
	ioG     *pressure.IOGuard
	swtch   *qos.Switch // replaces ctrl in the QoS loop (SwapController)
	log     *slog.Logger

	nameMu           sync.Mutex // guards the names, which a swap changes
	estName, qosName string

	// killMu orders the QoS controller's freezes against kills: a
	// container being killed (killing) is thawed and frozen no more. A
	// freeze holds it across the cgroup write (up to the applier's freeze
	// wait); markMu guards only the marks, so that the monitor's listing
	// (Stopping) never waits behind a freeze.
	killMu  sync.Mutex
	markMu  sync.Mutex
	killing map[string]bool
}

// names returns the estimator's and the QoS controller's names.
func (o *oversub) names() (est, ctrl string) {
	o.nameMu.Lock()
	defer o.nameMu.Unlock()
	return o.estName, o.qosName
}

// recorder wraps the guarded estimator and keeps its latest estimate with
// the revocable resources in use that it saw, and the last one forwarded.
type recorder struct {
	// call is held across a call of e: a swap waits for the call in
	// flight, so a replaced estimator is never called once the swap
	// returns.
	call sync.Mutex
	e    estimator.Estimator

	mu        sync.Mutex
	forward   estimator.ForwardFunc
	cur, sent Estimate
	hasSent   bool
	// open is the latest estimate not computed while QoS corrections
	// blocked offers (estimator.Blocked): admission's once they lift,
	// until the next estimate.
	open Estimate
}

func (r *recorder) Estimate(ctx context.Context, u monitor.Usage) (estimator.Estimate, error) {
	r.call.Lock()
	est, err := r.e.Estimate(ctx, u)
	r.call.Unlock()
	if err != nil {
		return est, err
	}
	inUse := u.Allocated(true)
	at := u.Timestamp
	if at.IsZero() {
		at = time.Now()
	}
	by := map[string]Resources{}
	for i := range u.Containers {
		if c := &u.Containers[i]; c.Revocable {
			by[c.ID] = Resources{MilliCPUs: c.Limits.MilliCPUs, MemMiB: c.Limits.MemoryBytes >> 20}
		}
	}
	r.mu.Lock()
	r.cur = Estimate{Estimate: est, At: at, InUse: Resources{MilliCPUs: inUse.MilliCPUs, MemMiB: inUse.MemoryBytes >> 20}, inUseBy: by}
	if !estimator.Blocked(est) {
		r.open = r.cur
	}
	r.mu.Unlock()
	return est, nil
}

// send is the loop's ForwardFunc: it records the estimate as forwarded
// (it is the one just computed) and calls the configured Forward.
func (r *recorder) send(ctx context.Context, est estimator.Estimate) error {
	r.mu.Lock()
	r.sent, r.hasSent = r.cur, true
	forward := r.forward
	r.mu.Unlock()
	if forward == nil {
		return nil
	}
	return forward(ctx, est)
}

// swap makes e the estimator of the next call, once the call in flight
// (if any) has returned.
func (r *recorder) swap(e estimator.Estimator) {
	r.call.Lock()
	r.e = e
	r.call.Unlock()
}

func (r *recorder) forwarding() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.forward != nil
}

func (r *recorder) snapshot() (cur, sent Estimate, hasSent bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur, r.sent, r.hasSent
}

// lastOpen returns the latest estimate computed while no correction
// blocked offers (zero before the first).
func (r *recorder) lastOpen() Estimate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.open
}

// newOversub builds the monitor, applier, estimator loop state and metrics
// registry over a.
func newOversub(a *Agent, cfg Oversub) *oversub {
	if cfg.MonitorInterval <= 0 {
		cfg.MonitorInterval = time.Second
	}
	if cfg.EstimatorInterval <= 0 {
		cfg.EstimatorInterval = estimator.DefaultInterval
	}
	if cfg.QoSInterval <= 0 {
		cfg.QoSInterval = time.Second
	}
	if cfg.Estimator == nil {
		cfg.Estimator, cfg.EstimatorName = estimator.Noop{}, "noop"
	}
	if cfg.Controller == nil {
		cfg.Controller, cfg.QoSName = qos.Noop{}, "noop"
	}
	// The monitor and the applier name their own components.
	base := a.opts.Log
	if base == nil {
		base = slog.New(slog.DiscardHandler)
	}
	total := a.opts.Resources
	mon := monitor.New(a, monitor.Config{
		Interval: cfg.MonitorInterval,
		Total:    monitor.Capacity{MilliCPUs: total.MilliCPUs, MemoryBytes: total.MemMiB << 20},
		Host:     cfg.Host,
		Signals:  cfg.Signals,
	}, base)
	o := &oversub{cfg: cfg, mon: mon, fwd: estimator.NewForwarder(estimator.ForwarderConfig{}), ctrl: cfg.Controller, killing: map[string]bool{},
		kick: make(chan struct{}, 1), swtch: qos.NewSwitch(), log: base, estName: cfg.EstimatorName, qosName: cfg.QoSName}
	o.applier = qos.NewApplier(actuator{a: a, o: o, cg: cfg.Cgroups}, base)
	o.est = &recorder{e: o.guarded(cfg.Estimator), forward: cfg.Forward}
	o.reg = monitor.NewRegistry(mon)
	o.reg.MustRegister(o.fwd, o.applier)
	return o
}

// guarded wraps an estimator as the loop calls it: nothing offered while
// QoS corrections are in force, and noop when it fails.
func (o *oversub) guarded(e estimator.Estimator) estimator.Estimator {
	return estimator.Fallback(estimator.Guard(e, o.applier), o.log.With("component", "estimator"))
}

// start samples once, computes the first estimate (so that revocable
// launches right after start see a pool) and starts the monitor,
// estimator and QoS loops, owned by the agent.
func (o *oversub) start(a *Agent) {
	ctx := a.ctx
	o.reset(a)
	if err := o.mon.Sample(ctx); err != nil {
		a.log.Warn("first monitor round", "err", err)
	}
	if est, err := o.est.Estimate(ctx, o.mon.Usage()); err == nil && o.fwd.Decide(est, time.Now()) {
		if err := o.est.send(ctx, est); err != nil {
			a.log.Warn("forward estimate", "err", err)
			o.fwd.Invalidate()
		}
	}
	log := a.opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	loops := []func() error{
		func() error { return o.mon.Run(ctx) },
		func() error { return o.sampler(ctx, a.log) },
		func() error {
			return estimator.Run(ctx, o.mon, o.est, o.fwd, o.cfg.EstimatorInterval, o.est.send, log.With("component", "estimator"))
		},
		func() error {
			return qos.Run(ctx, o.mon, o.ctrl, o.applier, qos.LoopConfig{Interval: o.cfg.QoSInterval, Switch: o.swtch}, log.With("component", "qos"))
		},
	}
	loops = append(loops, o.guardLoops(a)...)
	for _, run := range loops {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			if err := run(); err != nil && !errors.Is(err, context.Canceled) {
				log.Error("oversubscription loop ended", "err", err)
			}
		}()
	}
	estName, qosName := o.names()
	a.log.Info("oversubscription running", "estimator", estName, "qos", qosName,
		"monitor_interval", o.cfg.MonitorInterval, "estimator_interval", o.cfg.EstimatorInterval,
		"qos_interval", o.cfg.QoSInterval, "runqueue_source", o.cfg.RunQueueSource)
}

// reset lifts any correction a previous agent left on the revocable
// containers it recovered (thaw, own cpu limit): corrections do not
// survive a restart, since the controller that made them, and its
// baselines, did not. If the interference persists, the new controller
// corrects again once it has learned the victims' baselines.
func (o *oversub) reset(a *Agent) {
	if o.cfg.Cgroups == nil {
		return
	}
	for _, c := range a.List() {
		if c.State != StateRunning || !c.Revocable {
			continue
		}
		var thaw error
		if !c.Paused { // a user's pause outlives the agent: it stays frozen
			thaw = o.cfg.Cgroups.Thaw(a.ctx, c.ID)
		}
		err := errors.Join(thaw, o.cfg.Cgroups.SetCPUQuota(a.ctx, c.ID, 0))
		if err != nil {
			a.log.Warn("lift corrections of a recovered revocable container", "id", c.ID, "err", err)
		}
	}
}

// pool returns the revocable pool: the current estimate plus the revocable
// resources it saw in use (with a master, the larger of that and the same
// for the last forwarded estimate), and why admission is blocked. An
// estimate the guard emptied while corrections were in force does not
// outlive them: once they are lifted the last one computed without them
// counts.
func (o *oversub) pool() (Resources, string, Estimate) {
	blocking := o.applier.Blocking()
	cur, sent, hasSent := o.est.snapshot()
	if blocking == "" && estimator.Blocked(cur.Estimate) {
		// Computed while corrections were in force, lifted since: the
		// last estimate computed without one stands until the next (an
		// estimator interval away).
		cur = o.est.lastOpen()
	}
	p := resourcesOf(cur.Offered().Model().Add(cur.InUse.Model()))
	if hasSent && o.est.forwarding() {
		s := resourcesOf(sent.Offered().Model().Add(sent.InUse.Model()))
		p = Resources{MilliCPUs: max(p.MilliCPUs, s.MilliCPUs), MemMiB: max(p.MemMiB, s.MemMiB)}
	}
	return p, blocking, cur
}

// admit runs op, a ledger admission of revocable resources (ask is what it
// adds), against the current revocable pool: the pool is set in l first,
// and a refusal says what sized it. While QoS corrections are in force
// nothing new is admitted.
func (o *oversub) admit(l *ledger, ask resources.Resources, op func() error) error {
	p, blocking, cur := o.pool()
	if blocking != "" && !ask.IsEmpty() {
		return &InsufficientResourcesError{Asked: ask, Pool: "revocable",
			Why: "no revocable admission while QoS corrections are in force: " + blocking}
	}
	l.SetRevocable(p.Model())
	err := op()
	var ie *InsufficientResourcesError
	if errors.As(err, &ie) {
		ie.Pool = "revocable"
		estName, _ := o.names()
		ie.Why = fmt.Sprintf("revocable pool %s, in use %s; estimator %s: %s", p, resourcesOf(l.Used().Revocable()), estName, cur.Explanation.Summary)
	}
	return err
}

func (o *oversub) status(used Resources) Oversubscription {
	p, blocking, _ := o.pool()
	cur, sent, hasSent := o.est.snapshot()
	estName, qosName := o.names()
	return Oversubscription{
		Estimator: estName, QoS: qosName,
		Current: cur, Forwarded: sent, HasForwarded: hasSent, Blocking: blocking,
		Pool: p, Used: used, Free: resourcesOf(p.Model().Subtract(used.Model())),
		Active: o.applier.Active(), Recent: o.applier.Recent(),
		RunQueueSource: o.cfg.RunQueueSource,
		Evictions:      o.evictions(), IOThrottled: o.ioThrottled(),
	}
}

// frozen reports whether a QoS correction keeps container id frozen.
func (o *oversub) frozen(id string) bool {
	for _, c := range o.applier.Active() {
		if c.ContainerID == id && c.Type == qos.Freeze {
			return true
		}
	}
	return false
}

// beginKill marks container id as being killed, so that the QoS
// controller freezes it no more, and thaws it: a frozen process cannot
// die. It thaws whatever the applier's record says: a freeze that raced
// the kill (the controller froze a disk writer the experiment runner was
// killing, already signalled, in an fsync) left the kill waiting 100 s
// for the controller's own thaw. It returns the error of a thaw the
// record says was needed.
func (o *oversub) beginKill(ctx context.Context, id string) error {
	o.markMu.Lock()
	o.killing[id] = true
	o.markMu.Unlock()
	// A freeze that saw no mark is over once killMu is free: the thaw
	// below comes after it.
	o.killMu.Lock()
	o.killMu.Unlock() //nolint:staticcheck // an empty critical section: waits for a freeze in flight
	if o.cfg.Cgroups == nil {
		if o.frozen(id) {
			return fmt.Errorf("thaw %s: %w", id, ErrNotSupported)
		}
		return nil
	}
	// The freeze stays recorded until the container is gone (the QoS loop
	// prunes it), so a QoS kill, which thaws first itself, and a user's
	// kill look alike.
	if err := o.cfg.Cgroups.Thaw(ctx, id); err != nil && o.frozen(id) {
		return err
	}
	return nil
}

// isKilling reports whether a kill of container id is under way.
func (o *oversub) isKilling(id string) bool {
	o.markMu.Lock()
	defer o.markMu.Unlock()
	return o.killing[id]
}

// endKill ends what beginKill began (the container is gone, or the kill
// failed).
func (o *oversub) endKill(id string) {
	o.markMu.Lock()
	delete(o.killing, id)
	o.markMu.Unlock()
}

// freeze runs the QoS controller's freeze of container id unless a kill
// of it is under way; killMu is held across it, so a kill that begins
// meanwhile (its mark set too late for the check) thaws after it.
func (o *oversub) freeze(id string, f func() error) error {
	o.killMu.Lock()
	defer o.killMu.Unlock()
	if o.isKilling(id) {
		return fmt.Errorf("freeze %s: %w: it is being killed", id, ErrNotRunning)
	}
	return f()
}

// actuator applies QoS corrections: cgroup changes through the cgroups
// isolator, kills through the agent (so the exit reason is recorded).
type actuator struct {
	a  *Agent
	o  *oversub // orders freezes against kills
	cg CgroupActuator
}

var (
	_ qos.Actuator   = actuator{}
	_ qos.IOActuator = actuator{}
)

func (x actuator) SetCPUQuota(ctx context.Context, id string, milli int64) error {
	if x.cg == nil {
		return fmt.Errorf("set cpu quota of %s: %w", id, ErrNotSupported)
	}
	return x.cg.SetCPUQuota(ctx, id, milli)
}

func (x actuator) Freeze(ctx context.Context, id string) error {
	if x.cg == nil {
		return fmt.Errorf("freeze %s: %w", id, ErrNotSupported)
	}
	return x.o.freeze(id, func() error { return x.cg.Freeze(ctx, id) })
}

// Thaw lifts a QoS freeze, unless a user paused the container: the pause
// wins, and the container stays frozen (the correction counts as
// applied: the controller's freeze is over). freezeMu orders it against
// a pause under way.
func (x actuator) Thaw(ctx context.Context, id string) error {
	if x.cg == nil {
		return fmt.Errorf("thaw %s: %w", id, ErrNotSupported)
	}
	x.a.freezeMu.Lock()
	defer x.a.freezeMu.Unlock()
	if x.a.paused(id) {
		x.a.log.Info("qos thaw left a paused container frozen", "id", id)
		return nil
	}
	return x.cg.Thaw(ctx, id)
}

// SetIOLimit implements qos.IOActuator when the cgroup actuator can limit
// io (the cgroups isolator's SetIOLimit: io.max / blkio.throttle.*);
// otherwise it fails with ErrNotSupported.
func (x actuator) SetIOLimit(ctx context.Context, id string, bytesPerSec int64) error {
	io, ok := x.cg.(qos.IOActuator)
	if !ok {
		return fmt.Errorf("limit io of %s: %w", id, ErrNotSupported)
	}
	return io.SetIOLimit(ctx, id, bytesPerSec)
}

func (x actuator) Kill(ctx context.Context, id, reason string) error {
	// Grace 0: at once. KillWithReason returns once the container exited.
	_, err := x.a.KillWithReason(ctx, id, 0, ExitReason(reason), "preempted by the QoS controller to protect non-revocable work")
	return err
}

// Oversubscription returns the oversubscription status: the current and
// last forwarded estimate, the revocable pool and its use, and the QoS
// corrections. ok is false when the agent runs without oversubscription.
func (a *Agent) Oversubscription() (st Oversubscription, ok bool) {
	if a.over == nil {
		return Oversubscription{}, false
	}
	a.mu.Lock()
	used := a.usedLocked(true)
	a.mu.Unlock()
	return a.over.status(used), true
}

// SetForward sets (or with nil clears) the function the estimator loop
// sends estimates on with, e.g. once the master link is up; the next
// check forwards the current estimate whatever the hysteresis says. It
// does nothing without oversubscription.
func (a *Agent) SetForward(f estimator.ForwardFunc) {
	if a.over == nil {
		return
	}
	a.over.est.mu.Lock()
	a.over.est.forward = f
	a.over.est.mu.Unlock()
	a.over.fwd.Invalidate()
}

// SwapEstimator makes e, named name, the estimator from its next round on
// (an agent's reload): the round in flight, if any, ends with the old one,
// which is not called again once SwapEstimator returns (the caller closes
// it). The next estimate is forwarded whatever the hysteresis says. Errors
// wrap ErrNotSupported without oversubscription.
func (a *Agent) SwapEstimator(e estimator.Estimator, name string) error {
	if a.over == nil {
		return fmt.Errorf("swap the estimator: %w: the agent runs without oversubscription", ErrNotSupported)
	}
	if e == nil {
		return fmt.Errorf("swap the estimator: %w: nil", ErrInvalidArgument)
	}
	a.over.est.swap(a.over.guarded(e))
	a.over.nameMu.Lock()
	a.over.estName = name
	a.over.nameMu.Unlock()
	a.over.fwd.Invalidate()
	a.log.Info("estimator replaced", "estimator", name)
	return nil
}

// SwapController makes c, named name, the QoS controller from the QoS
// loop's next round on (an agent's reload); the old one is not called
// again once SwapController returns (the caller closes it). It fails
// with qos.ErrCorrectionsInForce while corrections are in force (only
// the controller that made them knows when to lift them), and with ctx's
// error when the loop does not run. Errors wrap ErrNotSupported without
// oversubscription.
func (a *Agent) SwapController(ctx context.Context, c qos.Controller, name string) error {
	if a.over == nil {
		return fmt.Errorf("swap the qos controller: %w: the agent runs without oversubscription", ErrNotSupported)
	}
	if c == nil {
		return fmt.Errorf("swap the qos controller: %w: nil", ErrInvalidArgument)
	}
	if _, err := a.over.swtch.Replace(ctx, c); err != nil {
		return err
	}
	a.over.nameMu.Lock()
	a.over.qosName = name
	a.over.nameMu.Unlock()
	a.log.Info("qos controller replaced", "qos", name)
	return nil
}

// Metrics returns the Prometheus registry of the monitor, the estimator's
// forwarder and the QoS applier (serve it with monitor.Handler; register
// more collectors on it), or nil without oversubscription.
func (a *Agent) Metrics() *prometheus.Registry {
	if a.over == nil {
		return nil
	}
	return a.over.reg
}

// LatencyReport is a latency the application in a container measured over
// its last window.
type LatencyReport struct {
	P50, P99, P999 time.Duration
}

// ReportLatency records a latency the application in container ref
// measured; the QoS controller compares it with the container's baseline
// (signal app-latency). Errors wrap ErrNotFound, ErrNotRunning,
// ErrInvalidArgument or ErrNotSupported (no oversubscription).
func (a *Agent) ReportLatency(ref string, l LatencyReport) error {
	if l.P99 <= 0 || l.P50 < 0 || l.P999 < 0 || (l.P50 > l.P99) || (l.P999 != 0 && l.P999 < l.P99) {
		return fmt.Errorf("report latency: %w: want 0 ≤ p50 ≤ p99 ≤ p999 and p99 > 0, got p50 %s p99 %s p999 %s",
			ErrInvalidArgument, l.P50, l.P99, l.P999)
	}
	c, err := a.Get(ref)
	if err != nil {
		return fmt.Errorf("report latency: %w", err)
	}
	if c.State != StateRunning {
		return fmt.Errorf("report latency %s: %w", c.ID, ErrNotRunning)
	}
	if a.over == nil {
		return fmt.Errorf("report latency %s: %w: the agent runs without a monitor", c.ID, ErrNotSupported)
	}
	if l.P999 == 0 {
		l.P999 = l.P99
	}
	err = a.over.mon.ReportLatency(c.ID, monitor.LatencySummary{P50: l.P50, P99: l.P99, P999: l.P999, Source: "app", Measured: time.Now()})
	if errors.Is(err, monitor.ErrNotFound) {
		// Launched since the last round: sample now and retry once.
		if serr := a.over.mon.Sample(a.ctx); serr != nil {
			a.log.Debug("monitor round", "err", serr)
		}
		err = a.over.mon.ReportLatency(c.ID, monitor.LatencySummary{P50: l.P50, P99: l.P99, P999: l.P999, Source: "app", Measured: time.Now()})
	}
	if err != nil {
		return fmt.Errorf("report latency %s: %w", c.ID, errors.Join(ErrNotRunning, err))
	}
	return nil
}

// sample asks for a monitor round after a launch or an exit so that the
// QoS loop sees new revocable work at once rather than at the next tick.
// It does not wait: the round runs on the agent's sampler goroutine
// (requests coalesce), so a launch does not pay for sampling every
// container.
func (a *Agent) sample() {
	if a.over == nil {
		return
	}
	select {
	case a.over.kick <- struct{}{}:
	default: // a round is already pending
	}
}

// sampleGap is the least time between two rounds sample asks for: the
// launches and exits within it share the one round after it. A round
// reads every container's cgroups; one per launch and one per exit cost
// a node launching 50 containers a second 0.8 ms of CPU per launch
// (perf, bench/12-launch-e2e.bench.sh), and the QoS loop still sees new
// work within this gap rather than at the next tick.
const sampleGap = 100 * time.Millisecond

// sampler runs the rounds sample asks for until ctx ends, at most one
// per sampleGap.
func (o *oversub) sampler(ctx context.Context, log *slog.Logger) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-o.kick:
		}
		if err := o.mon.Sample(ctx); err != nil && ctx.Err() == nil {
			log.Debug("monitor round after a launch or an exit", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(sampleGap):
		}
	}
}

// ForwardedInUse is what the revocable containers that include selects
// (by container ID; the master link: its tasks' containers) held when the
// estimate last forwarded — the one being forwarded, inside a
// ForwardFunc — was computed: the same monitor snapshot. Marked
// revocable. The master sizes its revocable pool as that estimate plus
// this, both from one moment of the agent, never mixed with its own view
// of the tasks. Empty without oversubscription or before the first
// forward.
func (a *Agent) ForwardedInUse(include func(containerID string) bool) resources.Resources {
	if a.over == nil {
		return nil
	}
	r := a.over.est
	r.mu.Lock()
	by := r.sent.inUseBy
	sent := r.hasSent
	r.mu.Unlock()
	if !sent {
		return nil
	}
	var sum Resources
	for id, res := range by {
		if include(id) {
			sum.MilliCPUs += res.MilliCPUs
			sum.MemMiB += res.MemMiB
		}
	}
	return estimator.MarkRevocable(sum.Model())
}
