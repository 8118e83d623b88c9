//go:build linux

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/internal/cgtree"
	"github.com/brimnode/brim/internal/testutil"
)

// CgroupRoot is where the cgroup hierarchies are mounted.
const CgroupRoot = cgtree.Root

// Binaries are the programs under test.
type Binaries struct {
	Brim string // $BRIM_BINARY
}

// proc is one daemon the harness started and restarts: only its own PID
// is ever signalled. It is safe for concurrent use: the fault loop kills
// and restarts it, the supervisor restarts it when it exits on its own
// (as systemd's Restart=always would).
type proc struct {
	Name    string // m0, a1, e2, …
	bin     string
	args    []string
	logPath string
	// onExit runs when the process has exited, before exited closes (a
	// master's front proxy goes down with it). Set before the first start.
	onExit func()

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	exitErr  error     // Wait's result, once exited is closed
	exitedAt time.Time // when it exited
	// held: the harness stopped the process on purpose (a fault, the
	// teardown); the supervisor leaves it down until start.
	held bool
}

func (p *proc) start() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = false
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) {
		err := cmd.Wait()
		if p.onExit != nil {
			p.onExit()
		}
		p.mu.Lock()
		if p.cmd == cmd {
			p.exitErr, p.exitedAt = err, time.Now()
		}
		p.mu.Unlock()
		close(exited)
	}(p.exited)
	return nil
}

// current is the process and its exit channel (nil before the first
// start).
func (p *proc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.exited
}

func (p *proc) running() bool {
	cmd, exited := p.current()
	if cmd == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

func (p *proc) pid() int {
	cmd, _ := p.current()
	if cmd == nil || !p.running() {
		return 0
	}
	return cmd.Process.Pid
}

// signal sends sig to the running process (SIGSTOP, SIGCONT); false if
// none runs.
func (p *proc) signal(sig syscall.Signal) bool {
	cmd, _ := p.current()
	if cmd == nil || !p.running() {
		return false
	}
	return cmd.Process.Signal(sig) == nil
}

// kill9 sends SIGKILL to this process only, reaps it and holds it down.
func (p *proc) kill9() {
	p.mu.Lock()
	p.held = true
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL) // also ends a stopped process
	<-exited
}

// stop sends SIGTERM, then SIGKILL after grace; it reports whether the
// process stopped on SIGTERM. It holds the process down.
func (p *proc) stop(grace time.Duration) bool {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
	cmd, exited := p.current()
	if cmd == nil || !p.running() {
		return true
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-exited:
		return true
	case <-time.After(grace):
		p.kill9()
		return false
	}
}

// isHeld reports a process the harness stopped on purpose and has not
// started again.
func (p *proc) isHeld() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// exitedAlone reports a process that exited without the harness asking
// (not held): how long ago, and its Wait error.
func (p *proc) exitedAlone() (ago time.Duration, ok bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.held {
		return 0, false, nil
	}
	select {
	case <-p.exited:
		return time.Since(p.exitedAt), true, p.exitErr
	default:
		return 0, false, nil
	}
}

// waitReady polls ready until it holds, the process exits, or bound
// passes.
func (p *proc) waitReady(bound time.Duration, ready func() bool) error {
	_, exited := p.current()
	deadline := time.Now().Add(bound)
	for !ready() {
		select {
		case <-exited:
			b, _ := os.ReadFile(p.logPath)
			return fmt.Errorf("%s exited at start: %s", p.Name, tail(b, 2000))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %v", p.Name, bound)
		}
	}
	return nil
}

// Master is one `brim master` of a run. Clients (agents, frameworks,
// the harness) reach it through its front proxy (Addr), which goes down
// with the process, so that its port refuses connections while it is
// dead as a master's own would, and which can cut one agent's
// connections (link faults). In HA mode it reaches each etcd member
// through a proxy of its own (EtcdLinks), which the etcd-cut fault stops.
type Master struct {
	proc
	Addr      string // the front proxy: what clients dial, and the advertised address
	Listen    string // where the process listens
	StateDir  string // its bbolt store (single-master mode)
	Front     *Proxy
	EtcdLinks []*Proxy // HA: one per etcd member
	hc        *http.Client
	raw       *http.Client // no redirects: a standby's own answer
}

// newMaster makes master i (not started): with etcd members (HA), on
// the store etcd://<its links>/PREFIX with session TTL ttl; without, on
// a bbolt state dir.
func newMaster(bin, base string, i int, etcd []*EtcdMember, ttl time.Duration, owner func(net.Conn) string) (*Master, error) {
	listen, err := freeAddr()
	if err != nil {
		return nil, err
	}
	front, err := NewProxy(listen)
	if err != nil {
		return nil, err
	}
	front.Owner = owner
	m := &Master{Addr: front.Addr(), Listen: listen, Front: front,
		hc: &http.Client{Timeout: 5 * time.Second},
		raw: &http.Client{Timeout: 2 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}}
	m.Name = fmt.Sprintf("m%d", i)
	m.bin, m.logPath = bin, filepath.Join(base, m.Name+".log")
	m.onExit = front.Down
	m.args = []string{"master", "--listen", listen, "--allocation-interval", "100ms",
		"--heartbeat-interval", "200ms", "--max-missed-heartbeats", "10", "--failover-timeout", "2m", "--log-level", "debug"}
	if len(etcd) == 0 {
		m.StateDir = filepath.Join(base, m.Name)
		m.args = append(m.args, "--state-dir", m.StateDir)
		return m, nil
	}
	var eps []string
	for _, e := range etcd {
		l, err := NewProxy(e.Client)
		if err != nil {
			m.closeLinks()
			return nil, err
		}
		m.EtcdLinks = append(m.EtcdLinks, l)
		eps = append(eps, l.Addr())
	}
	m.args = append(m.args, "--store", "etcd://"+strings.Join(eps, ",")+EtcdPrefix, "--advertise", m.Addr,
		"--session-ttl", ttl.String())
	return m, nil
}

// closeLinks closes the master's proxies.
func (m *Master) closeLinks() {
	m.Front.Close()
	for _, l := range m.EtcdLinks {
		l.Close()
	}
}

// Start starts (or restarts) the master and waits until it answers
// HTTP (a standby answers too: 503 or a redirect).
func (m *Master) Start() error {
	if err := m.Front.Up(); err != nil {
		return err
	}
	if err := m.start(); err != nil {
		return err
	}
	return m.waitReady(30*time.Second, func() bool { return m.health() != 0 })
}

// health is GET /health's status code at the master itself (0: no
// answer): 200 from a leader or a single master, 503 from a standby.
func (m *Master) health() int {
	resp, err := m.raw.Get("http://" + m.Listen + "/health")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// State GETs /state from this master itself; a standby's answer (a
// redirect, 503) is an error.
func (m *Master) State() (MasterState, error) {
	var st MasterState
	resp, err := m.raw.Get("http://" + m.Listen + "/state")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /state at %s: %s", m.Name, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// Post POSTs body as JSON to path at this master and returns an error
// unless 2xx (redirects are followed: a standby sends it to the leader).
func (m *Master) Post(path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := m.hc.Post("http://"+m.Listen+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var msg bytes.Buffer
		_, _ = msg.ReadFrom(resp.Body)
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, msg.String())
	}
	return nil
}

// Agent is one `brim agent` of a run, with its own cgroup parent, state
// dir (a small tmpfs) and socket. Its links to the masters are the
// masters' front proxies, which know its connections by its PID.
type Agent struct {
	proc
	ID       string // the agent's ID, known once it has started
	Base     string
	StateDir string
	Socket   string
	Parent   string   // absolute cgroup parent, e.g. /brim-chaos-1a2b3c4d
	Net      *Network // the container network (--network)
}

// newAgent makes agent i of a run (not started), given the masters'
// addresses (--master).
func newAgent(bin, base string, i int, parent, masters string, extra ...string) (*Agent, error) {
	name := fmt.Sprintf("a%d", i)
	dir := filepath.Join(base, name)
	a := &Agent{Base: dir, StateDir: filepath.Join(dir, "state"), Socket: filepath.Join(dir, "run", "agent.sock"),
		Parent: parent}
	a.Name = name
	a.Net = newNetwork(parent, i, dir, a.StateDir)
	a.bin, a.logPath = bin, filepath.Join(dir, "agent.log")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// The state dir is a small tmpfs of its own, so that a fault can fill
	// it without filling the machine's disk.
	if err := os.MkdirAll(a.StateDir, 0o700); err != nil {
		return nil, err
	}
	if err := syscall.Mount("tmpfs", a.StateDir, "tmpfs", 0, "size=64m,mode=0700"); err != nil {
		return nil, fmt.Errorf("mount tmpfs on %s: %w", a.StateDir, err)
	}
	a.args = append([]string{"agent", "--master", masters, "--state-dir", a.StateDir, "--socket", a.Socket,
		"--cgroup-parent", parent, "--resources", "cpus:2;mem:1024;net_bw:200", "--kill-grace", "2s",
		"--no-bpf",
		"--estimator", "fixed", "--estimator-opt", "resources=cpus:1;mem:256", "--estimator-interval", "1s",
		"--log-level", "debug"}, append(a.Net.args(), extra...)...)
	return a, nil
}

// loadID reads the started agent's ID.
func (a *Agent) loadID() error {
	info, err := a.Info()
	if err != nil {
		return err
	}
	a.ID = info["id"]
	return nil
}

// Start starts (or restarts) the agent and waits until its socket answers.
func (a *Agent) Start() error {
	if err := a.start(); err != nil {
		return err
	}
	pid := a.pid()
	return a.waitReady(60*time.Second, func() bool { return testutil.SocketServedBy(a.Socket, pid) })
}

// CLI runs `brim ARGS --socket SOCKET` against this agent, bounded by
// ctx.
func (a *Agent) CLI(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, a.bin, append(args, "--socket", a.Socket)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("brim %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// Info is `brim agent info` as key → value ("id", "resources used", …).
func (a *Agent) Info() (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := a.CLI(ctx, "agent", "info")
	if err != nil {
		return nil, err
	}
	info := map[string]string{}
	keys := []string{"id", "resources total", "resources used", "resources free", "revocable total", "revocable used", "revocable free"}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		for _, k := range keys {
			if rest, ok := strings.CutPrefix(sc.Text(), k); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
				info[k] = strings.TrimSpace(rest)
			}
		}
	}
	return info, nil
}

// Container is the part of `brim container ls --json` the checks read.
type Container struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	State     string  `json:"state"`
	Pid       int     `json:"pid"`
	CPUs      float64 `json:"cpus"`
	MemMiB    int64   `json:"memMiB"`
	NetMbit   int64   `json:"netMbit"`
	Revocable bool    `json:"revocable"`
	// Quarantine is why the agent could not read the container's
	// checkpoint record (empty normally).
	Quarantine string `json:"quarantine"`
	// Labels are the agent's: brim.task names the master's task (the
	// container's name also carries a hash of its framework).
	Labels map[string]string `json:"labels"`
	Exit   *struct {
		Code   int    `json:"code"`
		Reason string `json:"reason"`
	} `json:"exit"`
}

// Task is the master's task the container runs: its brim.task label, else
// its name (a container not launched by the master).
func (c Container) Task() string {
	if t := c.Labels["brim.task"]; t != "" {
		return t
	}
	return c.Name
}

// List is `brim container ls --json`.
func (a *Agent) List() ([]Container, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := a.CLI(ctx, "container", "ls", "--json")
	if err != nil {
		return nil, err
	}
	var cs []Container
	if err := json.Unmarshal([]byte(out), &cs); err != nil {
		return nil, fmt.Errorf("ls --json: %w: %s", err, out)
	}
	return cs, nil
}

// FillStateDir writes a file into the state dir until it is full, and
// returns a function that removes it.
func (a *Agent) FillStateDir() (func(), error) {
	p := filepath.Join(a.StateDir, "chaos-filler")
	f, err := os.Create(p)
	if err != nil {
		return func() {}, err
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return func() { _ = os.Remove(p) }, nil
			}
			_ = os.Remove(p)
			return func() {}, err
		}
	}
}

// CorruptCheckpoint overwrites container id's checkpoint record with
// bytes that are not JSON (the agent must be down).
func (a *Agent) CorruptCheckpoint(id string) error {
	return os.WriteFile(filepath.Join(a.StateDir, "checkpoint", id+".json"), []byte("{\"version\": 1, \"container\": {\x00garbage"), 0o600)
}

// ShimPid is the pid of container id's shim, checked to be a process
// whose cwd or command line names the container's directory of this
// agent (never another process); 0 when there is none.
func (a *Agent) ShimPid(id string) int {
	dir := filepath.Join(a.StateDir, "containers", id)
	b, err := os.ReadFile(filepath.Join(dir, "shim.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0
	}
	cwd, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if cwd == dir || bytes.Contains(cmdline, []byte(dir)) {
		return pid
	}
	return 0
}

// Leftovers lists what remains of this agent once everything was
// removed: processes in its cgroup parent or naming its directory, cgroup
// directories below its parent, mounts below its directory.
func (a *Agent) Leftovers() []string {
	var out []string
	for _, pid := range a.LeftoverPids() {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		out = append(out, fmt.Sprintf("process %d %q", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
	}
	for _, d := range cgtree.Children(a.Parent) {
		out = append(out, "cgroup "+d)
	}
	for _, m := range mountsUnder(a.Base) {
		// The harness's own tmpfs, and the netns dir's mount, which the
		// network keeps for the node's life (Network.Remove).
		if m != a.StateDir && (a.Net == nil || m != a.Net.NetNSDir) {
			out = append(out, "mount "+m)
		}
	}
	return append(out, a.Net.Leftovers()...)
}

// LeftoverPids are processes (other than the running agent) inside this
// agent's cgroup parent or whose command line names its directory.
func (a *Agent) LeftoverPids() []int {
	seen := map[int]bool{}
	files, _ := filepath.Glob(filepath.Join(CgroupRoot, "*", a.Parent, "*", "cgroup.procs"))
	v2, _ := filepath.Glob(filepath.Join(CgroupRoot, a.Parent, "*", "cgroup.procs"))
	for _, f := range append(files, v2...) {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(l); err == nil {
				seen[pid] = true
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	self := a.pid()
	for _, f := range procs {
		b, _ := os.ReadFile(f)
		if !bytes.Contains(b, []byte(a.Base+"/")) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if pid != self && pid != os.Getpid() {
			seen[pid] = true
		}
	}
	var out []int
	for pid := range seen {
		out = append(out, pid)
	}
	return out
}

// mountsUnder lists mount points below dir, deepest first.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append([]string{f[4]}, out...)
		}
	}
	return out
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// lockedLog is an append-only event log shared by the harness's
// goroutines; safe for concurrent use.
type lockedLog struct {
	mu    sync.Mutex
	start time.Time
	lines []string
}

func (l *lockedLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%7.2fs ", time.Since(l.start).Seconds())+fmt.Sprintf(format, args...))
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// Log rotation flags of `brim agent` the harness sets when the binary
// has them (the cap on a container's logs): each file's size and how
// many files are kept.
const (
	logMaxSizeFlag  = "--log-max-size"
	logMaxFilesFlag = "--log-max-files"
	logMaxSize      = 1 << 20
	logMaxFiles     = 3
)

// logCap is the agents' cap on one container's logs; zero: the agent has
// no cap (its binary knows no rotation flags).
type logCap struct {
	size  int64 // bytes per file
	files int   // files kept, the current one included
}

func (c logCap) set() bool { return c.size > 0 }

// total is the most a container's logs may hold: every file full, and
// one write's overshoot (64 KiB) on the current one.
func (c logCap) total() int64 { return c.size*int64(c.files) + 64<<10 }

func (c logCap) String() string {
	if !c.set() {
		return "none (this brim has no " + logMaxSizeFlag + ": the log cap is not checked)"
	}
	return fmt.Sprintf("%d bytes × %d files", c.size, c.files)
}

// logCapFlags are the agent flags that cap containers' logs, when bin
// has them, and the cap they set.
func logCapFlags(bin string) ([]string, logCap, error) {
	out, _ := exec.Command(bin, "agent", "--help").CombinedOutput()
	if len(out) == 0 {
		return nil, logCap{}, fmt.Errorf("%s agent --help printed nothing", bin)
	}
	if !bytes.Contains(out, []byte(logMaxSizeFlag[1:])) || !bytes.Contains(out, []byte(logMaxFilesFlag[1:])) {
		return nil, logCap{}, nil
	}
	return []string{logMaxSizeFlag, strconv.Itoa(logMaxSize), logMaxFilesFlag, strconv.Itoa(logMaxFiles)},
		logCap{size: logMaxSize, files: logMaxFiles}, nil
}

// LogSizes are the sizes of container id's log files: stdout and stderr
// in its sandbox (an agent without rotation), or the rotated files
// (NNNNNNNNNN.log, stdout.1, …) anywhere in its directory; the shim's own
// log is not the container's.
func (a *Agent) LogSizes(id string) (map[string]int64, error) {
	dir := filepath.Join(a.StateDir, "containers", id)
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // removed while walked
		}
		n := d.Name()
		if !d.Type().IsRegular() || n == executor.ShimLogFile {
			return nil
		}
		if strings.HasPrefix(n, "stdout") || strings.HasPrefix(n, "stderr") || strings.HasSuffix(n, ".log") {
			if fi, err := d.Info(); err == nil {
				rel, _ := filepath.Rel(dir, p)
				out[rel] = fi.Size()
			}
		}
		return nil
	})
	return out, err
}
