package containerizer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/internal/containerlog"
	"github.com/brimnode/brim/internal/hostuser"
	"github.com/brimnode/brim/isolator"
)

// Launch starts a container and returns once its user process runs (the
// init has been released to exec it). A launch whose shape has a warm
// sandbox ready takes it (the claim: pool_linux.go); any other is made
// from nothing (a cold launch). On any failure it removes everything it
// made — shim, container, isolators' state, directory — and returns the
// error: ErrExist for a duplicate ID, ErrCommandNotFound when the command
// does not exist in the root filesystem (checked before anything is
// created).
func (c *Containerizer) Launch(ctx context.Context, spec Spec) (_ *Info, retErr error) {
	start := time.Now()
	if spec.LogMaxSize == 0 {
		spec.LogMaxSize = c.cfg.LogMaxSize
	}
	if spec.LogMaxFiles == 0 {
		spec.LogMaxFiles = c.cfg.LogMaxFiles
	}
	if err := validateSpec(&spec); err != nil {
		return nil, fmt.Errorf("launch %s: %w", spec.ID, err)
	}
	user, owner, err := resolveUser(spec)
	if err != nil {
		return nil, fmt.Errorf("launch %s: %w", spec.ID, err)
	}
	id := spec.ID
	if err := c.reserve(id); err != nil {
		return nil, fmt.Errorf("launch %s: %w", id, err)
	}
	ct := c.newContainer(id)
	ct.spec, ct.stepAt = spec, start
	made := false // something of the container exists: tear it down on failure
	defer func() {
		if retErr == nil {
			return
		}
		if made {
			if err := c.teardown(context.WithoutCancel(ctx), ct); err != nil {
				retErr = errors.Join(retErr, fmt.Errorf("tear down failed launch: %w", err))
			}
		}
		c.unreserve(id)
	}()
	ct.mark("validate")
	shape, poolable := c.shapeOf(spec)
	if poolable {
		c.pool.demand(shape)
		defer c.pool.wake()
	}
	sb := c.pool.take(shape, poolable)
	if sb != nil {
		made, err = c.launchWarm(ctx, ct, sb, user, owner)
		if errors.Is(err, errSandboxUnusable) {
			c.log.Warn("warm sandbox unusable: launching cold", "id", id, "sandbox", sb.name, "err", err)
			sb = nil
		} else if err != nil {
			return nil, fmt.Errorf("launch %s: %w", id, err)
		}
	}
	if sb == nil {
		if made, err = c.launchCold(ctx, ct, user, owner); err != nil {
			return nil, fmt.Errorf("launch %s: %w", id, err)
		}
	}
	c.mu.Lock()
	c.containers[id] = ct
	c.mu.Unlock()
	c.log.Info("container launched", "id", id, "pid", ct.pid, "shim_pid", ct.shimPid, "warm", ct.sandbox != "",
		"ms", float64(time.Since(start).Microseconds())/1000)
	return ct.info(), nil
}

// resolveUser looks up the spec's user on the host (root when none) and
// returns it with the host IDs that own the sandbox (mapped through the
// user namespace when there is one).
func resolveUser(spec Spec) (user, owner hostuser.ID, err error) {
	if spec.User != "" {
		if user, err = hostuser.Lookup("/", spec.User); err != nil {
			return user, owner, err
		}
	}
	owner = user
	if r := spec.UserNS; r != nil {
		if err := r.Validate(); err != nil {
			return user, owner, fmt.Errorf("%w: %w", ErrUserNS, err)
		}
		if !r.Contains(user.UID, user.GID) {
			return user, owner, fmt.Errorf("user %s is outside the user namespace's %d IDs: %w", user, r.Size, ErrUserNS)
		}
		owner.UID, owner.GID = r.Host(user.UID, user.GID)
	}
	return user, owner, nil
}

// reserve claims id for a launch: get() reports ErrNotFound meanwhile.
func (c *Containerizer) reserve(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.containers[id]; ok {
		return ErrExist
	}
	c.containers[id] = nil
	return nil
}

// launchCold makes ct from nothing: directory, sandbox, the isolators'
// Prepare, config.json and bundle, then a (warm, or new) shim. made
// reports whether it made anything (the directory).
func (c *Containerizer) launchCold(ctx context.Context, ct *container, user, owner hostuser.ID) (made bool, err error) {
	if err := os.Mkdir(ct.dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return false, fmt.Errorf("%w (a directory from a container not recovered)", ErrExist)
		}
		return false, err
	}
	return true, c.makeCold(ctx, ct, user, owner)
}

func (c *Containerizer) makeCold(ctx context.Context, ct *container, user, owner hostuser.ID) (retErr error) {
	spec, id := ct.spec, ct.spec.ID
	giveBack, err := c.makeSandboxDir(ct, spec, owner)
	if err != nil {
		return err
	}
	defer func() {
		if retErr != nil { // before Launch's teardown, which removes ct.dir
			if err := giveBack(); err != nil {
				retErr = errors.Join(retErr, err)
			}
		}
	}()
	var imageRoot *executor.ImageRoot
	if spec.Image != "" {
		var err error
		if imageRoot, err = c.prepareImage(ctx, spec); err != nil {
			return err
		}
	}
	ct.mark("directory")
	// config.json is written once the isolators are prepared; a directory
	// without it is an orphan to Recover, which cleans up the isolators.
	var launch isolator.Launch
	for _, iso := range c.cfg.Isolators {
		if err := iso.Prepare(ctx, id, spec.Limits, &launch); err != nil {
			return fmt.Errorf("prepare %s: %w", iso.Name(), err)
		}
	}
	// The groups exist: from here to the end of the launch the cgroup
	// isolator keeps the kernel's cgroup-attach lock warm for the shim,
	// which moves the init into them once it is set up (see
	// isolator/cgroups.Isolator.Warm).
	for _, iso := range c.cfg.Isolators {
		if w, ok := iso.(isolator.Warmer); ok {
			defer w.Warm()()
		}
	}
	ct.mark("isolators")
	if err := c.writeLaunch(ct, &launch, user, imageRoot); err != nil {
		return err
	}
	ct.mark("files")
	return c.startShim(ctx, ct, launch.NetNSPath != "")
}

// makeSandboxDir makes ct's sandbox, or moves a restart's sandbox and
// log (spec.Sandbox, spec.LogDir) into place so that they go on in the
// new run, in ct's data directory (made here when it is not ct.dir); the
// sandbox is owned by the task's user (owner: host IDs), and a user
// namespace's root may reach ct's directories. giveBack moves a
// restart's files back: a failed launch calls it before its teardown
// removes the directories.
func (c *Containerizer) makeSandboxDir(ct *container, spec Spec, owner hostuser.ID) (giveBack func() error, err error) {
	data := ct.dataDir()
	if data != ct.dir {
		if err := c.spares.take(data); err != nil {
			if errors.Is(err, os.ErrExist) {
				return nil, fmt.Errorf("%w (a data directory from a container not recovered)", ErrExist)
			}
			return nil, err
		}
	}
	sandbox := filepath.Join(data, executor.SandboxDir)
	var moved [][2]string // from, to
	giveBack = func() error {
		var errs []error
		for _, m := range moved {
			if err := os.Rename(m[1], m[0]); err != nil {
				errs = append(errs, fmt.Errorf("give the previous run's %s back: %w", filepath.Base(m[1]), err))
			}
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (func() error, error) { return nil, errors.Join(err, giveBack()) }
	for _, m := range [][2]string{{spec.Sandbox, sandbox}, {spec.LogDir, filepath.Join(data, executor.LogDir)}} {
		if m[0] == "" {
			continue
		}
		if err := os.Rename(m[0], m[1]); err != nil {
			return fail(fmt.Errorf("keep the previous run's %s: %w", filepath.Base(m[1]), err))
		}
		moved = append(moved, m)
	}
	if spec.Sandbox == "" {
		if err := os.Mkdir(sandbox, 0o755); err != nil {
			return fail(fmt.Errorf("create sandbox: %w", err))
		}
	}
	// The task's user writes its files there; the shim (root) creates
	// stdout and stderr in it, which stay the agent's.
	if err := os.Chown(sandbox, int(owner.UID), int(owner.GID)); err != nil {
		return fail(fmt.Errorf("own sandbox: %w", err))
	}
	if spec.UserNS != nil {
		if err := prepareUserNSDir(c.cfg.runBase(), ct.dir, *spec.UserNS); err != nil {
			return fail(err)
		}
		if data != ct.dir {
			if err := prepareUserNSDir(c.cfg.StateDir, data, *spec.UserNS); err != nil {
				return fail(err)
			}
		}
	}
	return giveBack, nil
}

// writeLaunch writes ct's config.json and the bundle its shim runs, from
// what the isolators prepared (launch) and its image root (nil: none).
func (c *Containerizer) writeLaunch(ct *container, launch *isolator.Launch, user hostuser.ID, imageRoot *executor.ImageRoot) error {
	spec, id := ct.spec, ct.spec.ID
	if launch.CgroupPath == "" || !filepath.IsAbs(launch.CgroupPath) {
		// Never let libcontainer pick a path relative to our own cgroup.
		return fmt.Errorf("no isolator set an absolute cgroup path (got %q)", launch.CgroupPath)
	}
	rec := record{Version: recordVersion, Spec: spec, CgroupPath: launch.CgroupPath, Sandbox: ct.sandbox, CreatedAt: time.Now()}
	rec.Address = c.address(id)
	ct.address, ct.cgroupPath = rec.Address, rec.CgroupPath
	if err := writeRecord(ct.dir, &rec); err != nil {
		return err
	}
	bundle := &executor.Bundle{
		Version:    executor.BundleVersion,
		ID:         id,
		Args:       spec.Command,
		Env:        append(append([]string(nil), spec.Env...), launch.Env...),
		Cwd:        spec.Cwd,
		Rootfs:     spec.Rootfs,
		CgroupPath: launch.CgroupPath,
		NetNSPath:  launch.NetNSPath,
		StateRoot:  c.runcRoot,
		DataDir:    ct.data,
		HidePaths:  c.hidePaths(),
		UID:        user.UID,
		GID:        user.GID,
		UserNS:     spec.UserNS,
		Image:      imageRoot,
		// The shim verifies the cgroup and network namespace itself
		// before exec: no go-ahead round trip unless an isolator must see
		// the init first.
		SkipGoAhead: !c.needIsolate(),
		Log:         containerlog.Limits{MaxSize: spec.LogMaxSize, MaxFiles: spec.LogMaxFiles, Rate: c.cfg.LogRate},
		Sandbox:     ct.sandbox,
		OOMScoreAdj: launch.OOMScoreAdj, // the cgroup isolator's, by class
		Stdin:       spec.Stdin,
		Tty:         spec.Tty,
		TtySize:     spec.TtySize,
	}
	return executor.WriteBundle(ct.dir, bundle)
}

// hidePaths are the host paths masked from containers on the host root.
func (c *Containerizer) hidePaths() []string {
	own := []string{c.cfg.StateDir}
	if c.cfg.RunDir != "" && !within(c.cfg.RunDir, c.cfg.StateDir) {
		own = append(own, c.cfg.RunDir)
	}
	return append(own, c.cfg.HidePaths...)
}

// addresser is an optional ability of an isolator (isolator/network): the
// address it gave a container.
type addresser interface {
	Address(id string) (netip.Addr, error)
}

// address returns the address an isolator gave container id, "" for none.
func (c *Containerizer) address(id string) string {
	for _, iso := range c.cfg.Isolators {
		if a, ok := iso.(addresser); ok {
			if addr, err := a.Address(id); err == nil && addr.IsValid() {
				return addr.String()
			}
		}
	}
	return ""
}

// startShim hands the container to a warm shim (or starts a cold one:
// `brim shim --bundle DIR`, detached) and runs the launch handshake:
// "created" → Isolate → go-ahead → "running", or, when every isolator is
// an isolator.Verifier, just "running" (the shim checks the confinement
// itself and does not wait).
func (c *Containerizer) startShim(ctx context.Context, ct *container, netns bool) (retErr error) {
	// A recycled shim's mount namespace stopped following the host's at
	// its first launch (the shim makes it private): a network namespace
	// the isolator bound since is not in it. Such launches take a shim
	// that has run nothing.
	sp := c.takeWarm(netns)
	// The replacement starts once this launch is done: started now, the
	// new shim's process start-up (exec, Go runtime, page faults: several
	// ms of CPU) would compete with this launch for the CPUs.
	defer c.refill()
	sent := time.Now()
	if sp != nil {
		if _, err := io.WriteString(sp.goW, ct.dir+"\n"); err != nil {
			c.log.Warn("warm shim gone: starting a cold one", "err", err)
			sp.discard()
			sp = nil
		}
	}
	if sp == nil {
		var err error
		if sp, err = c.spawnCold(ct.dir); err != nil {
			return err
		}
	}
	reportR, goW := sp.reportR, sp.goW
	recycled := false
	defer func() {
		if !recycled {
			reportR.Close()
			goW.Close() // EOF aborts a shim still waiting for the go-ahead
		}
	}()
	ct.shimPid, ct.shimDone = sp.pid, sp.done
	if err := os.WriteFile(filepath.Join(ct.dir, shimPidFile), []byte(strconv.Itoa(ct.shimPid)), 0o600); err != nil {
		return fmt.Errorf("record shim pid: %w", err)
	}

	stopBound := c.boundReports(ctx, reportR)
	defer stopBound()
	reports := executor.NewReportReader(reportR)
	next := func(want string) (*executor.Report, error) {
		rep, err := reports.Next()
		return rep, c.checkReport(ctx, ct, rep, err, want)
	}
	// A recycled shim's pipes stay open: it reports "free" once the
	// container has ended, and is a warm shim again (awaitFree).
	keep := func() {
		stopBound()
		recycled = c.keepShim(ct, sp, reports)
	}
	if !c.needIsolate() {
		// The shim checks the confinement itself and reports "running"
		// only. A shim binary older than SkipGoAhead (an upgrade that
		// replaced brim but not brim-shim) reports "created" first and
		// waits for the byte: it costs the other nothing. Not to a
		// recycled shim (newer than SkipGoAhead): the unread byte would
		// lead its next container's directory.
		if !sp.recycle {
			_, _ = goW.Write([]byte{1})
		}
		rep, err := reports.Next()
		if err == nil && rep.Err() == nil && rep.Event == executor.EventCreated {
			rep, err = reports.Next()
		}
		if err := c.checkReport(ctx, ct, rep, err, executor.EventRunning); err != nil {
			return err
		}
		ct.running(sent, rep)
		keep()
		return nil
	}
	rep, err := next(executor.EventCreated)
	if err != nil {
		return err
	}
	ct.pid = rep.Pid
	for _, iso := range c.cfg.Isolators {
		if err := iso.Isolate(ctx, ct.spec.ID, ct.pid); err != nil {
			return fmt.Errorf("isolate %s: %w", iso.Name(), err)
		}
	}
	if _, err := goW.Write([]byte{1}); err != nil {
		return fmt.Errorf("release shim: %w", err)
	}
	rep, err = next(executor.EventRunning)
	if err != nil {
		return err
	}
	ct.running(sent, rep)
	keep()
	return nil
}

// recycling reports whether shims are recycled: not with
// NoRecycleShims, nor without warm shims (recycled ones wait among them).
func (c *Containerizer) recycling() bool {
	return !c.cfg.NoRecycleShims && c.cfg.WarmShims > 0
}

// spawnCold starts the shim of a launch that found no warm shim. When
// shims are recycled it is a warm shim handed dir at once, so that it
// can take other containers after this one.
func (c *Containerizer) spawnCold(dir string) (*shimProc, error) {
	if !c.recycling() {
		return c.spawnShim(dir, false)
	}
	sp, err := c.spawnShim("", true)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(sp.goW, dir+"\n"); err != nil {
		sp.discard()
		return nil, fmt.Errorf("start shim: %w", err)
	}
	return sp, nil
}

// keepShim keeps the handshake of ct's shim sp open, its launch done,
// when sp is recycled: the shim reports "free" once ct has ended
// (awaitFree). It reports whether it did; if not, the caller closes the
// pipes (and the shim exits after its container).
func (c *Containerizer) keepShim(ct *container, sp *shimProc, reports *executor.ReportReader) bool {
	if !sp.recycle || sp.reportR.SetReadDeadline(time.Time{}) != nil {
		return false
	}
	ct.shimFreed, ct.shim = make(chan struct{}), sp
	go c.awaitFree(ct, reports)
	return true
}

// awaitFree reads the next report of ct's recycled shim (ct.shim):
// "free" once ct has ended and the shim left its directory, which closes
// ct.shimFreed and gives the shim back to the warm shims (see reuse).
// Anything else — the shim exited (its reset failed, or it reached its
// bounds), or the pipe broke — ends its handshake: a shim still running
// then exits at EOF.
func (c *Containerizer) awaitFree(ct *container, reports *executor.ReportReader) {
	sp := ct.shim
	rep, err := reports.Next()
	if err == nil && rep.Event == executor.EventRetired {
		c.log.Info("shim not recycled: it exits", "id", ct.spec.ID, "shim_pid", sp.pid, "reason", rep.Error)
	}
	if err != nil || rep.Event != executor.EventFree {
		sp.goW.Close()
		sp.reportR.Close()
		return
	}
	close(ct.shimFreed)
	c.reuse(sp)
}

// recycledSpare is how many recycled shims may wait beyond WarmShims:
// under a steady rate containers end as fast as others start, and their
// shims serve the next launches and sandboxes; the spare absorbs the
// jitter (a burst of ends, then of launches), so that few are ended
// only to be started again. An idle one costs its heap, about 1.2 MiB
// (its text is the agent's one sealed copy of the shim binary), and is
// ended after recycledIdle.
const recycledSpare = 8

// reuse puts a recycled shim back among the warm shims, or ends it when
// they are full or the pool is closed.
func (c *Containerizer) reuse(sp *shimProc) {
	sp.freedAt = time.Now()
	c.poolMu.Lock()
	c.trimRecycledLocked(sp.freedAt)
	if !c.poolClosed && len(c.warm)+c.filling < c.cfg.WarmShims+recycledSpare {
		c.warm = append(c.warm, sp)
		sp = nil
		// Ended when idle for recycledIdle, by the next take or reuse,
		// or by the timer once launches stop; refill replaces it.
		if c.trimTimer == nil {
			c.trimTimer = time.AfterFunc(recycledIdle+time.Millisecond, c.trimIdle)
		} else {
			c.trimTimer.Reset(recycledIdle + time.Millisecond)
		}
	}
	c.poolMu.Unlock()
	if sp != nil {
		go sp.discard()
	}
}

// boundReports bounds the reads of a shim's launch reports from r: a
// shim that stops reporting (hung, stopped) fails the launch after
// LaunchTimeout (the teardown then kills it), and ctx's end fails it at
// once. The returned func lifts ctx's hold.
func (c *Containerizer) boundReports(ctx context.Context, r *os.File) (stop func() bool) {
	_ = r.SetReadDeadline(time.Now().Add(c.cfg.LaunchTimeout))
	return context.AfterFunc(ctx, func() { _ = r.SetReadDeadline(time.Unix(1, 0)) })
}

// running records the shim's "running" report rep for a launch whose
// go-ahead (or claim) was sent at sent.
func (ct *container) running(sent time.Time, rep *executor.Report) {
	ct.pid = rep.Pid
	ct.startedAt = time.Now()
	ct.addShimSteps(sent, rep)
}

// checkReport turns a launch report (or the error reading it) into the
// launch's error, nil when it is the event wanted.
func (c *Containerizer) checkReport(ctx context.Context, ct *container, rep *executor.Report, err error, want string) error {
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("wait for shim: %w", ctx.Err())
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("wait for shim: no report within %v: %w", c.cfg.LaunchTimeout, executor.ErrShimUnresponsive)
		}
		return fmt.Errorf("shim exited during launch (see %s): %w", filepath.Join(ct.dir, executor.ShimLogFile), err)
	}
	if err := rep.Err(); err != nil {
		return err
	}
	if rep.Event != want {
		return fmt.Errorf("shim reported %q, want %q", rep.Event, want)
	}
	return nil
}

// needIsolate reports whether some isolator must see the init before the
// user process runs: one that is not an isolator.Verifier. Otherwise the
// shim's own check of the cgroup and network namespace stands in for
// Isolate and the launch skips the go-ahead round trip.
func (c *Containerizer) needIsolate() bool {
	for _, iso := range c.cfg.Isolators {
		if v, ok := iso.(isolator.Verifier); !ok || !v.VerifiesOnly() {
			return true
		}
	}
	return false
}

// shimProc is a started shim and our ends of its handshake pipes.
type shimProc struct {
	pid     int
	reportR *os.File
	goW     *os.File
	done    chan struct{} // closed once the shim has been reaped
	// recycle: started with --recycle, the shim takes another container
	// after its container ends (executor.RunOptions.Recycle).
	recycle bool
	// freedAt is when the shim's last container ended (zero: it has run
	// none).
	freedAt time.Time
}

// spawnShim starts a shim detached: own session (no signal aimed at the
// agent's process group reaches it), stdio to files, reaped by a goroutine
// whenever it ends (if the agent dies first, it is reparented and carries
// on). dir "" starts a warm shim that waits for its directory on the
// go-ahead pipe. Every shim gets its own mount namespace, where it
// assembles the host root, the container's cgroup view (cgroup v1) and
// a network namespace's sysfs.
func (c *Containerizer) spawnShim(dir string, recycle bool) (*shimProc, error) {
	reportR, reportW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start shim: %w", err)
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		reportR.Close()
		reportW.Close()
		return nil, fmt.Errorf("start shim: %w", err)
	}
	defer reportW.Close()
	defer goR.Close()
	path, argv0 := c.shimCommand()
	cmd := exec.Command(path, "shim", "--handshake")
	cmd.Args[0] = argv0
	cmd.Dir = c.dir
	if dir != "" {
		cmd.Args = append(cmd.Args, "--bundle", dir)
		cmd.Dir = dir
		logf, err := os.OpenFile(filepath.Join(dir, executor.ShimLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			reportR.Close()
			goW.Close()
			return nil, fmt.Errorf("start shim: %w", err)
		}
		defer logf.Close()
		cmd.Stdout, cmd.Stderr = logf, logf
	}
	if recycle {
		cmd.Args = append(cmd.Args, "--recycle")
	}
	if dir == "" && !c.cfg.NoShimPrepare {
		cmd.Args = append(cmd.Args, "--prepare")
	}
	cmd.ExtraFiles = []*os.File{reportW, goR} // fds 3 and 4: executor.ReportFD, GoFD
	cmd.Env = shimEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Cloneflags: syscall.CLONE_NEWNS}
	if err := cmd.Start(); err != nil {
		reportR.Close()
		goW.Close()
		return nil, fmt.Errorf("start shim: %w", err)
	}
	sp := &shimProc{pid: cmd.Process.Pid, reportR: reportR, goW: goW, done: make(chan struct{}), recycle: recycle}
	go func() { _ = cmd.Wait(); close(sp.done) }()
	return sp, nil
}

// discard ends a warm shim that was never given a container: EOF on its
// pipe makes it exit; it is killed if it lingers.
func (sp *shimProc) discard() {
	sp.goW.Close()
	sp.reportR.Close()
	select {
	case <-sp.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(sp.pid, syscall.SIGKILL)
		<-sp.done
	}
}

// takeWarm returns a live warm shim, or nil; with fresh, one that has
// run no container. The caller refills the pool (see refill).
func (c *Containerizer) takeWarm(fresh bool) *shimProc {
	return c.take(func(sp *shimProc) bool { return !fresh || sp.freedAt.IsZero() })
}

// takeRecycled returns a warm shim that has run a container already,
// or nil: the sandbox pool's, which would otherwise start a shim while
// recycled ones wait (and, past recycledSpare, are ended).
func (c *Containerizer) takeRecycled() *shimProc {
	return c.take(func(sp *shimProc) bool { return !sp.freedAt.IsZero() })
}

// take removes from the warm shims, and returns, the first live one
// that matches (nil: none); the dead ones it meets, and recycled ones
// idle too long, are dropped.
func (c *Containerizer) take(match func(*shimProc) bool) *shimProc {
	c.poolMu.Lock()
	defer c.poolMu.Unlock()
	c.trimRecycledLocked(time.Now())
	for i := 0; i < len(c.warm); i++ {
		sp := c.warm[i]
		select {
		case <-sp.done: // died while waiting
			c.warm = slices.Delete(c.warm, i, i+1)
			i--
			go sp.discard()
			continue
		default:
		}
		if match(sp) {
			c.warm = slices.Delete(c.warm, i, i+1)
			return sp
		}
	}
	return nil
}

// recycledIdle is how long a recycled shim waits among the warm shims
// before it is ended: its mount namespace no longer follows the host's
// (see startShim), and holds on to what the host has unmounted since.
const recycledIdle = 10 * time.Second

// trimIdle ends the recycled shims idle for recycledIdle and starts
// fresh warm shims in their place.
func (c *Containerizer) trimIdle() {
	c.poolMu.Lock()
	c.trimRecycledLocked(time.Now())
	c.poolMu.Unlock()
	c.refill()
}

// trimRecycledLocked ends the recycled shims that have waited longer
// than recycledIdle at now. c.poolMu is held.
func (c *Containerizer) trimRecycledLocked(now time.Time) {
	c.warm = slices.DeleteFunc(c.warm, func(sp *shimProc) bool {
		if sp.freedAt.IsZero() || now.Sub(sp.freedAt) < recycledIdle {
			return false
		}
		go sp.discard()
		return true
	})
}

// refill starts warm shims in the background up to Config.WarmShims.
func (c *Containerizer) refill() {
	c.poolMu.Lock()
	defer c.poolMu.Unlock()
	for !c.poolClosed && len(c.warm)+c.filling < c.cfg.WarmShims {
		c.filling++
		c.poolWG.Add(1)
		go func() {
			defer c.poolWG.Done()
			sp, err := c.spawnShim("", c.recycling())
			c.poolMu.Lock()
			c.filling--
			if err == nil && !c.poolClosed {
				c.warm = append(c.warm, sp)
				sp = nil
			}
			c.poolMu.Unlock()
			if err != nil {
				c.log.Warn("start warm shim", "err", err)
			}
			if sp != nil {
				sp.discard()
			}
		}()
	}
}

// closePool stops the warm shims.
func (c *Containerizer) closePool() {
	c.poolMu.Lock()
	c.poolClosed = true
	warm := c.warm
	c.warm = nil
	if c.trimTimer != nil {
		c.trimTimer.Stop()
	}
	c.poolMu.Unlock()
	c.poolWG.Wait()
	for _, sp := range warm {
		sp.discard()
	}
}

func (c *Containerizer) unreserve(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ct, ok := c.containers[id]; ok && ct == nil {
		delete(c.containers, id)
	}
}

// teardown removes everything of a container that is not running (or
// whose launch failed): the shim (waited for, killed if it lingers), the
// libcontainer state, the isolators' state and the directory.
func (c *Containerizer) teardown(ctx context.Context, ct *container) error {
	id := ct.spec.ID
	var errs []error
	if ct.shimPid > 0 {
		if !waitShim(ctx, ct, 5*time.Second) {
			c.log.Warn("shim did not exit: killing it", "id", id, "shim_pid", ct.shimPid)
			if shimAlive(ct.shimPid, ct.dir) {
				_ = syscall.Kill(ct.shimPid, syscall.SIGKILL)
			}
			waitShim(ctx, ct, 5*time.Second)
		}
	}
	if err := c.destroyRuncState(ct.runtimeID()); err != nil {
		errs = append(errs, err)
	}
	for i := len(c.cfg.Isolators) - 1; i >= 0; i-- {
		iso := c.cfg.Isolators[i]
		if err := iso.Cleanup(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("cleanup %s: %w", iso.Name(), err))
		}
		if ct.sandbox != "" {
			// A claim that failed half way: what is left under the
			// sandbox's name (a no-op after a claim).
			if err := iso.Cleanup(ctx, ct.sandbox); err != nil {
				errs = append(errs, fmt.Errorf("cleanup %s: %w", iso.Name(), err))
			}
		}
	}
	if err := removeContainerDir(ct.dir); err != nil {
		errs = append(errs, err)
	} else if ct.data != "" {
		// After the runtime directory, whose mount points the removal
		// checked: the sandbox is bound only in the shim's namespace.
		if err := c.spares.give(ct.data); err != nil {
			errs = append(errs, fmt.Errorf("remove container data dir: %w", err))
		}
	}
	// After the directory: its removal checked the mount points are
	// empty, so the shim (and the overlay in its namespace) is gone.
	if err := c.releaseImage(id); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		c.log.Warn("tear down container", "id", id, "err", err)
		return err
	}
	return nil
}

// destroyRuncState kills and destroys what libcontainer still knows of id
// (a container whose shim died; its runtimeID). No state is not an
// error.
func (c *Containerizer) destroyRuncState(id string) error {
	lc, err := libcontainer.Load(c.runcRoot, id)
	if err != nil {
		if errors.Is(err, libcontainer.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("load runc state of %s: %w", id, err)
	}
	if st, err := lc.Status(); err == nil && st != libcontainer.Stopped {
		_ = lc.Signal(syscall.SIGKILL)
		if s, err := lc.State(); err == nil {
			waitPidGone(s.InitProcessPid, 5*time.Second)
		}
	}
	if err := lc.Destroy(); err != nil {
		return fmt.Errorf("destroy runc state of %s: %w", id, err)
	}
	return nil
}

// waitShim waits up to d for the shim to exit; true if it is gone.
func waitShim(ctx context.Context, ct *container, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	if ct.shimDone != nil {
		select {
		case <-ct.shimDone:
			return true
		case <-ct.shimFreed: // nil (never) unless the shim is recycled
			return true
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	// A recovered shim is not our child: poll.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for shimAlive(ct.shimPid, ct.dir) {
		select {
		case <-tick.C:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// shimEnv is a shim's environment: the agent's, with GOMAXPROCS=1. A
// shim (and the container init it re-executes, which libcontainer gives
// the shim's GOMAXPROCS) does one thing at a time; with a P per CPU its
// runtime starts more threads and its scheduler spins and wakes them
// on every blocking syscall, CPU that every launch paid.
func shimEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") })
	return append(env, "GOMAXPROCS=1")
}

// shimAlive reports whether pid is a live (not zombie) shim of dir; the
// command line check guards against pid reuse.
func shimAlive(pid int, dir string) bool {
	if pid <= 0 || !running(pid) {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	if !containsArg(cmdline, "shim") {
		return false
	}
	// Cold shims carry their directory in argv; warm ones move into it.
	cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	return containsArg(cmdline, dir) || cwd == dir
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

func containsArg(cmdline []byte, arg string) bool {
	start := 0
	for i, ch := range cmdline {
		if ch == 0 {
			if string(cmdline[start:i]) == arg {
				return true
			}
			start = i + 1
		}
	}
	return false
}

// waitPidGone polls until pid no longer exists (or is a zombie), up to d.
func waitPidGone(pid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for pid > 0 && running(pid) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// removeContainerDir removes a container directory. The rootfs, sysfs and
// cgroup view mount points must be empty directories (the host root, a
// sysfs and the cgroup view are mounted on them only inside the shim's
// mount namespace): if one is not,
// nothing is removed rather than risking a recursive delete through a
// mount.
func removeContainerDir(dir string) error {
	for _, mp := range []string{executor.RootfsDir, executor.SysfsDir, executor.CgroupViewDir} {
		if err := os.Remove(filepath.Join(dir, mp)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove container dir: %s mount point: %w", mp, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove container dir: %w", err)
	}
	return nil
}
