package executor

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/sys/capability"
	"github.com/moby/sys/user"
	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs2"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"
)

// TrampolineEnv names, in a warm sandbox's process environment, the
// trampoline's message and status descriptors (executor/trampoline's
// EnvVar; a test holds the two equal).
const TrampolineEnv = "_BRIM_TRAMPOLINE"

// Descriptors of the trampoline in the sandbox's process: its own
// executable, the message it reads, the status it writes.
const (
	trampolineExeFD    = 3
	trampolineMsgFD    = 4
	trampolineStatusFD = 5
)

// trampolineCaps are what the trampoline needs beyond the container's own
// capabilities for the work libcontainer's init does as root before the
// exec (sethostname, the stdio's owner, setgroups/setgid/setuid, the
// bounding set); it drops them all before the exec.
var trampolineCaps = []string{"CAP_SYS_ADMIN", "CAP_CHOWN", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP"}

// trampoline is the shim's side of a warm sandbox's trampoline.
type trampoline struct {
	exe     *os.File // the shim's executable, run as the sandbox's process
	msgR    *os.File // the sandbox's ends, closed once it has them
	statusW *os.File
	msgW    *os.File // the shim's ends
	statusR *os.File
}

// trampolineProcess makes p, the container's process, the trampoline:
// this very binary (the sealed copy the shim runs from), root with the
// container's capabilities and trampolineCaps, its pipes as fds 3 to 5.
func (s *shim) trampolineProcess(p *libcontainer.Process) (*trampoline, error) {
	exe, err := os.Open("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("trampoline: %w", err)
	}
	t := &trampoline{exe: exe}
	if t.msgR, t.msgW, err = os.Pipe(); err == nil {
		t.statusR, t.statusW, err = os.Pipe()
	}
	if err != nil {
		t.close()
		return nil, fmt.Errorf("trampoline: %w", err)
	}
	caps := *capsOf(s.cfg)
	add := func(set []string) []string {
		out := slices.Clone(set)
		for _, c := range trampolineCaps {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
		return out
	}
	caps.Bounding, caps.Effective, caps.Permitted = add(caps.Bounding), add(caps.Effective), add(caps.Permitted)
	p.Args = []string{fmt.Sprintf("/proc/self/fd/%d", trampolineExeFD)}
	p.Env = []string{fmt.Sprintf("%s=%d,%d", TrampolineEnv, trampolineMsgFD, trampolineStatusFD)}
	p.UID, p.GID = 0, 0
	p.ExtraFiles = []*os.File{t.exe, t.msgR, t.statusW}
	p.Capabilities = &caps
	return t, nil
}

// closeChildEnds closes the shim's copies of the sandbox's ends, once
// the sandbox's process holds them: EOF on the status pipe then means
// the trampoline exec'd or died.
func (t *trampoline) closeChildEnds() {
	for _, f := range []*os.File{t.exe, t.msgR, t.statusW} {
		f.Close()
	}
}

func (t *trampoline) close() {
	for _, f := range []*os.File{t.exe, t.msgR, t.statusW, t.msgW, t.statusR} {
		if f != nil {
			f.Close()
		}
	}
}

// trampolineWait bounds the wait for the trampoline's exec (reading the
// message, a few system calls and execve: well under a millisecond
// idle).
const trampolineWait = time.Minute

// started waits for the trampoline's first byte: it runs and waits for
// its message. EOF is a trampoline that could not start (an exec that
// failed: a dynamically linked shim binary in a root without its
// libraries, say).
func (t *trampoline) started() error {
	_ = t.statusR.SetReadDeadline(time.Now().Add(trampolineWait))
	var b [1]byte
	_, err := io.ReadFull(t.statusR, b[:])
	_ = t.statusR.SetReadDeadline(time.Time{})
	if err != nil || b[0] != '+' {
		return fmt.Errorf("the sandbox's exec trampoline did not start (a dynamically linked shim binary in a root without its libraries?): %v", err)
	}
	return nil
}

// release sends the task to the trampoline and waits until it has
// exec'd it or failed: its status pipe then says "x" (about to exec)
// and closes on the exec, or carries why it failed.
func (t *trampoline) release(msg []byte) error {
	_, err := t.msgW.Write(msg)
	t.msgW.Close()
	if err != nil {
		return fmt.Errorf("release the task: %w", err)
	}
	_ = t.statusR.SetReadDeadline(time.Now().Add(trampolineWait))
	out, err := io.ReadAll(io.LimitReader(t.statusR, 8192))
	t.statusR.Close()
	if err != nil {
		return fmt.Errorf("wait for the task's exec: %w", err)
	}
	return trampolineStatus(out)
}

// trampolineStatus reads what the trampoline wrote after "+": "x" alone
// is an exec, anything else why it failed.
func trampolineStatus(out []byte) error {
	execed := len(out) > 0 && out[0] == 'x'
	if execed {
		out = out[1:]
	}
	if len(out) > 0 {
		kind, text, _ := strings.Cut(strings.TrimSpace(string(out)), "\t")
		if kind == "notfound" {
			return fmt.Errorf("%w: %s", ErrCommandNotFound, text)
		}
		return fmt.Errorf("start task: %s", text)
	}
	if !execed {
		return errors.New("start task: the sandbox's trampoline ended without running it")
	}
	return nil
}

// claim finishes a warm sandbox: it releases the init to exec the
// trampoline, reports "ready", and waits for the claim — the container
// directory, renamed by the containerizer from the sandbox's and holding
// the task's bundle. Then it confines the init as the container's (the
// unified group, the oom_score_adj), checks the confinement, and hands
// the task to the trampoline. EOF before a claim destroys the sandbox
// (launch's abort).
func (s *shim) claim(report io.Writer, goAhead io.Reader, clk *stepClock) error {
	if err := s.container.Exec(); err != nil {
		return fmt.Errorf("start the trampoline: %w", err)
	}
	if err := s.tramp.started(); err != nil {
		return err
	}
	clk.mark("exec trampoline")
	if err := writeReport(report, clk.report(EventReady, s.pid)); err != nil {
		return fmt.Errorf("report ready: %w", err)
	}
	s.log.Info("warm sandbox ready", "pid", s.pid)
	br, ok := goAhead.(*bufio.Reader)
	if !ok {
		br = bufio.NewReader(goAhead)
	}
	line, err := br.ReadString('\n')
	if err != nil {
		return fmt.Errorf("wait for a claim: %w", err)
	}
	clk = newStepClock()
	b, err := s.adoptClaim(strings.TrimSpace(line))
	if err != nil {
		return err
	}
	clk.mark("read claim")
	if err := s.confineClaimed(b); err != nil {
		return err
	}
	clk.mark("confine")
	msg, err := s.taskMessage(b)
	if err != nil {
		return err
	}
	if err := s.out.startLog(b.Data(s.dir), b.Log); err != nil {
		return err
	}
	if err := s.tramp.release(msg); err != nil {
		return err
	}
	s.execed.Store(true)
	clk.mark("exec")
	return s.running(report, clk)
}

// awaitPrepared waits for SandboxPrepared: the isolators have made the
// sandbox's groups. EOF (the agent died while making them) or anything
// else fails the launch, whose failure removes the groups (Run).
func awaitPrepared(goAhead io.Reader) error {
	br, ok := goAhead.(*bufio.Reader)
	if !ok {
		return errors.New("warm sandbox: no handshake")
	}
	line, err := br.ReadString('\n')
	if err != nil {
		return fmt.Errorf("wait for the sandbox's groups: %w", err)
	}
	if l := strings.TrimSpace(line); l != SandboxPrepared {
		return fmt.Errorf("wait for the sandbox's groups: got %q, want %q", l, SandboxPrepared)
	}
	return nil
}

// removeSandboxGroups removes a warm sandbox's groups, cgroup path p in
// every hierarchy, when it ends before its claim: the cgroup isolator
// made them, and after the agent's death nobody else would (rmdir only:
// a group with a process stays, and says so).
func removeSandboxGroups(p string) error {
	cg := &cgroups.Cgroup{Path: p, Resources: &cgroups.Resources{}}
	var (
		m   cgroups.Manager
		err error
	)
	if cgroups.IsCgroup2UnifiedMode() {
		m, err = fs2.NewManager(cg, filepath.Join(fs2.UnifiedMountpoint, p))
	} else {
		m, err = managerAt(cg)
	}
	if err == nil {
		err = m.Destroy()
	}
	if err != nil {
		return fmt.Errorf("remove the sandbox's groups %s: %w", p, err)
	}
	return nil
}

// adoptClaim moves the shim to the claimed container's directory and
// reads its bundle: a container made from this sandbox.
func (s *shim) adoptClaim(dir string) (*Bundle, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("claim: container directory %q is not absolute", dir)
	}
	if err := os.Chdir(dir); err != nil {
		return nil, fmt.Errorf("claim: enter container directory: %w", err)
	}
	b, err := ReadBundle(dir)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if b.Warm || b.Sandbox != s.bundle.ID {
		return nil, fmt.Errorf("claim: the bundle is not of a container made from sandbox %s", s.bundle.ID)
	}
	if !joinLate() && b.CgroupPath != s.bundle.CgroupPath {
		// v2 renames no group, and a move would leave the init's
		// cgroup namespace (and /sys/fs/cgroup) rooted at the old one.
		return nil, fmt.Errorf("claim: cgroup %s: on cgroup v2 a container keeps its sandbox's group %s", b.CgroupPath, s.bundle.CgroupPath)
	}
	// The shim's log and control socket moved with the directory.
	s.sandboxDir, s.dir, s.bundle = s.dir, dir, b
	s.log = s.log.With("id", b.ID)
	return b, nil
}

// confineClaimed puts the init in the container's groups (the v1
// directories were renamed by the cgroup isolator; a hybrid host's
// unified one is joined now; on v2 the container's group is the
// sandbox's, which the init is in), sets its oom_score_adj (as the
// runtime does for a launch, from the host) and checks the confinement
// as a launch does.
func (s *shim) confineClaimed(b *Bundle) error {
	if s.cgroups != nil {
		if err := s.cgroups.claim(b.CgroupPath, s.pid); err != nil {
			return err
		}
	}
	if b.OOMScoreAdj != nil {
		adj := strconv.Itoa(*b.OOMScoreAdj)
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", s.pid), []byte(adj), 0); err != nil {
			return fmt.Errorf("set oom_score_adj: %w", err)
		}
	}
	return verifyConfinement(s.pid, b, s.hierarchies())
}

// taskMessage is the trampoline's message for b's task: what
// libcontainer's init would have done with the bundle's process.
func (s *shim) taskMessage(b *Bundle) ([]byte, error) {
	env, err := prepareEnv(withPath(b.Env), int(b.UID), s.pid)
	if err != nil {
		return nil, err
	}
	caps := capsOf(s.cfg)
	m := trampolineMessage{
		UID: b.UID, GID: b.GID, Hostname: b.Hostname, Cwd: b.Cwd,
		Path: PathOf(env), Args: b.Args, Env: env,
		Bounding: capMask(caps.Bounding), Effective: capMask(caps.Effective), Permitted: capMask(caps.Permitted),
		Inheritable: capMask(caps.Inheritable), Ambient: capMask(caps.Ambient),
	}
	if m.Hostname == "" {
		m.Hostname = b.ID
	}
	if m.Cwd == "" {
		m.Cwd = "/"
	}
	return m.encode()
}

// trampolineMessage is what the trampoline reads (trampoline.c), native
// byte order: "BRT1"; u32 uid, gid, ngroups, argc, envc, flags; u64
// capability masks bounding, effective, permitted, inheritable, ambient;
// u32 gids; then NUL-terminated hostname, cwd, PATH, argv and envp.
type trampolineMessage struct {
	UID, GID                                             uint32
	Groups                                               []uint32
	Bounding, Effective, Permitted, Inheritable, Ambient uint64
	Hostname, Cwd, Path                                  string
	Args, Env                                            []string
}

// maxTrampolineMessage is the trampoline's bound on a message.
const maxTrampolineMessage = 8 << 20

func (m *trampolineMessage) encode() ([]byte, error) {
	if len(m.Args) == 0 {
		return nil, errors.New("trampoline message: empty command")
	}
	buf := []byte("BRT1")
	for _, v := range []uint32{m.UID, m.GID, uint32(len(m.Groups)), uint32(len(m.Args)), uint32(len(m.Env)), 0} {
		buf = binary.NativeEndian.AppendUint32(buf, v)
	}
	for _, v := range []uint64{m.Bounding, m.Effective, m.Permitted, m.Inheritable, m.Ambient} {
		buf = binary.NativeEndian.AppendUint64(buf, v)
	}
	for _, g := range m.Groups {
		buf = binary.NativeEndian.AppendUint32(buf, g)
	}
	strs := append(append([]string{m.Hostname, m.Cwd, m.Path}, m.Args...), m.Env...)
	for _, s := range strs {
		if strings.IndexByte(s, 0) >= 0 {
			return nil, fmt.Errorf("trampoline message: %q contains a NUL byte", s)
		}
		buf = append(append(buf, s...), 0)
	}
	if len(buf) > maxTrampolineMessage {
		return nil, fmt.Errorf("trampoline message: %d bytes, over %d", len(buf), maxTrampolineMessage)
	}
	return buf, nil
}

// capNumbers maps "CAP_X" to its number.
var capNumbers = func() map[string]capability.Cap {
	m := make(map[string]capability.Cap)
	for _, c := range capability.ListKnown() {
		m["CAP_"+strings.ToUpper(c.String())] = c
	}
	return m
}()

// capMask is the bit mask of names; unknown names are skipped, as
// libcontainer skips them.
func capMask(names []string) uint64 {
	var m uint64
	for _, n := range names {
		if c, ok := capNumbers[n]; ok && c < 64 {
			m |= 1 << uint(c)
		}
	}
	return m
}

// prepareEnv is libcontainer's prepareEnv for the trampoline: the last
// of duplicate variables kept in the order given, no empty HOME, NUL
// bytes refused, and HOME, when not set, the user's home in the
// container's /etc/passwd ("/" without one), read through the init's
// root (pid).
func prepareEnv(env []string, uid, pid int) ([]string, error) {
	homeSet := false
	out := make([]string, 0, len(env)+1)
	saw := make(map[string]bool, len(env))
	for n := len(env); n > 0; n-- {
		kv := env[n-1]
		key, val, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			return nil, errors.New("invalid environment variable: missing '='")
		case key == "":
			return nil, errors.New("invalid environment variable: name cannot be empty")
		case saw[key]:
			continue
		}
		saw[key] = true
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, fmt.Errorf("invalid environment variable %q: contains nul byte (\\x00)", key)
		}
		if key == "HOME" {
			if val == "" {
				continue
			}
			homeSet = true
		}
		out = append(out, kv)
	}
	slices.Reverse(out)
	if !homeSet {
		out = append(out, "HOME="+containerHome(uid, pid))
	}
	return out, nil
}

// containerHome returns uid's home in the /etc/passwd of pid's root, "/"
// when it has none (as libcontainer's getUserHome).
func containerHome(uid, pid int) string {
	root, err := unix.Open(fmt.Sprintf("/proc/%d/root", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "/"
	}
	defer func() { _ = unix.Close(root) }()
	// Symlinks resolve inside the container's root, as they do for its
	// init.
	fd, err := unix.Openat2(root, "etc/passwd", &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT})
	if err != nil {
		return "/"
	}
	f := os.NewFile(uintptr(fd), "passwd")
	defer f.Close()
	users, err := user.ParsePasswdFilter(f, func(u user.User) bool { return u.Uid == uid })
	if err != nil || len(users) == 0 {
		return "/"
	}
	return users[0].Home
}

// capsOf returns the capabilities of the container's process.
func capsOf(cfg *configs.Config) *configs.Capabilities {
	if cfg == nil || cfg.Capabilities == nil {
		return &configs.Capabilities{}
	}
	return cfg.Capabilities
}
