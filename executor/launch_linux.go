package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/internal/oomwatch"
)

// launch makes the container of s.dir's bundle and runs its process, one
// step function per phase: read the bundle, assemble the root and the
// cgroup view in the shim's mount namespace and create the container,
// start its init (set-up, late cgroup join, confinement check), the
// handshake, exec. A warm sandbox's bundle stops after the start: the
// init has exec'd the trampoline, and claim takes over. Every step is
// timed (Report.Steps). On any failure the container is destroyed.
func (s *shim) launch(ctx context.Context, report io.Writer, goAhead io.Reader) (retErr error) {
	clk := newStepClock()
	b, err := s.loadBundle()
	if err != nil {
		return err
	}
	if b.Warm {
		if err := awaitPrepared(goAhead); err != nil {
			return err
		}
	}
	clk.mark("read bundle")
	ls := s.startListen()
	defer func() { ls.closeOnError(s, retErr) }()
	if err := s.create(b, clk); err != nil {
		s.ready.release() // what create attached of it
		return err
	}
	defer func() {
		if retErr != nil {
			s.abort()
		}
	}()
	if err := s.start(b, clk); err != nil {
		return err
	}
	if err := ls.wait(); err != nil {
		return err
	}
	if b.Warm {
		return s.claim(report, goAhead, clk)
	}
	if err := s.awaitGoAhead(ctx, report, goAhead, b); err != nil {
		return err
	}
	if err := s.container.Exec(); err != nil {
		return fmt.Errorf("exec user process: %w", err)
	}
	clk.mark("exec")
	return s.running(report, clk)
}

// loadBundle reads and validates the directory's bundle.
func (s *shim) loadBundle() (*Bundle, error) {
	b, err := ReadBundle(s.dir)
	if err != nil {
		return nil, err
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	s.bundle = b
	s.log = s.log.With("id", b.ID)
	return b, nil
}

// listener is the control socket being bound while libcontainer creates
// and starts the container (the shim mostly waits for the init meanwhile):
// it must exist by the time the launch is reported, nothing else needs it.
type listener struct {
	done chan error
	err  error
	got  bool
}

func (s *shim) startListen() *listener {
	l := &listener{done: make(chan error, 1)}
	go func() { l.done <- s.listen() }()
	return l
}

func (l *listener) wait() error {
	if !l.got {
		l.err, l.got = <-l.done, true
	}
	return l.err
}

// closeOnError removes the socket of a launch that failed.
func (l *listener) closeOnError(s *shim, err error) {
	if l.wait() == nil && err != nil {
		s.ln.Close()
		_ = os.Remove(filepath.Join(s.dir, SocketFile))
	}
}

// create assembles the root (host root, image, mount points), the
// container's cgroup view and network sysfs in the shim's mount
// namespace, opens the container's stdio, and creates the libcontainer
// container (unjoined on cgroup v1: the shim joins it late).
func (s *shim) create(b *Bundle, clk *stepClock) error {
	rootfs, err := prepareRoot(s.dir, b)
	if err != nil {
		return err
	}
	clk.mark("mount root")
	cfg, err := libcontainerConfig(b, s.dir, rootfs)
	if err != nil {
		return err
	}
	if err := s.ready.apply(cfg, rootfs); err != nil && s.ready != nil {
		s.log.Debug("launch without all made ahead", "err", err)
	}
	s.cfg = cfg
	clk.mark("config")
	if joinLate() {
		if s.cgroups, err = startCgroupJoin(cfg); err != nil {
			return fmt.Errorf("create container: %w", err)
		}
		if err := mountCgroupView(s.dir, s.cgroups.paths()); err != nil {
			_ = s.cgroups.destroy()
			return err
		}
		clk.mark("cgroup view")
	}
	if b.Warm {
		s.out, err = openPipes(stdioMode{})
	} else {
		s.out, err = openOutput(b.Data(s.dir), b.Log, stdioModeOf(b))
	}
	if err != nil {
		if s.cgroups != nil {
			_ = s.cgroups.destroy()
		}
		return err
	}
	clk.mark("output")
	var c *libcontainer.Container
	if s.cgroups != nil {
		c, err = createUnjoined(b.StateRoot, b.RuntimeID(), cfg)
	} else {
		c, err = libcontainer.Create(b.StateRoot, b.RuntimeID(), cfg)
	}
	if err != nil {
		s.out.closeAll()
		s.out = nil
		if s.cgroups != nil {
			_ = s.cgroups.destroy()
		}
		return fmt.Errorf("create container: %w", err)
	}
	s.container = c
	clk.mark("container state")
	return nil
}

// stdioModeOf is the stdin and terminal b asks for (none for a warm
// sandbox: Bundle.Validate).
func stdioModeOf(b *Bundle) stdioMode {
	mode := stdioMode{Stdin: b.Stdin, Tty: b.Tty}
	if b.TtySize != nil {
		mode.Size = *b.TtySize
	}
	return mode
}

// prepareRoot assembles what the bundle's root needs in the shim's
// private mount namespace — the image's overlay, the host root, or the
// bundle's rootfs (with its mount points made for a user namespace) — and
// a network namespace's sysfs for a user namespace, and returns the
// directory libcontainer pivots into.
func prepareRoot(dir string, b *Bundle) (string, error) {
	var rootfs string
	var err error
	switch {
	case b.Image != nil:
		rootfs, err = prepareImageRoot(dir, b)
	case b.Rootfs == "":
		rootfs, err = prepareHostRoot(dir, b.HidePaths)
	case b.UserNS != nil:
		rootfs, err = b.Rootfs, prepareMountPoints(b.Rootfs, RuntimeSpec(b, dir, b.Rootfs).Mounts)
	default:
		rootfs = b.Rootfs
	}
	if err != nil {
		return "", err
	}
	if b.UserNS != nil && b.NetNSPath != "" {
		if err := mountNetSysfs(dir, b.NetNSPath); err != nil {
			return "", err
		}
	}
	return rootfs, nil
}

// start starts the container's init (it sets the container up and
// waits to exec), joins it to its cgroups (v1) and checks its
// confinement. A warm sandbox's init runs the trampoline, which the
// shim releases to the task at the claim.
func (s *shim) start(b *Bundle, clk *stepClock) error {
	p := &libcontainer.Process{
		Args:   b.Args,
		Env:    withPath(b.Env),
		Cwd:    b.Cwd,
		UID:    int(b.UID), // libcontainer takes the user from here, not the spec
		GID:    int(b.GID),
		Stdin:  s.out.stdin,
		Stdout: s.out.child[0],
		Stderr: s.out.child[1],
		Init:   true,
		// With a terminal: the init makes it and sends its master here.
		ConsoleSocket: s.out.consoleSocket,
		ConsoleWidth:  s.out.ttySize.Width, ConsoleHeight: s.out.ttySize.Height,
	}
	if p.Cwd == "" {
		p.Cwd = "/"
	}
	if b.Warm {
		t, err := s.trampolineProcess(p)
		if err != nil {
			return err
		}
		s.tramp = t
	}
	err := s.container.Start(p)
	// The container has its copies (or the start failed): the set is
	// spent either way.
	s.ready.release()
	if err != nil {
		if isCommandNotFound(err) && !b.Warm {
			return fmt.Errorf("start %s: %w: %w", b.Args[0], ErrCommandNotFound, err)
		}
		return fmt.Errorf("start container: %w", err)
	}
	s.process = p
	clk.mark("libcontainer start")
	if s.pid, err = p.Pid(); err != nil {
		return fmt.Errorf("container pid: %w", err)
	}
	clk.initSched(s.pid)
	if err := s.out.startConsole(); err != nil {
		return fmt.Errorf("container terminal: %w", err)
	}
	if s.tramp != nil {
		s.tramp.closeChildEnds()
	}
	if s.cgroups != nil {
		if err := s.cgroups.join(s.pid, b.Warm); err != nil {
			return err
		}
	}
	if err := verifyConfinement(s.pid, b, s.hierarchies()); err != nil {
		return err
	}
	clk.mark("join and verify")
	if err := unix.Stat(fmt.Sprintf("/proc/%d/exe", s.pid), &s.initExe); err != nil {
		s.execed.Store(true) // nothing to compare with: never wait
	}
	s.out.closeChild() // the container holds its own ends
	return nil
}

// awaitGoAhead reports "created" and waits for the go-ahead byte, unless
// the bundle skips it or the shim runs without the handshake.
func (s *shim) awaitGoAhead(ctx context.Context, report io.Writer, goAhead io.Reader, b *Bundle) error {
	if report == nil || b.SkipGoAhead {
		return nil
	}
	if err := writeReport(report, Report{Event: EventCreated, Pid: s.pid}); err != nil {
		return fmt.Errorf("report created: %w", err)
	}
	if goAhead == nil {
		return nil
	}
	return readGoAhead(ctx, goAhead)
}

// running records the start, reports "running" with the steps and
// starts the OOM watch (off the launch path: it only backs up the
// oom_kill counter read at exit).
func (s *shim) running(report io.Writer, clk *stepClock) error {
	s.startedAt = time.Now()
	if report != nil {
		if err := writeReport(report, clk.report(EventRunning, s.pid)); err != nil {
			// The containerizer gave up on us: nobody will supervise this.
			return fmt.Errorf("report running: %w", err)
		}
	}
	s.watchOOM()
	s.log.Info("container running", "pid", s.pid)
	return nil
}

// watchOOM notes an OOM kill the container's memory cgroup reports.
func (s *shim) watchOOM() {
	var (
		oom <-chan struct{}
		err error
	)
	if s.cgroups != nil {
		s.memPath = s.cgroups.paths()["memory"]
		oom, err = oomwatch.V1(context.Background(), s.memPath) // ends when the group is removed
	} else {
		if st, err := s.container.State(); err == nil {
			s.memPath = st.CgroupPaths[""] // cgroup v2
		}
		oom, err = s.container.NotifyOOM()
	}
	if err != nil {
		return
	}
	go func() {
		if _, ok := <-oom; ok {
			s.oomSeen.Store(true)
		}
	}()
}

// readGoAhead waits for the containerizer's go-ahead byte; EOF (the
// containerizer gave up or died) aborts the launch.
func readGoAhead(ctx context.Context, r io.Reader) error {
	ch := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := io.ReadFull(r, b[:])
		ch <- err
	}()
	select {
	case err := <-ch:
		if err != nil {
			return fmt.Errorf("wait for go-ahead: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for go-ahead: %w", ctx.Err())
	}
}

// abort kills and destroys a container whose launch failed (or a warm
// sandbox never claimed).
func (s *shim) abort() {
	if s.tramp != nil {
		s.tramp.close()
	}
	if s.container != nil {
		if s.process != nil {
			_ = s.container.Signal(unix.SIGKILL)
			_, _ = s.process.Wait()
		}
		if err := s.container.Destroy(); err != nil {
			s.log.Warn("destroy container after failed launch", "err", err)
		}
		s.destroyCgroups()
	}
	if s.out != nil {
		s.out.closeAll()
		s.out = nil
	}
}

// hierarchies returns the cgroup hierarchies the shim put the init in
// itself (nil when libcontainer did: cgroup v2).
func (s *shim) hierarchies() []string {
	if s.cgroups == nil {
		return nil
	}
	return s.cgroups.joined()
}

// destroyCgroups removes the groups the shim joined itself, as
// libcontainer's Destroy does with its own.
func (s *shim) destroyCgroups() {
	if s.cgroups == nil {
		return
	}
	if err := s.cgroups.destroy(); err != nil {
		s.log.Warn("remove container cgroups", "err", err)
	}
}

// isCommandNotFound recognises the init's failed lookup of argv[0], which
// crosses the process boundary only as text (exec.LookPath's errors).
func isCommandNotFound(err error) bool {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, exec.ErrNotFound.Error()) ||
		strings.Contains(msg, "exec: \"") && (strings.Contains(msg, "no such file or directory") ||
			strings.Contains(msg, "permission denied") || strings.Contains(msg, "is a directory"))
}
