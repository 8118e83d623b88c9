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
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"
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
	// Recycle, for a warm shim, keeps Report and GoAhead open while its
	// container runs and, once it has ended and the shim is as it was
	// before its launch (see recycler), reports EventFree and waits for
	// another container directory instead of exiting: a container then
	// costs no process start-up and exit of its shim (≈ 3 ms of CPU).
	Recycle bool
	// Prepare, for a warm shim, makes ahead what the next container
	// would otherwise make on its launch's path (readySet: its network,
	// IPC and UTS namespaces, its /dev, /tmp and /sys mounts), for a container
	// without a user namespace.
	Prepare bool
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
// stops it). A warm shim with opts.Recycle runs containers one after
// the other until a launch fails, its reset does, it reaches its bounds
// (recycler), or the containerizer closes GoAhead.
func Run(ctx context.Context, opts RunOptions) error {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Dir != "" {
		_, _, err := runOne(ctx, opts, opts.Dir, nil, nil, log, false)
		return err
	}
	// A warm shim: started ahead of any launch, it learns its container
	// directory first.
	if opts.GoAhead == nil || opts.Report == nil {
		return errors.New("run shim: no container directory and no handshake")
	}
	prewarm()
	var (
		ready    *readySet
		readyErr error // what could not be made, logged with the next container
	)
	if opts.Prepare {
		ready, readyErr = makeReady(nil)
	}
	defer func() { ready.close() }()
	br := bufio.NewReader(opts.GoAhead)
	rc := newRecycler(opts.Recycle)
	for {
		dir, err := adoptDir(br)
		if err != nil {
			// EOF: the containerizer closed the pool or died; nothing
			// to report to anyone.
			opts.Report.Close()
			opts.GoAhead.Close()
			return err
		}
		if readyErr != nil {
			// Now in the container's shim.log (a warm shim's output
			// goes nowhere until it has a directory).
			log.Warn("not all made ahead: libcontainer makes the rest", "err", readyErr)
			readyErr = nil
		}
		kept, retire, err := runOne(ctx, opts, dir, br, ready, log, rc.again())
		if err == nil && kept && retire == nil {
			retire = rc.reset(ready.held())
		}
		if err == nil && kept && retire == nil {
			retire = detach(dir)
		}
		if err != nil || !kept || retire != nil {
			if retire != nil {
				// The agent logs why: the container's directory, and
				// this shim's log in it, may be gone by then.
				log.Info("shim not recycled", "reason", retire)
				_ = writeReport(opts.Report, Report{Event: EventRetired, Error: retire.Error()})
			}
			closeHandshake(opts)
			return err
		}
		if opts.Prepare {
			ready, readyErr = makeReady(ready)
		}
		if err := writeReport(opts.Report, Report{Event: EventFree}); err != nil {
			// The containerizer that started us is gone (an agent
			// restart): nobody will hand us another container.
			closeHandshake(opts)
			return nil
		}
	}
}

// makeReady returns r when no launch used it, or a new set made ahead
// (nil when nothing can be made: libcontainer then makes it all, as for
// a shim that is not warm), and what could not be made.
func makeReady(r *readySet) (*readySet, error) {
	if r != nil && !r.used && r.held() > 0 {
		return r, nil
	}
	template, err := readyTemplate()
	if err != nil {
		return nil, err
	}
	return makeReadySet(template)
}

// runOne launches and supervises the container of dir; goAhead, when not
// nil, is opts.GoAhead read through (a warm shim's); ready, when not nil,
// is what the shim made ahead for it (readySet). With keep the
// handshake stays open after the launch (kept), and retire says why,
// once the container has ended, the shim is not clean enough to take
// another (shim.leave; nil: it is); otherwise the handshake is closed
// once the launch is reported.
func runOne(ctx context.Context, opts RunOptions, dir string, goAhead io.Reader, ready *readySet, log *slog.Logger, keep bool) (kept bool, retire, err error) {
	s := &shim{dir: dir, log: log, done: make(chan struct{}), shimPid: os.Getpid(), ready: ready}
	if goAhead == nil && opts.GoAhead != nil {
		goAhead = opts.GoAhead
	}
	err = s.launch(ctx, opts.Report, goAhead)
	if err != nil && s.bundle != nil && s.bundle.Warm {
		// A sandbox that ends before its claim (its agent died, or its
		// making failed): its groups go with it.
		if rerr := removeSandboxGroups(s.bundle.CgroupPath); rerr != nil {
			log.Warn("remove warm sandbox groups", "err", rerr)
		}
	}
	if opts.Report != nil && err != nil {
		rep := Report{Event: EventError, Error: err.Error()}
		if errors.Is(err, ErrCommandNotFound) {
			rep.Kind = kindCommandNotFound
		}
		_ = writeReport(opts.Report, rep)
	}
	if err != nil || !keep {
		closeHandshake(opts)
	}
	if err != nil {
		return false, nil, err
	}
	if err := s.supervise(); err != nil {
		return false, nil, err
	}
	if !keep {
		return false, nil, nil
	}
	return true, s.leave(), nil
}

// closeHandshake closes the handshake's pipes (those set).
func closeHandshake(opts RunOptions) {
	if opts.Report != nil {
		opts.Report.Close()
	}
	if opts.GoAhead != nil {
		opts.GoAhead.Close()
	}
}

type shim struct {
	dir     string
	log     *slog.Logger
	bundle  *Bundle
	shimPid int

	cfg       *configs.Config // libcontainer's config of the container
	container *libcontainer.Container
	process   *libcontainer.Process
	pid       int
	startedAt time.Time
	memPath   string      // memory cgroup directory, for the OOM counter
	cgroups   *cgroupJoin // the groups the shim joins itself (nil: libcontainer does)
	out       *output     // stdio and the log, from a successful launch
	tramp     *trampoline // a warm sandbox's trampoline, until its claim
	ready     *readySet   // made ahead for this container (ready_linux.go)

	initExe unix.Stat_t // the init's executable before exec (see awaitExec)
	execed  atomic.Bool

	ln       net.Listener
	handlers sync.WaitGroup
	served   bool // every control connection ended before supervise returned
	killed   atomic.Bool
	oomSeen  atomic.Bool

	done chan struct{} // closed once exit is set and exit.json written
	exit *ExitStatus

	execMu sync.Mutex
	execC  *libcontainer.Container // what execs run in (exec_linux.go)
	// sandboxDir is a claimed warm sandbox's directory before the
	// containerizer renamed it to the container's (the root
	// libcontainer's state names is under it).
	sandboxDir string
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
		s.served = true
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
	br := bufio.NewReader(conn)
	line, err := br.ReadBytes('\n')
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
	} else if session := s.stdioOp(req.Op); session != nil {
		session(conn, br, &req) // answers itself, then streams
		return
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
