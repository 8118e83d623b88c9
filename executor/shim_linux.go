package executor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/internal/oomwatch"
)

// RunOptions configure Run.
type RunOptions struct {
	// Dir is the container directory holding bundle.json and the sandbox.
	// Empty makes a warm shim: it reads the directory (one line) from
	// GoAhead before anything else, moves into it and logs to its
	// shim.log. A warm shim is started ahead of launches to take its
	// process start-up off the launch path.
	Dir string
	// Report receives the launch reports (see ReportFD); nil for none.
	Report io.WriteCloser
	// GoAhead is read for one byte between "created" and exec (see GoFD);
	// nil starts the user process at once.
	GoAhead io.ReadCloser
	// Log receives the shim's own log.
	Log *slog.Logger
}

// Run is `brim shim`: it creates the container described by the bundle in
// opts.Dir, runs its process, serves the control socket, and returns once
// the container has exited, its status is in exit.json and the container is
// destroyed. With the host root (no rootfs in the bundle) or an image
// root it must run in a private mount namespace: the containerizer starts
// it with CLONE_NEWNS. ctx only bounds the launch; once the container
// runs, the shim stays until it exits (shutting the agent down never
// stops it).
func Run(ctx context.Context, opts RunOptions) error {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &shim{dir: opts.Dir, log: log, done: make(chan struct{}), shimPid: os.Getpid()}
	var goAhead io.Reader
	if opts.GoAhead != nil {
		goAhead = opts.GoAhead
	}
	var err error
	if opts.Dir == "" {
		// A warm shim: started ahead of any launch, it learns its
		// container directory first.
		if opts.GoAhead == nil || opts.Report == nil {
			return errors.New("run shim: no container directory and no handshake")
		}
		prewarm()
		br := bufio.NewReader(opts.GoAhead)
		goAhead = br
		s.dir, err = adoptDir(br)
		if err != nil {
			// EOF: the containerizer closed the pool or died; nothing
			// to report to anyone.
			opts.Report.Close()
			opts.GoAhead.Close()
			return err
		}
	}
	err = s.launch(ctx, opts.Report, goAhead)
	if opts.Report != nil {
		if err != nil {
			rep := Report{Event: EventError, Error: err.Error()}
			if errors.Is(err, ErrCommandNotFound) {
				rep.Kind = kindCommandNotFound
			}
			_ = writeReport(opts.Report, rep)
		}
		opts.Report.Close()
	}
	if opts.GoAhead != nil {
		opts.GoAhead.Close()
	}
	if err != nil {
		return err
	}
	return s.supervise()
}

type shim struct {
	dir     string
	log     *slog.Logger
	bundle  *Bundle
	shimPid int

	container *libcontainer.Container
	process   *libcontainer.Process
	pid       int
	startedAt time.Time
	memPath   string      // memory cgroup directory, for the OOM counter
	cgroups   *cgroupJoin // the groups the shim joins itself (nil: libcontainer does)
	out       *output     // stdio and the log, from a successful launch

	initExe unix.Stat_t // the init's executable before exec (see awaitExec)
	execed  atomic.Bool

	ln       net.Listener
	handlers sync.WaitGroup
	killed   atomic.Bool
	oomSeen  atomic.Bool

	done chan struct{} // closed once exit is set and exit.json written
	exit *ExitStatus
}

// adoptDir reads a warm shim's container directory from r, moves into it
// and sends its own output to the directory's shim.log.
func adoptDir(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("wait for a container: %w", err)
	}
	dir := strings.TrimSpace(line)
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("container directory %q is not absolute", dir)
	}
	if err := os.Chdir(dir); err != nil {
		return "", fmt.Errorf("enter container directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ShimLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return "", fmt.Errorf("open shim log: %w", err)
	}
	defer f.Close()
	for _, fd := range []int{1, 2} {
		if err := unix.Dup3(int(f.Fd()), fd, 0); err != nil {
			return "", fmt.Errorf("redirect output to shim log: %w", err)
		}
	}
	return dir, nil
}

//nolint:gocyclo // split under issue 31 by the executor work; remove with the split
func (s *shim) launch(ctx context.Context, report io.Writer, goAhead io.Reader) (retErr error) {
	b, err := ReadBundle(s.dir)
	if err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	s.bundle = b
	s.log = s.log.With("id", b.ID)

	rootfs, err := s.prepareRoot(b)
	if err != nil {
		return err
	}
	if b.UserNS != nil && b.NetNSPath != "" {
		if err := mountNetSysfs(s.dir, b.NetNSPath); err != nil {
			return err
		}
	}
	// The control socket is bound while libcontainer creates and starts
	// the container (the shim mostly waits for the init meanwhile): it
	// must exist by the time "created" is reported, nothing else needs it.
	listened := make(chan error, 1)
	go func() { listened <- s.listen() }()
	var listenErr error
	listenDone := false
	waitListen := func() error {
		if !listenDone {
			listenErr, listenDone = <-listened, true
		}
		return listenErr
	}
	defer func() {
		if waitListen() == nil && retErr != nil {
			s.ln.Close()
			_ = os.Remove(filepath.Join(s.dir, SocketFile))
		}
	}()

	cfg, err := libcontainerConfig(b, s.dir, rootfs)
	if err != nil {
		return err
	}
	out, err := openOutput(s.dir, b.Log)
	if err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			out.closeAll()
			return
		}
		out.closeChild() // the container holds its own ends now
		s.out = out
	}()

	var c *libcontainer.Container
	if joinLate() {
		if s.cgroups, err = startCgroupJoin(cfg); err != nil {
			return fmt.Errorf("create container: %w", err)
		}
		c, err = createUnjoined(b.StateRoot, b.ID, cfg)
	} else {
		c, err = libcontainer.Create(b.StateRoot, b.ID, cfg)
	}
	if err != nil {
		if s.cgroups != nil {
			_ = s.cgroups.destroy()
		}
		return fmt.Errorf("create container: %w", err)
	}
	defer func() {
		if retErr != nil {
			s.abort()
		}
	}()
	s.container = c
	p := &libcontainer.Process{
		Args:   b.Args,
		Env:    withPath(b.Env),
		Cwd:    b.Cwd,
		UID:    int(b.UID), // libcontainer takes the user from here, not the spec
		GID:    int(b.GID),
		Stdin:  out.stdin,
		Stdout: out.child[0],
		Stderr: out.child[1],
		Init:   true,
	}
	if p.Cwd == "" {
		p.Cwd = "/"
	}
	if err := c.Start(p); err != nil {
		if isCommandNotFound(err) {
			return fmt.Errorf("start %s: %w: %w", b.Args[0], ErrCommandNotFound, err)
		}
		return fmt.Errorf("start container: %w", err)
	}
	s.process = p
	if s.pid, err = p.Pid(); err != nil {
		return fmt.Errorf("container pid: %w", err)
	}
	if s.cgroups != nil {
		if err := s.cgroups.join(s.pid); err != nil {
			return err
		}
	}
	if err := waitListen(); err != nil {
		return err
	}
	if err := verifyConfinement(s.pid, b, s.hierarchies()); err != nil {
		return err
	}
	if err := unix.Stat(fmt.Sprintf("/proc/%d/exe", s.pid), &s.initExe); err != nil {
		s.execed.Store(true) // nothing to compare with: never wait
	}
	if report != nil && !b.SkipGoAhead {
		if err := writeReport(report, Report{Event: EventCreated, Pid: s.pid}); err != nil {
			return fmt.Errorf("report created: %w", err)
		}
		if goAhead != nil {
			if err := readGoAhead(ctx, goAhead); err != nil {
				return err
			}
		}
	}
	if err := c.Exec(); err != nil {
		return fmt.Errorf("exec user process: %w", err)
	}
	s.startedAt = time.Now()
	if report != nil {
		if err := writeReport(report, Report{Event: EventRunning, Pid: s.pid}); err != nil {
			// The containerizer gave up on us: nobody will supervise this.
			return fmt.Errorf("report running: %w", err)
		}
	}
	// Off the launch path: the OOM watch only backs up the oom_kill
	// counter read at exit.
	var oom <-chan struct{}
	if s.cgroups != nil {
		s.memPath = s.cgroups.paths()["memory"]
		oom, err = oomwatch.V1(context.Background(), s.memPath) // ends when the group is removed
	} else {
		if st, err := c.State(); err == nil {
			s.memPath = st.CgroupPaths[""] // cgroup v2
		}
		oom, err = c.NotifyOOM()
	}
	if err == nil {
		go func() {
			if _, ok := <-oom; ok {
				s.oomSeen.Store(true)
			}
		}()
	}
	s.log.Info("container running", "pid", s.pid)
	return nil
}

// prepareRoot makes the container's root: the image's overlay, the host
// root, or the bundle's rootfs (with its mount points made for a user
// namespace's init).
func (s *shim) prepareRoot(b *Bundle) (string, error) {
	switch {
	case b.Image != nil:
		return prepareImageRoot(s.dir, b)
	case b.Rootfs == "":
		return prepareHostRoot(s.dir, b.HidePaths)
	case b.UserNS != nil:
		return b.Rootfs, prepareMountPoints(b.Rootfs, RuntimeSpec(b, s.dir, b.Rootfs).Mounts)
	}
	return b.Rootfs, nil
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

// abort kills and destroys a container whose launch failed.
func (s *shim) abort() {
	if s.container == nil {
		return
	}
	if s.process != nil {
		_ = s.container.Signal(unix.SIGKILL)
		_, _ = s.process.Wait()
	}
	if err := s.container.Destroy(); err != nil {
		s.log.Warn("destroy container after failed launch", "err", err)
	}
	s.destroyCgroups()
}

// hierarchies returns the cgroup hierarchies the shim put the init in
// itself (nil when libcontainer did: cgroup v2).
func (s *shim) hierarchies() []string {
	if s.cgroups == nil {
		return nil
	}
	var hs []string
	for h := range s.cgroups.paths() {
		hs = append(hs, h)
	}
	return hs
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

// supervise serves the control socket, reaps the container, records how it
// ended and destroys it.
func (s *shim) supervise() error {
	go s.serve()

	ps, err := s.process.Wait()
	if ps == nil {
		s.log.Error("wait for container init", "err", err)
	}
	// The init is gone, and with it every process of its pid namespace:
	// the output ends, and is complete once exit.json says so.
	ls := s.out.finish(logDrainWait)
	s.log.Info("container output logged", "bytes", ls.In, "record_bytes", ls.Out, "dropped_bytes", ls.Dropped)
	if ls.Dropped > 0 || ls.Err != nil {
		s.log.Warn("container output not all logged", "dropped_bytes", ls.Dropped, "err", ls.Err)
	}
	st := exitStatus(ps)
	if n := readOOMKills(s.memPath); n > 0 || s.oomSeen.Load() && n < 0 {
		st.OOMKilled = true
		st.Reason = ReasonMemoryLimit
		st.Message = "the container hit its memory limit and the OOM killer ran"
	} else if s.killed.Load() {
		st.Reason = ReasonKilled
		st.Message = "killed on request"
	}
	if err := s.container.Destroy(); err != nil {
		// The init is gone: the pid namespace and its processes with it.
		s.log.Warn("destroy container", "err", err)
	}
	s.destroyCgroups()
	if err := WriteExit(s.dir, st); err != nil {
		s.log.Error("record exit status", "err", err)
	}
	s.exit = st
	close(s.done)
	s.log.Info("container exited", "code", st.Code, "signal", st.Signal, "reason", st.Reason)

	// Let pending Wait/Kill callers read their answers, then go. Later
	// callers find no socket and read exit.json.
	s.ln.Close()
	waited := make(chan struct{})
	go func() { s.handlers.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(2 * time.Second):
	}
	if err := os.Remove(filepath.Join(s.dir, SocketFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("remove control socket", "err", err)
	}
	return nil
}

func exitStatus(ps *os.ProcessState) *ExitStatus {
	st := &ExitStatus{FinishedAt: time.Now(), Code: -1}
	if ps == nil {
		st.Reason, st.Message = ReasonLost, "lost track of the container's init process"
		return st
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		st.Code = ps.ExitCode()
	case ws.Signaled():
		st.Code = 128 + int(ws.Signal())
		st.Signal = int(ws.Signal())
	default:
		st.Code = ws.ExitStatus()
	}
	return st
}

// readOOMKills returns the memory cgroup's OOM kill count, -1 if unknown.
func readOOMKills(dir string) int {
	if dir == "" {
		return -1
	}
	for _, name := range []string{"memory.oom_control", "memory.events"} { // v1, v2
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == "oom_kill" {
				if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// listen binds the control socket (through /proc/self/fd when the path is
// longer than sun_path allows).
func (s *shim) listen() error {
	path := filepath.Join(s.dir, SocketFile)
	_ = os.Remove(path) // a stale socket from a previous shim of this dir
	addr := path
	closeDir := func() {}
	if len(path) > maxSocketPath {
		var err error
		if addr, closeDir, err = shortSocketPath(s.dir); err != nil {
			return fmt.Errorf("listen on control socket: %w", err)
		}
	}
	defer closeDir()
	ln, err := net.Listen("unix", addr)
	if err != nil {
		return fmt.Errorf("listen on control socket: %w", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // the name may be a /proc path
	s.ln = ln
	return nil
}

func (s *shim) serve() {
	for {
		// Counted before Accept, so that supervise's Wait (after closing
		// the listener) cannot miss a connection being accepted.
		s.handlers.Add(1)
		conn, err := s.ln.Accept()
		if err != nil {
			s.handlers.Done()
			return
		}
		go func() {
			defer s.handlers.Done()
			defer conn.Close()
			s.handle(conn)
		}()
	}
}

func (s *shim) handle(conn net.Conn) {
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	var req request
	resp := response{V: ProtocolVersion}
	if err := json.Unmarshal(line, &req); err != nil {
		resp.Error = "decode request: " + err.Error()
	} else if req.V != ProtocolVersion {
		resp.Error = fmt.Sprintf("protocol version %d not supported (want %d)", req.V, ProtocolVersion)
	} else {
		s.do(conn, &req, &resp)
	}
	_ = json.NewEncoder(conn).Encode(resp)
}

func (s *shim) do(conn net.Conn, req *request, resp *response) {
	switch req.Op {
	case opState:
	case opSignal:
		if s.exited() {
			resp.Error, resp.ErrorKind = "container has exited", errKindNotRunning
			break
		}
		s.awaitExec(execWait)
		if err := s.container.Signal(syscall.Signal(req.Signal)); err != nil {
			if errors.Is(err, libcontainer.ErrNotRunning) {
				resp.Error, resp.ErrorKind = err.Error(), errKindNotRunning
			} else {
				resp.Error = err.Error()
			}
		}
	case opKill:
		go s.kill(time.Duration(req.GraceNanos))
		s.waitOrHangup(conn)
	case opWait:
		s.waitOrHangup(conn)
	default:
		resp.Error = fmt.Sprintf("unknown operation %q", req.Op)
	}
	resp.State = s.state()
}

// waitOrHangup blocks until the container exits or the client hangs up.
func (s *shim) waitOrHangup(conn net.Conn) {
	hup := make(chan struct{})
	go func() {
		// A client sends one request: any read result means it went away.
		var b [1]byte
		_, _ = conn.Read(b[:])
		close(hup)
	}()
	select {
	case <-s.done:
	case <-hup:
	}
}

// kill sends SIGTERM, waits up to grace, then SIGKILL: with its own pid
// namespace, killing the init kills every process of the container.
func (s *shim) kill(grace time.Duration) {
	if s.exited() {
		return
	}
	s.killed.Store(true)
	if grace > 0 {
		s.awaitExec(min(grace, execWait))
		if err := s.container.Signal(unix.SIGTERM); err == nil {
			t := time.NewTimer(grace)
			defer t.Stop()
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}
	if err := s.container.Signal(unix.SIGKILL); err != nil && !errors.Is(err, libcontainer.ErrNotRunning) {
		s.log.Warn("kill container", "err", err)
	}
}

// logDrainWait bounds how long the shim waits, once the init has exited,
// for the copiers to read the container's output to its end.
const logDrainWait = 5 * time.Second

// execWait bounds how long a signal waits for the init to exec the user
// process (see awaitExec).
const execWait = 2 * time.Second

// awaitExec waits, at most limit, until the init has exec'd the user
// process (its executable is no longer the one it had at "created") or has
// exited. "running" is reported once the init is released, a moment before
// its execve: a signal sent in between would reach libcontainer's init, a
// Go program that dies of SIGTERM with status 2, instead of the user's
// handlers.
func (s *shim) awaitExec(limit time.Duration) {
	if s.execed.Load() {
		return
	}
	deadline := time.Now().Add(limit)
	exe := fmt.Sprintf("/proc/%d/exe", s.pid)
	for {
		var st unix.Stat_t
		if err := unix.Stat(exe, &st); err != nil || st.Dev != s.initExe.Dev || st.Ino != s.initExe.Ino {
			s.execed.Store(true)
			return
		}
		if !time.Now().Before(deadline) {
			return
		}
		select {
		case <-s.done:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

func (s *shim) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *shim) state() *ShimState {
	st := &ShimState{ID: s.bundle.ID, Status: StatusRunning, Pid: s.pid, ShimPid: s.shimPid, StartedAt: s.startedAt}
	if s.exited() {
		st.Status = StatusExited
		st.Exit = s.exit
	}
	return st
}
