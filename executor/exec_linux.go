package executor

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"
)

// Exec runs in the shim, not in the agent nor in a helper of its own:
// the shim owns the container (its libcontainer state, config and
// cgroups), is root in a private mount namespace, and outlives the agent.
// libcontainer's Run of a non-init process re-executes the shim binary as
// "init", whose nsenter (C, before the Go runtime starts) joins the
// container's namespaces; no thread of the shim, let alone of the agent,
// ever calls setns. nsenter's CLONE_PARENT makes the process the shim's
// child, so the shim reaps it and knows its exit. The process takes its
// confinement from the container's own config (capabilities,
// no_new_privs, the seccomp filter, AppArmor; rlimits and masked paths
// come with the namespaces), so it is built never more privileged than
// the init; the shim checks that twice against the init's
// /proc/PID/status: the privileges the config gives the user before it
// starts anything, and the process's own status once it runs (it is
// killed if it has more: a detector for what construction should never
// let through).
//
// An exec session lives as long as its connection: when the agent
// restarts (or its client goes), the connection breaks, the shim hangs
// up the process's terminal and kills the process. Its processes live
// in the container's pid namespace and cgroups: a kill of the container
// (the init's death ends the namespace) ends them, and `rm -f` leaves
// none.

// execDrainWait bounds how long an exec's output is read after the
// process has exited (a child it left may hold the pipe).
const execDrainWait = 2 * time.Second

// stdioOps are the operations whose connection becomes a session.
func (s *shim) stdioOp(op string) func(net.Conn, *bufio.Reader, *request) {
	switch op {
	case opExec:
		return s.serveExec
	case opAttach:
		return s.serveAttach
	}
	return nil
}

// answer writes the response line of a session (State included).
func (s *shim) answer(conn net.Conn, resp response) error {
	resp.V = ProtocolVersion
	resp.State = s.state()
	return json.NewEncoder(conn).Encode(resp)
}

func refuse(kind, msg string) response { return response{Error: msg, ErrorKind: kind} }

// serveExec runs one exec session on conn (see stdio.go).
func (s *shim) serveExec(conn net.Conn, br *bufio.Reader, req *request) {
	x, resp := s.startExec(req.Exec)
	if x == nil {
		_ = s.answer(conn, resp)
		return
	}
	defer x.release()
	if err := s.answer(conn, response{Pid: x.pid}); err != nil {
		x.hangup()
	}
	x.serve(conn, br)
}

// execProc is a running exec: the process and the shim's ends of its
// stdio.
type execProc struct {
	s      *shim
	p      *libcontainer.Process
	pid    int
	stdin  *os.File    // write end (pipe or pty master); nil without input
	output [2]*os.File // read ends (stdout, stderr; a pty: the master, once)
	tty    *os.File    // the pty master, for resizes
	wmu    sync.Mutex  // frames to the connection
	once   sync.Once
	// c lists the container's processes (killSession).
	c *libcontainer.Container
	// exited is set once the process has been reaped: a connection that
	// ends after it is the session's normal end, not a client gone.
	exited atomic.Bool
}

// startExec checks spec against the container and starts it. It returns
// the process, or nil and the refusal.
func (s *shim) startExec(spec *ExecSpec) (*execProc, response) {
	if spec == nil {
		return nil, refuse("", "exec: no process")
	}
	if err := spec.Validate(); err != nil {
		return nil, refuse("", err.Error())
	}
	if s.exited() {
		return nil, refuse(errKindNotRunning, "container has exited")
	}
	b := s.bundle
	if spec.UID == 0 && b.UID != 0 && b.UserNS == nil {
		return nil, refuse(errKindRefused, fmt.Sprintf("user %d:%d is root and the container's user (%d) is not, nor in a user namespace", spec.UID, spec.GID, b.UID))
	}
	c, err := s.execContainer()
	if err != nil {
		return nil, refuse("", err.Error())
	}
	// Compared with the user's process: libcontainer's init has more
	// until it execs it.
	s.awaitExec(execWait)
	init, err := readPrivileges(s.pid)
	if err != nil {
		return nil, refuse(errKindNotRunning, "read the container's privileges: "+err.Error())
	}
	want, err := configPrivileges(c.Config(), spec.UID, b)
	if err != nil {
		return nil, refuse("", err.Error())
	}
	if more := beyond(want, init); len(more) > 0 {
		return nil, refuse(errKindRefused, "exec would have more than the container's process: "+strings.Join(more, "; "))
	}
	x := &execProc{s: s, c: c}
	child, err := x.openStdio(spec)
	if err != nil {
		x.release()
		return nil, refuse("", err.Error())
	}
	cwd := spec.Cwd
	if cwd == "" {
		cwd = "/"
	}
	x.p = &libcontainer.Process{
		Args: spec.Args, Env: withPath(spec.Env), Cwd: cwd, UID: int(spec.UID), GID: int(spec.GID),
		Stdin: child.stdin, Stdout: child.out[0], Stderr: child.out[1],
		ConsoleSocket: child.console, ConsoleWidth: spec.Width, ConsoleHeight: spec.Height,
	}
	err = c.Run(x.p)
	child.close()
	if err != nil {
		x.release()
		if isCommandNotFound(err) {
			return nil, refuse(kindCommandNotFound, fmt.Sprintf("exec %s: %v", spec.Args[0], err))
		}
		return nil, refuse("", "exec: "+err.Error())
	}
	if x.pid, err = x.p.Pid(); err != nil {
		x.kill()
		x.release()
		return nil, refuse("", "exec pid: "+err.Error())
	}
	if resp, ok := x.verify(init); !ok {
		x.release()
		return nil, resp
	}
	if child.consoleParent != nil {
		err := x.receiveConsole(child.consoleParent)
		if err != nil {
			x.kill()
			x.release()
			return nil, refuse("", "exec terminal: "+err.Error())
		}
	}
	s.log.Info("exec started", "pid", x.pid, "args", spec.Args[0], "uid", spec.UID, "tty", spec.Tty)
	return x, response{}
}

// verify compares the running process, once it runs the command, with
// the init; one with more is killed.
func (x *execProc) verify(init procPrivileges) (response, bool) {
	switch awaitCommand(x.pid, execWait) {
	case commandGone:
		return response{}, true // already gone: its exit says how
	case commandNotYet:
		x.kill()
		return refuse("", fmt.Sprintf("exec: the process did not start its command within %v (killed)", execWait)), false
	}
	got, err := readPrivileges(x.pid)
	if err != nil {
		return response{}, true
	}
	if more := beyond(got, init); len(more) > 0 {
		x.kill()
		x.s.log.Error("exec had more privileges than the container's process: killed", "pid", x.pid, "beyond", more)
		return refuse(errKindRefused, "exec had more than the container's process (killed): "+strings.Join(more, "; ")), false
	}
	return response{}, true
}

// Outcomes of awaitCommand.
const (
	commandRuns = iota
	commandGone
	commandNotYet
)

// awaitCommand waits, at most limit, until pid has exec'd its command:
// until then it runs libcontainer's init, the shim's own binary (a sealed
// copy, out of the container's reach), whose privileges are still those
// it applies before the execve.
func awaitCommand(pid int, limit time.Duration) int {
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &self); err != nil {
		return commandRuns // nothing to compare with: check what runs
	}
	exe := "/proc/" + strconv.Itoa(pid) + "/exe"
	deadline := time.Now().Add(limit)
	for {
		var st unix.Stat_t
		if err := unix.Stat(exe, &st); err != nil {
			return commandGone
		}
		if st.Dev != self.Dev || st.Ino != self.Ino {
			return commandRuns
		}
		if time.Now().After(deadline) {
			return commandNotYet
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// childStdio are the process's ends, closed once it holds its own.
type childStdio struct {
	stdin                  *os.File
	out                    [2]*os.File
	console, consoleParent *os.File
}

func (c *childStdio) close() {
	for _, f := range []*os.File{c.stdin, c.out[0], c.out[1], c.console} {
		if f != nil {
			f.Close()
		}
	}
}

// openStdio makes the process's stdio: with a tty, a socket pair
// libcontainer's init sends the terminal's master over (the terminal is
// made in the container's /dev/pts); otherwise pipes, stdin /dev/null
// without input.
func (x *execProc) openStdio(spec *ExecSpec) (*childStdio, error) {
	c := &childStdio{}
	if spec.Tty {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("exec terminal socket: %w", err)
		}
		c.consoleParent, c.console = os.NewFile(uintptr(fds[0]), "console-parent"), os.NewFile(uintptr(fds[1]), "console")
		return c, nil
	}
	var err error
	if spec.Stdin {
		if c.stdin, x.stdin, err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("exec stdin: %w", err)
		}
	} else if c.stdin, err = os.Open(os.DevNull); err != nil {
		return nil, fmt.Errorf("exec stdin: %w", err)
	}
	for i := range c.out {
		if x.output[i], c.out[i], err = os.Pipe(); err != nil {
			c.close()
			return nil, fmt.Errorf("exec output: %w", err)
		}
	}
	return c, nil
}

// receiveConsole takes the terminal's master from the init's socket.
func (x *execProc) receiveConsole(sock *os.File) error {
	defer sock.Close()
	master, err := recvFd(sock)
	if err != nil {
		return err
	}
	x.tty, x.output[0] = master, master
	x.stdin = master
	return nil
}

// recvFd receives one file descriptor sent with SCM_RIGHTS.
func recvFd(sock *os.File) (*os.File, error) {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("receive terminal: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("receive terminal: %d control messages: %v", len(msgs), err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		return nil, fmt.Errorf("receive terminal: %d descriptors: %v", len(fds), err)
	}
	// Non-blocking, so that the runtime's poller serves it and a read
	// can be ended with a deadline.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		_ = unix.Close(fds[0])
		return nil, fmt.Errorf("receive terminal: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), string(buf[:n])), nil
}

// serve pumps the session until the process has exited (then the exit
// frame) or the connection ends (then the process is hung up and killed).
func (x *execProc) serve(conn net.Conn, br *bufio.Reader) {
	var copiers sync.WaitGroup
	for i, f := range x.output {
		if f == nil || (i == 1 && f == x.output[0]) {
			continue
		}
		kind := frameStdout
		if i == 1 {
			kind = frameStderr
		}
		copiers.Add(1)
		go func() {
			defer copiers.Done()
			x.copyOut(conn, kind, f)
		}()
	}
	input := make(chan struct{})
	go func() {
		defer close(input)
		if !x.pumpIn(br) {
			x.hangup() // the connection went: nobody is there any more
		}
	}()
	ps, _ := x.p.Wait()
	x.exited.Store(true)
	st := exitStatus(ps)
	drained := make(chan struct{})
	go func() { copiers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(execDrainWait):
	}
	x.closeOutput() // ends a copier still reading
	<-drained
	if rec, err := json.Marshal(recordOf(st)); err == nil {
		x.wmu.Lock()
		_ = writeFrame(conn, frameExit, rec)
		x.wmu.Unlock()
	}
	conn.Close() // ends pumpIn
	<-input
	x.s.log.Info("exec exited", "pid", x.pid, "code", st.Code, "signal", st.Signal)
}

// copyOut sends f's bytes as frames of kind until f ends.
func (x *execProc) copyOut(conn net.Conn, kind byte, f *os.File) {
	buf := make([]byte, maxFrame)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			x.wmu.Lock()
			werr := writeFrame(conn, kind, buf[:n])
			x.wmu.Unlock()
			if werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, or EIO once a terminal's last holder closed it
		}
	}
}

// pumpIn applies the client's frames until the connection ends; false
// when it ended before the process did (the client went).
func (x *execProc) pumpIn(br *bufio.Reader) bool {
	for {
		kind, p, err := readFrame(br)
		if err != nil {
			return false
		}
		switch kind {
		case frameStdin:
			if x.stdin != nil {
				if _, err := x.stdin.Write(p); err != nil && x.tty == nil {
					x.closeStdin()
				}
			}
		case frameStdinEnd:
			if x.tty == nil {
				x.closeStdin()
			}
		case frameResize:
			if sz, ok := decodeResize(p); ok && x.tty != nil {
				_ = resizeTerminal(x.tty, sz)
			}
		}
	}
}

func (x *execProc) closeStdin() {
	if x.stdin != nil && x.tty == nil {
		x.stdin.Close()
		x.stdin = nil
	}
}

// hangup ends a process whose session is gone: its terminal is hung up
// (SIGHUP to its foreground, as when a terminal closes), and it is killed
// with whatever it started that is still in the container. A connection
// that ends after the process exited (the shim closes it after the exit
// frame) ends nothing: what the process left running keeps running, as
// with docker exec.
func (x *execProc) hangup() {
	if x.exited.Load() {
		return
	}
	if x.tty != nil {
		_ = unix.IoctlSetInt(int(x.tty.Fd()), unix.TIOCSIG, int(unix.SIGHUP))
	}
	x.kill()
	x.killSession()
}

// killSession SIGKILLs the container's processes in the exec's session:
// nsenter makes the exec a session leader (setsid), and what it starts
// stays in its session (a shell's background jobs, a pipeline) unless it
// leaves it, also once the leader is dead and they are the container
// init's children. Only the container's own processes are looked at (its
// cgroup), never the host's. A few rounds catch a fork in flight.
func (x *execProc) killSession() {
	if x.c == nil || x.pid <= 0 {
		return
	}
	for range 5 {
		pids, err := x.c.Processes()
		if err != nil {
			return
		}
		killed := 0
		for _, pid := range pids {
			if sid, ok := sessionOf(pid); ok && sid == x.pid {
				_ = unix.Kill(pid, unix.SIGKILL)
				killed++
			}
		}
		if killed == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sessionOf reads pid's session ID from /proc/PID/stat (host pids: the
// shim's /proc is the host's); false for a process gone or a zombie.
func sessionOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseSession(string(b))
}

// parseSession reads the session ID from a /proc/PID/stat line: "pid
// (comm) state ppid pgrp session …", comm holding any byte; false for a
// zombie (it is dead already) or a line it cannot read.
func parseSession(stat string) (int, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 4 || f[0] == "Z" {
		return 0, false
	}
	sid, err := strconv.Atoi(f[3])
	return sid, err == nil
}

func (x *execProc) kill() {
	if x.p != nil {
		_ = x.p.Signal(unix.SIGKILL)
	}
}

func (x *execProc) closeOutput() {
	for _, f := range x.output {
		if f != nil {
			_ = f.SetReadDeadline(time.Unix(1, 0))
		}
	}
}

// release closes the shim's ends.
func (x *execProc) release() {
	x.once.Do(func() {
		seen := map[*os.File]bool{}
		for _, f := range []*os.File{x.stdin, x.output[0], x.output[1], x.tty} {
			if f != nil && !seen[f] {
				seen[f] = true
				f.Close()
			}
		}
	})
}

// resizeTerminal sets a pty master's window size; the kernel tells the
// terminal's foreground process group (SIGWINCH).
func resizeTerminal(master *os.File, sz TermSize) error {
	return unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: sz.Width, Row: sz.Height})
}

// readPrivileges reads pid's /proc/PID/status.
func readPrivileges(pid int) (procPrivileges, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return procPrivileges{}, err
	}
	defer f.Close()
	return parseStatus(f)
}

// configPrivileges is what cfg gives a process of uid once it has
// exec'd its command (no file capabilities: no_new_privs or not, brim's
// configs keep none): the bounding set, the ambient set, and for root
// (uid 0 in the container) permitted and effective the bounding set; the
// host uid through the container's user namespace.
func configPrivileges(cfg configs.Config, uid uint32, b *Bundle) (procPrivileges, error) {
	p := procPrivileges{NoNewPrivs: cfg.NoNewPrivileges, Filters: -1}
	if c := cfg.Capabilities; c != nil {
		var err error
		for _, set := range []struct {
			to    *uint64
			names []string
		}{{&p.Bnd, c.Bounding}, {&p.Amb, c.Ambient}, {&p.Inh, c.Inheritable}} {
			if *set.to, err = capBits(set.names); err != nil {
				return p, fmt.Errorf("container capabilities: %w", err)
			}
		}
	}
	p.Prm, p.Eff = p.Amb, p.Amb
	if uid == 0 {
		p.Prm, p.Eff = p.Bnd|p.Amb, p.Bnd|p.Amb
	}
	if cfg.Seccomp != nil {
		p.Seccomp = 2
	}
	host := uid
	if r := b.UserNS; r != nil {
		host = r.HostUID + uid
	}
	p.UIDs = [4]uint32{host, host, host, host}
	return p, nil
}

// execContainer returns the libcontainer container to run execs in: the
// shim's own on cgroup v2, unless the state needs correcting. So the
// shim writes, once, a copy of the state under the container directory,
// and loads that:
//   - on v1 the shim joined the groups itself and libcontainer's state
//     names none (join_linux.go): an exec there would stay in the shim's
//     groups. The copy names the groups the init is in; the exec
//     processes join them before they run;
//   - a container made from a warm sandbox: its directory was renamed at
//     the claim (libcontainer starts an exec in the root under it, which
//     the state names under the sandbox's), and on v2 its init moved from
//     the sandbox's group (joinV2), which the state still names.
func (s *shim) execContainer() (*libcontainer.Container, error) {
	s.execMu.Lock()
	defer s.execMu.Unlock()
	if s.execC != nil {
		return s.execC, nil
	}
	var paths map[string]string
	switch {
	case s.cgroups != nil:
		paths = s.cgroups.paths()
	case s.sandboxDir != "":
		paths = map[string]string{"": filepath.Join("/sys/fs/cgroup", s.bundle.CgroupPath)} // joinV2's
	default:
		s.execC = s.container
		return s.execC, nil
	}
	st, err := s.container.State()
	if err != nil {
		return nil, fmt.Errorf("exec: container state: %w", err)
	}
	st.CgroupPaths = paths
	if s.sandboxDir != "" {
		if rel, err := filepath.Rel(s.sandboxDir, st.Config.Rootfs); err == nil && filepath.IsLocal(rel) {
			st.Config.Rootfs = filepath.Join(s.dir, rel)
		}
	}
	root := filepath.Join(s.dir, execStateDir)
	dir := filepath.Join(root, s.container.ID())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	data, err := json.Marshal(st)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "state.json"), data, 0o600)
	}
	if err != nil {
		return nil, fmt.Errorf("exec: write state: %w", err)
	}
	c, err := libcontainer.Load(root, s.container.ID())
	if err != nil {
		return nil, fmt.Errorf("exec: load container: %w", err)
	}
	s.execC = c
	return c, nil
}

// execStateDir holds, on cgroup v1, the state execs are run from (see
// execContainer).
const execStateDir = "exec-state"

// serveAttach runs one attach session: the client's stdin and resizes go
// to the container's stdin and terminal until the connection ends or the
// container exits (then the shim closes it).
func (s *shim) serveAttach(conn net.Conn, br *bufio.Reader, _ *request) {
	if s.exited() {
		_ = s.answer(conn, refuse(errKindNotRunning, "container has exited"))
		return
	}
	if s.out == nil || !s.out.interactive() {
		_ = s.answer(conn, refuse("", "the container has no stdin or terminal to attach to (run it with -i or -t)"))
		return
	}
	if err := s.answer(conn, response{}); err != nil {
		return
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-s.done:
			conn.Close()
		case <-stop:
		}
	}()
	for {
		kind, p, err := readFrame(br)
		if err != nil {
			return
		}
		switch kind {
		case frameStdin:
			s.out.writeStdin(p)
		case frameStdinEnd:
			s.out.closeStdin()
		case frameResize:
			if sz, ok := decodeResize(p); ok {
				s.out.resize(sz)
			}
		}
	}
}
