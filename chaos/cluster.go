//go:build linux

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	"github.com/brimnode/brim/internal/cgtree"
)

// CgroupRoot is where the cgroup hierarchies are mounted.
const CgroupRoot = cgtree.Root

// Binaries are the programs under test.
type Binaries struct {
	Brim string // $BRIM_BINARY
}

// proc is one brim daemon the harness started and restarts: only its own
// PID is ever signalled. Not safe for concurrent use: the harness's fault
// loop owns it.
type proc struct {
	bin     string
	args    []string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

func (p *proc) start() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.args[0], err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(p.exited)
	return nil
}

func (p *proc) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *proc) pid() int {
	if !p.running() {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill9 sends SIGKILL to this process only and reaps it.
func (p *proc) kill9() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop sends SIGTERM, then SIGKILL after grace; it reports whether the
// process stopped on SIGTERM.
func (p *proc) stop(grace time.Duration) bool {
	if !p.running() {
		return true
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return true
	case <-time.After(grace):
		p.kill9()
		return false
	}
}

// waitReady polls ready until it holds, the process exits, or bound
// passes.
func (p *proc) waitReady(bound time.Duration, ready func() bool) error {
	deadline := time.Now().Add(bound)
	for !ready() {
		select {
		case <-p.exited:
			b, _ := os.ReadFile(p.logPath)
			return fmt.Errorf("%s exited at start: %s", p.args[0], tail(b, 2000))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %v", p.args[0], bound)
		}
	}
	return nil
}

// Master is the `brim master` of a run.
type Master struct {
	proc
	Addr     string
	StateDir string
	hc       *http.Client
}

func newMaster(bin, base string, extra ...string) (*Master, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	m := &Master{Addr: addr, StateDir: filepath.Join(base, "master"), hc: &http.Client{Timeout: 5 * time.Second}}
	m.bin, m.logPath = bin, filepath.Join(base, "master.log")
	m.args = append([]string{"master", "--listen", addr, "--state-dir", m.StateDir, "--allocation-interval", "100ms",
		"--heartbeat-interval", "200ms", "--max-missed-heartbeats", "10", "--failover-timeout", "2m", "--log-level", "debug"}, extra...)
	return m, m.Start()
}

// Start starts (or restarts) the master and waits until it serves /state.
func (m *Master) Start() error {
	if err := m.start(); err != nil {
		return err
	}
	return m.waitReady(30*time.Second, func() bool { _, err := m.State(); return err == nil })
}

// State GETs /state.
func (m *Master) State() (MasterState, error) {
	var st MasterState
	resp, err := m.hc.Get("http://" + m.Addr + "/state")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /state: %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// Post POSTs body as JSON to path and returns an error unless 2xx.
func (m *Master) Post(path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := m.hc.Post("http://"+m.Addr+path, "application/json", bytes.NewReader(b))
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

// Agent is one `brim agent` of a run, linked to the master through its
// own Proxy, with its own cgroup parent, state dir and socket.
type Agent struct {
	proc
	Name     string
	ID       string // the agent's ID, known once it has started
	Base     string
	StateDir string
	Socket   string
	Parent   string // absolute cgroup parent, e.g. /brim-chaos-1a2b3c4d
	Link     *Proxy
	Net      *Network // the container network (--network)
}

// newAgent starts agent i of a run.
func newAgent(bin, base string, i int, parent string, link *Proxy, extra ...string) (*Agent, error) {
	name := fmt.Sprintf("a%d", i)
	dir := filepath.Join(base, name)
	a := &Agent{Name: name, Base: dir, StateDir: filepath.Join(dir, "state"), Socket: filepath.Join(dir, "run", "agent.sock"),
		Parent: parent, Link: link}
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
	a.args = append([]string{"agent", "--master", link.Addr(), "--state-dir", a.StateDir, "--socket", a.Socket,
		"--cgroup-parent", parent, "--resources", "cpus:2;mem:1024;net_bw:200", "--kill-grace", "2s",
		"--status-retry-min", "200ms", "--status-retry-max", "2s", "--no-bpf",
		"--estimator", "fixed", "--estimator-opt", "resources=cpus:1;mem:256", "--estimator-interval", "1s",
		"--log-level", "debug"}, append(a.Net.args(), extra...)...)
	if err := a.Start(); err != nil {
		return a, err
	}
	info, err := a.Info()
	if err != nil {
		return a, err
	}
	a.ID = info["id"]
	return a, nil
}

// Start starts (or restarts) the agent and waits until its socket answers.
func (a *Agent) Start() error {
	if err := a.start(); err != nil {
		return err
	}
	return a.waitReady(60*time.Second, func() bool {
		c, err := net.Dial("unix", a.Socket)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
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
