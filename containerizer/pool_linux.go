package containerizer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/internal/containerlog"
	"github.com/brimnode/brim/internal/hostuser"
	"github.com/brimnode/brim/internal/subid"
	"github.com/brimnode/brim/isolator"
)

// Warm sandboxes. A warm sandbox is a container made before its task is
// known: a shim with the container's namespaces made, its cgroups created
// under the parent (no limit written), its root mounted and masked, its
// confinement (seccomp, no_new_privs, capabilities) applied and its init,
// the exec trampoline, blocked on a pipe (executor: handshake.go). A
// launch whose shape (Shape: what cannot change after the making) has one
// ready takes it — the claim: rename the directory and the groups to the
// container's, write the limits, config.json and the task's bundle, and
// send the shim the directory; the trampoline switches to the task's user,
// environment and working directory and execs the command. What stays of
// the sandbox is its libcontainer ID (config.json's sandbox) and the
// process start time of the container's PID 1 (it was forked when the
// sandbox was made); everything else a task can read is as a cold
// launch's (TestWarmLaunchIsCold).
//
// How many: per shape, K follows the launch rate (the launches of the last
// rateWindow times the time a sandbox takes to make, plus one), at most
// Config.WarmSandboxes, and 0 once a shape has had no launch for
// Config.WarmSandboxIdle; none at all while the host's available memory is
// under Config.WarmSandboxMinAvailable or the pool's measured memory is at
// Config.WarmSandboxMemory. Sandboxes are made one at a time, after the
// launch that asked for them (never on its path), and a sandbox serves one
// task: a claimed one leaves the pool for good and is destroyed with its
// container. While sandboxes are ready, the cgroup isolator keeps the
// kernel's cgroup-attach lock warm (a claim joins the unified group).
//
// Their shims read the pool's end of a pipe: when the agent closes it
// (Close) or dies, each unclaimed sandbox destroys its container and
// groups, and Recover (or `brim agent cleanup`) removes its directory.
// A sandbox's shim is started, and given its directory and bundle
// (which names its groups), before the cgroup isolator makes the
// groups: whatever the phase of its making the agent dies in, no group
// is left without a shim to remove it (makeSandbox).

// rateWindow is the span over which a shape's launch rate is counted.
const rateWindow = 5 * time.Second

// errSandboxUnusable is a warm sandbox that could not be claimed before
// anything of the container was made: the launch goes cold instead.
var errSandboxUnusable = errors.New("warm sandbox unusable")

// Shape is what a warm sandbox is made for and a launch must match: the
// root filesystem and the user namespace's range (a zero Size: none).
// Networking is not a shape yet: a launch with Limits.Network is cold. An
// image root would add its digest here (its layers and a snapshot per
// sandbox made at the making).
type Shape struct {
	Rootfs  string
	UserUID uint32
	UserGID uint32
	UserIDs uint32
}

// String names the shape in stats and logs.
func (s Shape) String() string {
	root := s.Rootfs
	if root == "" {
		root = "host"
	}
	if s.UserIDs == 0 {
		return "root=" + root
	}
	return fmt.Sprintf("root=%s userns=%d:%d:%d", root, s.UserUID, s.UserGID, s.UserIDs)
}

// shapeOf returns spec's shape, false when warm sandboxes cannot serve it
// (disabled, networking, an image root: not yet, an isolator that is not
// an isolator.Sandboxer or must see the init before exec, a root
// filesystem other than the host's with a dynamically linked shim
// binary, a restart, a stdin or a terminal).
func (c *Containerizer) shapeOf(spec Spec) (Shape, bool) {
	// A restart (spec.Sandbox, spec.LogDir) brings its previous run's
	// files: it is made cold, around them. A stdin or a terminal is the
	// init's, made with it before any claim (executor.Bundle.Validate).
	if !c.pool.enabled || spec.Limits.Network || len(spec.Limits.Ports) > 0 || spec.Image != "" ||
		spec.Rootfs != "" && !c.shimStatic || spec.Sandbox != "" || spec.LogDir != "" ||
		spec.Stdin || spec.Tty {
		return Shape{}, false
	}
	s := Shape{Rootfs: spec.Rootfs}
	if r := spec.UserNS; r != nil {
		s.UserUID, s.UserGID, s.UserIDs = r.HostUID, r.HostGID, r.Size
	}
	return s, true
}

// pool keeps the warm sandboxes. Safe for concurrent use.
type pool struct {
	c        *Containerizer
	enabled  bool
	max      int
	idle     time.Duration
	budget   int64
	minAvail int64
	warmer   isolator.Warmer // nil: none

	mu       sync.Mutex
	shapes   map[Shape]*shapePool
	names    map[string]bool // sandboxes ready or being made
	filling  int
	fillTime time.Duration // moving average of a making
	claimed  uint64
	missed   uint64
	closed   bool
	warmDone func() // the primer held while sandboxes are ready
	warmAt   time.Time
	failures int       // makings failed in a row
	retryAt  time.Time // no making before (after failures)
	full     bool      // the last making found the state dir full

	kick   chan struct{}
	stop   chan struct{}
	ctx    context.Context // the makings'; cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// shapePool is one shape's sandboxes and recent launches.
type shapePool struct {
	ready  []*sandbox
	recent []time.Time
}

// sandbox is a ready warm sandbox.
type sandbox struct {
	name, dir string
	data      string // its sandbox directory's parent when not dir (a RunDir): StateDir/containers/<name>
	shape     Shape
	sp        *shimProc
	reports   *executor.ReportReader
	pid       int   // the init, blocked in the trampoline
	mem       int64 // proportional set size of shim and init
	// trampDev and trampIno are the init's executable while it runs the
	// trampoline (0: unknown): another is a task that exec'd.
	trampDev, trampIno uint64
}

func newPool(c *Containerizer) *pool {
	p := &pool{c: c, max: c.cfg.WarmSandboxes, idle: c.cfg.WarmSandboxIdle, budget: c.cfg.WarmSandboxMemory,
		minAvail: c.cfg.WarmSandboxMinAvailable, shapes: make(map[Shape]*shapePool), names: make(map[string]bool),
		fillTime: 100 * time.Millisecond, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.enabled = p.max > 0 && !c.needIsolate()
	for _, iso := range c.cfg.Isolators {
		if _, ok := iso.(isolator.Sandboxer); !ok {
			p.enabled = false
		}
		if w, ok := iso.(isolator.Warmer); ok && p.warmer == nil {
			p.warmer = w
		}
	}
	if p.enabled {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.run() }()
	}
	return p
}

// demand records a launch of shape (its rate sets the shape's K).
func (p *pool) demand(shape Shape) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sp := p.shapes[shape]
	if sp == nil {
		sp = &shapePool{}
		p.shapes[shape] = sp
	}
	sp.recent = append(sp.recent, time.Now())
}

// wake asks the maintenance loop for a round (after a launch: the
// sandbox it took is replaced once it is done).
func (p *pool) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// take returns a ready sandbox of shape (and counts the launch as
// claimed or missed), nil when none is ready or !ok.
func (p *pool) take(shape Shape, ok bool) *sandbox {
	if !ok {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sp := p.shapes[shape]
	for sp != nil && len(sp.ready) > 0 {
		sb := sp.ready[0]
		sp.ready = sp.ready[1:]
		delete(p.names, sb.name)
		select {
		case <-sb.sp.done: // died while waiting
			p.goDiscard(sb)
			continue
		default:
		}
		p.claimed++
		return sb
	}
	p.missed++
	return nil
}

// owns reports whether name is a sandbox of this pool (Recover leaves it).
func (p *pool) owns(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.names[name]
}

// run is the maintenance loop: a round after every launch and every
// quarter second, until close.
func (p *pool) run() {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-p.kick:
		case <-t.C:
		}
		p.round()
	}
}

// round brings every shape to its K: extra sandboxes are destroyed, one
// missing one is started (sandboxes are made one at a time), and the
// cgroup-attach lock is kept warm while any is ready.
func (p *pool) round() {
	pressure := p.minAvail > 0 && memAvailable() < p.minAvail
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	now := time.Now()
	ready, mem := 0, int64(0)
	for shape, sp := range p.shapes {
		k := p.target(sp, now, pressure)
		for len(sp.ready) > k {
			sb := sp.ready[0]
			sp.ready = sp.ready[1:]
			delete(p.names, sb.name)
			p.goDiscard(sb)
		}
		if k == 0 && len(sp.recent) == 0 && len(sp.ready) == 0 {
			delete(p.shapes, shape)
			continue
		}
		ready += len(sp.ready)
		for _, sb := range sp.ready {
			mem += sb.mem
		}
	}
	for shape, sp := range p.shapes {
		if p.filling > 0 || p.budget > 0 && mem >= p.budget || now.Before(p.retryAt) {
			break
		}
		if len(sp.ready) < p.target(sp, now, pressure) {
			p.filling++
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.fill(shape) }()
		}
	}
	p.keepWarm(ready > 0 || p.filling > 0, now)
}

// target is sp's K at now (p.mu held; prunes sp.recent).
func (p *pool) target(sp *shapePool, now time.Time, pressure bool) int {
	sp.recent = slices.DeleteFunc(sp.recent, func(t time.Time) bool { return now.Sub(t) > p.idle })
	if pressure || len(sp.recent) == 0 {
		return 0
	}
	n := 0
	for _, t := range sp.recent {
		if now.Sub(t) <= rateWindow {
			n++
		}
	}
	rate := float64(n) / rateWindow.Seconds()
	return min(p.max, int(math.Ceil(rate*p.fillTime.Seconds()))+1)
}

// keepWarm holds the cgroup isolator's primer while on, renewed every
// half second (p.mu held).
func (p *pool) keepWarm(on bool, now time.Time) {
	if p.warmer == nil {
		return
	}
	if !on {
		if p.warmDone != nil {
			p.warmDone()
			p.warmDone = nil
		}
		return
	}
	if p.warmDone == nil || now.Sub(p.warmAt) >= 500*time.Millisecond {
		done := p.warmer.Warm()
		if p.warmDone != nil {
			p.warmDone()
		}
		p.warmDone, p.warmAt = done, now
	}
}

// fill makes one sandbox of shape and adds it to the pool (or destroys
// it, when the pool closed or the shape needs it no more meanwhile).
func (p *pool) fill(shape Shape) {
	start := time.Now()
	name, err := p.newName()
	var sb *sandbox
	if err == nil {
		sb, err = p.c.makeSandbox(p.ctx, name, shape)
	}
	p.mu.Lock()
	p.filling--
	if err != nil {
		delete(p.names, name)
		if !p.closed { // else: cut short by close
			p.failed(shape, err)
		}
		p.mu.Unlock()
		return
	}
	if p.failures, p.retryAt = 0, (time.Time{}); p.full {
		p.full = false
		p.c.log.Info("warm sandboxes: the state dir has space again; the pool fills")
	}
	p.fillTime = (3*p.fillTime + time.Since(start)) / 4
	sp := p.shapes[shape]
	if p.closed || sp == nil || len(sp.ready) >= p.target(sp, time.Now(), false) {
		delete(p.names, sb.name)
		p.mu.Unlock()
		p.c.discardSandbox(sb)
		return
	}
	sp.ready = append(sp.ready, sb)
	p.mu.Unlock()
	p.wake()
}

// Back-off of the pool's makings after a failure: the first retry after
// fillRetryMin, doubling up to fillRetryMax (a full state dir: until a
// making succeeds again).
const (
	fillRetryMin = time.Second
	fillRetryMax = time.Minute
)

// failed notes a failed making (p.mu held): no sandbox is made before
// the back-off has passed. A full state dir (ENOSPC) stops the filling:
// said once, at warning, and tried again every fillRetryMax; other
// errors are logged each time.
func (p *pool) failed(shape Shape, err error) {
	p.failures++
	p.retryAt = time.Now().Add(min(fillRetryMin<<min(p.failures-1, 10), fillRetryMax))
	if !errors.Is(err, unix.ENOSPC) {
		p.c.log.Warn("make warm sandbox", "shape", shape, "err", err, "retry_in", time.Until(p.retryAt).Round(time.Millisecond))
		return
	}
	p.retryAt = time.Now().Add(fillRetryMax)
	if !p.full {
		p.full = true
		p.c.log.Warn("warm sandboxes: state dir full: the pool stops filling (launches go cold) until space is freed",
			"err", err, "retry_every", fillRetryMax)
	}
}

// newName returns a new sandbox name, the pool's before anything of it
// exists (so that Recover, running meanwhile, leaves it alone).
func (p *pool) newName() (string, error) {
	var buf [8]byte
	if _, err := rand.Read(buf[:]); err != nil {
		return "", fmt.Errorf("make sandbox name: %w", err)
	}
	name := SandboxPrefix + hex.EncodeToString(buf[:])
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names[name] = true
	return name, nil
}

// goDiscard destroys sb in the background (p.mu held).
func (p *pool) goDiscard(sb *sandbox) {
	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.c.discardSandbox(sb) }()
}

// close destroys every ready sandbox and waits for the ones being made.
func (p *pool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	var all []*sandbox
	for _, sp := range p.shapes {
		all = append(all, sp.ready...)
		sp.ready = nil
	}
	if p.warmDone != nil {
		p.warmDone()
		p.warmDone = nil
	}
	p.mu.Unlock()
	close(p.stop)
	p.cancel() // a making under way ends now, not at LaunchTimeout
	for _, sb := range all {
		p.goDiscard(sb)
	}
	p.wg.Wait()
}

// PoolStats returns the warm sandboxes' state.
func (c *Containerizer) PoolStats() PoolStats {
	p := c.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	st := PoolStats{Enabled: p.enabled, Filling: p.filling, Claimed: p.claimed, Missed: p.missed}
	now := time.Now()
	for shape, sp := range p.shapes {
		st.Ready += len(sp.ready)
		for _, sb := range sp.ready {
			st.MemoryBytes += sb.mem
		}
		st.Shapes = append(st.Shapes, ShapeStats{Shape: shape.String(), Ready: len(sp.ready), Target: p.target(sp, now, false)})
	}
	slices.SortFunc(st.Shapes, func(a, b ShapeStats) int { return strings.Compare(a.Shape, b.Shape) })
	return st
}

// makeSandbox makes warm sandbox name of shape: its directory (as a
// launch's, owned by root until claimed), the warm bundle, a shim given
// the directory, the isolators' PrepareSandbox, then "prepared" to the
// shim, which builds the container and reports "ready". The shim knows
// the sandbox's groups before they exist: if the agent dies at any point
// of the making, the shim that sees its pipe close removes them
// (executor: handshake.go). c.fillHold, a test's, is called at each
// phase.
func (c *Containerizer) makeSandbox(ctx context.Context, name string, shape Shape) (_ *sandbox, retErr error) {
	ct := c.newContainer(name)
	sb := &sandbox{name: name, shape: shape, dir: ct.dir}
	if err := os.Mkdir(sb.dir, 0o700); err != nil {
		return nil, fmt.Errorf("make sandbox: %w", err)
	}
	defer func() {
		if retErr != nil {
			c.discardSandbox(sb)
		}
	}()
	userns := shape.userNS()
	if _, err := c.makeSandboxDir(ct, Spec{UserNS: userns}, hostuser.ID{}); err != nil {
		return nil, err
	}
	sb.data = ct.data
	cgroupPath, err := c.sandboxCgroupPath(name)
	if err != nil {
		return nil, err
	}
	b := &executor.Bundle{
		Version: executor.BundleVersion, ID: sb.name, Warm: true, Rootfs: shape.Rootfs,
		CgroupPath: cgroupPath, StateRoot: c.runcRoot, DataDir: sb.data,
		HidePaths: c.hidePaths(), UserNS: userns, SkipGoAhead: true,
		// Unused: the log starts at the claim, with the container's.
		Log: containerlog.Limits{MaxSize: c.cfg.LogMaxSize, MaxFiles: c.cfg.LogMaxFiles, Rate: c.cfg.LogRate},
	}
	if err := executor.WriteBundle(sb.dir, b); err != nil {
		return nil, err
	}
	// A recycled shim when one waits (a sandbox never joins a network
	// namespace): made off the launch path, a sandbox still costs a
	// shim's start otherwise.
	sp := c.takeRecycled()
	if sp == nil {
		if sp, err = c.spawnShim("", c.recycling()); err != nil {
			return nil, err
		}
	}
	sb.sp = sp
	if err := os.WriteFile(filepath.Join(sb.dir, shimPidFile), []byte(strconv.Itoa(sp.pid)), 0o600); err != nil {
		return nil, fmt.Errorf("record shim pid: %w", err)
	}
	if _, err := io.WriteString(sp.goW, sb.dir+"\n"); err != nil {
		return nil, fmt.Errorf("start sandbox shim: %w", err)
	}
	c.fillPhase("shim")
	var launch isolator.Launch
	for _, iso := range c.cfg.Isolators {
		if err := iso.(isolator.Sandboxer).PrepareSandbox(ctx, sb.name, &launch); err != nil {
			return nil, fmt.Errorf("prepare sandbox %s: %w", iso.Name(), err)
		}
	}
	c.fillPhase("groups")
	if launch.CgroupPath != cgroupPath || launch.NetNSPath != "" || len(launch.Env) > 0 {
		return nil, fmt.Errorf("make sandbox: the isolators prepared cgroup %q, netns %q, env %q; the bundle says cgroup %q and no more",
			launch.CgroupPath, launch.NetNSPath, launch.Env, cgroupPath)
	}
	if _, err := io.WriteString(sp.goW, executor.SandboxPrepared+"\n"); err != nil {
		return nil, fmt.Errorf("start sandbox shim: %w", err)
	}
	defer c.boundReports(ctx, sp.reportR)()
	sb.reports = executor.NewReportReader(sp.reportR)
	rep, err := sb.reports.Next()
	if err == nil {
		err = rep.Err()
	}
	if err == nil && rep.Event != executor.EventReady {
		err = fmt.Errorf("shim reported %q, want %q", rep.Event, executor.EventReady)
	}
	if err != nil {
		return nil, fmt.Errorf("make sandbox (see %s): %w", filepath.Join(sb.dir, executor.ShimLogFile), err)
	}
	sb.pid = rep.Pid
	sb.mem = pss(sp.pid) + pss(sb.pid)
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/exe", sb.pid), &st); err == nil {
		sb.trampDev, sb.trampIno = st.Dev, st.Ino
	}
	return sb, nil
}

// cgroupPather is the cgroup isolator's ability to name a group before
// it makes it (isolator/cgroups.Isolator.Path).
type cgroupPather interface {
	Path(name string) string
}

// sandboxCgroupPath is the cgroup path PrepareSandbox will give sandbox
// name, named before the groups exist (see makeSandbox).
func (c *Containerizer) sandboxCgroupPath(name string) (string, error) {
	for _, iso := range c.cfg.Isolators {
		if p, ok := iso.(cgroupPather); ok {
			return p.Path(name), nil
		}
	}
	return "", errors.New("make sandbox: no isolator names its cgroup path")
}

// fillPhase calls the test's c.fillHold, if any, at a phase of a
// sandbox's making.
func (c *Containerizer) fillPhase(phase string) {
	if c.fillHold != nil {
		c.fillHold(phase)
	}
}

// userNS returns the shape's user namespace range, nil for none.
func (s Shape) userNS() *subid.Range {
	if s.UserIDs == 0 {
		return nil
	}
	return &subid.Range{HostUID: s.UserUID, HostGID: s.UserGID, Size: s.UserIDs}
}

// discardSandbox destroys an unclaimed sandbox: EOF makes its shim
// destroy the container and groups and exit (killed if it lingers), then
// what is left (libcontainer's state, the isolators', the directory) is
// removed.
func (c *Containerizer) discardSandbox(sb *sandbox) {
	if sb.sp != nil {
		sb.sp.discard()
	}
	if err := c.teardown(context.Background(), c.newContainer(sb.name)); err != nil {
		c.log.Warn("remove warm sandbox", "sandbox", sb.name, "err", err)
	}
}

// launchWarm makes ct from sb: the claim. Before the rename nothing of
// the container exists (made false): an error there wraps
// errSandboxUnusable (sb is destroyed and the launch goes cold) or is
// ErrExist. A claim that fails or is not answered within
// Config.WarmClaimTimeout (a stuck shim or trampoline) destroys sb —
// shim, init, groups, directory — and wraps errSandboxUnusable too, so
// that the launch goes cold, unless the task had already started in it
// (it is not started twice: the launch fails) or ctx ended.
func (c *Containerizer) launchWarm(ctx context.Context, ct *container, sb *sandbox, user, owner hostuser.ID) (made bool, err error) {
	if err := renameSandbox(sb, ct); err != nil {
		c.pool.mu.Lock()
		c.pool.goDiscard(sb)
		c.pool.mu.Unlock()
		if errors.Is(err, unix.EEXIST) {
			return false, fmt.Errorf("%w (a directory from a container not recovered)", ErrExist)
		}
		return false, fmt.Errorf("%w: %w", errSandboxUnusable, err)
	}
	ct.sandbox, ct.shimPid, ct.shimDone = sb.name, sb.sp.pid, sb.sp.done
	ct.mark("rename")
	err = c.boundClaim(ctx, ct, sb, user, owner)
	if err == nil && c.keepShim(ct, sb.sp, sb.reports) {
		return true, nil
	}
	sb.sp.goW.Close() // EOF aborts a shim whose claim failed
	sb.sp.reportR.Close()
	if err == nil || ctx.Err() != nil || errors.Is(err, ErrCommandNotFound) {
		return true, err
	}
	return c.abandonClaim(ctx, ct, sb, err)
}

// renameSandbox gives sb's directories ct's names, never replacing
// another's: the data directory first (with a RunDir), then the runtime
// directory, whose name is what Recover goes by. A failure leaves both
// under sb's names.
func renameSandbox(sb *sandbox, ct *container) error {
	if sb.data != "" {
		if err := unix.Renameat2(unix.AT_FDCWD, sb.data, unix.AT_FDCWD, ct.dataDir(), unix.RENAME_NOREPLACE); err != nil {
			return err
		}
	}
	err := unix.Renameat2(unix.AT_FDCWD, sb.dir, unix.AT_FDCWD, ct.dir, unix.RENAME_NOREPLACE)
	if err != nil && sb.data != "" {
		if berr := os.Rename(ct.dataDir(), sb.data); berr != nil {
			return errors.Join(err, fmt.Errorf("give the sandbox its data directory back: %w", berr))
		}
	}
	return err
}

// boundClaim is claim within Config.WarmClaimTimeout (and ctx).
func (c *Containerizer) boundClaim(ctx context.Context, ct *container, sb *sandbox, user, owner hostuser.ID) error {
	limit := min(c.cfg.WarmClaimTimeout, c.cfg.LaunchTimeout)
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	err := c.claim(cctx, ct, sb, user, owner)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		return fmt.Errorf("claim sandbox %s: no answer within %v: %w (%w)", sb.name, limit, executor.ErrShimUnresponsive, err)
	}
	return err
}

// abandonClaim destroys a sandbox whose claim failed for cause: its init
// is stopped and checked (taskStarted), its shim killed at once (it may
// be stuck: never waited for), then ct's teardown kills the init and
// removes its groups, libcontainer's state and the directory, and ct is
// as before the claim. The error wraps errSandboxUnusable (launch cold),
// or is the launch's own when the task had already exec'd in the sandbox
// (made true: Launch tears the rest down).
//
// The init is stopped before the shim is killed: a trampoline whose
// message pipe closes (its shim's death) exits, and an init found gone
// counts as a started task. Killed first, a stuck shim made the launch
// fail instead of going cold whenever its trampoline exited before it
// was stopped (TestStuckWarmSandboxGoesCold, once in CI).
func (c *Containerizer) abandonClaim(ctx context.Context, ct *container, sb *sandbox, cause error) (made bool, err error) {
	ran := sb.taskStarted()
	select {
	case <-sb.sp.done:
	default: // our child, not reaped yet: the pid is its
		_ = syscall.Kill(sb.sp.pid, syscall.SIGKILL)
	}
	if afterClaimShimKilled != nil {
		afterClaimShimKilled()
	}
	if ran {
		return true, fmt.Errorf("warm sandbox %s failed after its task started (not started again): %w", sb.name, cause)
	}
	if err := c.teardown(context.WithoutCancel(ctx), ct); err != nil {
		return true, fmt.Errorf("remove warm sandbox %s after its failed claim (%w): %w", sb.name, cause, err)
	}
	ct.sandbox, ct.shimPid, ct.shimDone, ct.pid, ct.address = "", 0, nil, 0, ""
	return false, fmt.Errorf("%w: %w", errSandboxUnusable, cause)
}

// afterClaimShimKilled, when set (tests), runs in abandonClaim right
// after the shim is killed.
var afterClaimShimKilled func()

// taskStarted reports whether sb's init has exec'd its task (it no
// longer runs the trampoline): it stops the init first, so that no exec
// can follow the answer (the caller kills it). A stopped init is a
// trampoline that cannot have exec'd; one that is gone or cannot be
// read is taken as started (never run a task twice).
func (sb *sandbox) taskStarted() bool {
	if sb.pid <= 0 || sb.trampIno == 0 {
		return true
	}
	if err := syscall.Kill(sb.pid, syscall.SIGSTOP); err != nil {
		return true
	}
	for i := 0; !stopped(sb.pid); i++ {
		if i == 1000 || !running(sb.pid) {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/exe", sb.pid), &st); err != nil {
		return true
	}
	return st.Dev != sb.trampDev || st.Ino != sb.trampIno
}

// stopped reports whether pid is in the stopped state (T).
func stopped(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'T'
}

// claim hands the renamed sandbox to ct: the sandbox directory's owner,
// the isolators' Claim, config.json and the task's bundle, then the
// directory to the shim, whose "running" ends the launch. ctx bounds the
// wait for the shim's report.
func (c *Containerizer) claim(ctx context.Context, ct *container, sb *sandbox, user, owner hostuser.ID) error {
	if err := os.Chown(filepath.Join(ct.dataDir(), executor.SandboxDir), int(owner.UID), int(owner.GID)); err != nil {
		return fmt.Errorf("own sandbox: %w", err)
	}
	var launch isolator.Launch
	for _, iso := range c.cfg.Isolators {
		if err := iso.(isolator.Sandboxer).Claim(ctx, sb.name, ct.spec.ID, ct.spec.Limits, &launch); err != nil {
			return fmt.Errorf("claim %s: %w", iso.Name(), err)
		}
	}
	ct.mark("isolators")
	if err := c.writeLaunch(ct, &launch, user, nil); err != nil {
		return err
	}
	ct.mark("files")
	defer c.boundReports(ctx, sb.sp.reportR)()
	sent := time.Now()
	if _, err := io.WriteString(sb.sp.goW, ct.dir+"\n"); err != nil {
		return fmt.Errorf("claim sandbox: %w", err)
	}
	rep, err := sb.reports.Next()
	if err := c.checkReport(ctx, ct, rep, err, executor.EventRunning); err != nil {
		return err
	}
	ct.running(sent, rep)
	return nil
}

// pss returns pid's proportional set size in bytes, 0 if unknown.
func pss(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			return max(kbValue(v), 0)
		}
	}
	return 0
}

// memTotal returns the host's MemTotal in bytes, 0 if unknown.
func memTotal() int64 {
	if v := meminfo("MemTotal:"); v >= 0 {
		return v
	}
	return 0
}

// memAvailable returns the host's MemAvailable in bytes (math.MaxInt64
// when unknown: no pressure is assumed).
func memAvailable() int64 {
	if v := meminfo("MemAvailable:"); v >= 0 {
		return v
	}
	return math.MaxInt64
}

// meminfo returns /proc/meminfo's field key in bytes, -1 if unknown.
func meminfo(key string) int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			return kbValue(v)
		}
	}
	return -1
}

// kbValue parses "  1234 kB" into bytes, -1 if malformed.
func kbValue(v string) int64 {
	kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
	if err != nil {
		return -1
	}
	return kb << 10
}
