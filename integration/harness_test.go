package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

// agentProc is one `brim agent` process started by a test.
type agentProc struct {
	t        *testing.T
	StateDir string
	Socket   string
	Parent   string // absolute cgroup parent, e.g. /brim-test-1a2b3c4d
	args     []string
	cmd      *exec.Cmd
	exited   chan struct{}
	logPath  string
}

// startAgent starts an agent with a fresh state dir, socket and cgroup
// parent and registers the cleanup of everything it and its containers
// create.
func startAgent(t *testing.T, extra ...string) *agentProc {
	t.Helper()
	return startAgentAt(t, "", extra...)
}

// startAgentAt is startAgent with the local API on socket ("": a fresh
// one in the agent's temporary directory, under /tmp).
func startAgentAt(t *testing.T, socket string, extra ...string) *agentProc {
	t.Helper()
	testutil.RequireRoot(t)
	if brimBinary == "" {
		t.Fatal("no brim binary (set BRIM_BINARY)")
	}
	base, err := os.MkdirTemp("", "brim-it")
	if err != nil {
		t.Fatal(err)
	}
	a := &agentProc{
		t:        t,
		StateDir: filepath.Join(base, "state"),
		Socket:   socket,
		Parent:   "/" + testutil.UniqueName("brim-test"),
		logPath:  filepath.Join(base, "agent.log"),
	}
	if a.Socket == "" {
		a.Socket = filepath.Join(base, "run", "agent.sock")
	}
	a.args = []string{"agent", "--state-dir", a.StateDir, "--socket", a.Socket,
		"--cgroup-parent", a.Parent, "--resources", "cpus:2;mem:2048", "--kill-grace", "5s"}
	if !slices.Contains(extra, "--config") { // a flag would win over the file's log level
		a.args = append(a.args, "--log-level", "debug")
	}
	a.args = append(a.args, extra...)
	t.Cleanup(func() {
		a.cleanup()
		if t.Failed() {
			if b, err := os.ReadFile(a.logPath); err == nil {
				t.Logf("agent log:\n%s", b)
			}
		}
		unmountUnder(t, base)
		if err := os.RemoveAll(base); err != nil {
			t.Errorf("remove %s: %v", base, err)
		}
	})
	a.start()
	return a
}

// startBrim starts brim with args, its output appended to logPath, and
// returns it with a channel closed once it has been reaped.
func startBrim(t *testing.T, logPath string, args []string) (*exec.Cmd, chan struct{}) {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(brimBinary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return cmd, exited
}

func (a *agentProc) start() {
	a.t.Helper()
	a.cmd, a.exited = startBrim(a.t, a.logPath, a.args)
	for {
		if testutil.SocketServedBy(a.Socket, a.cmd.Process.Pid) {
			return
		}
		select {
		case <-a.exited:
			b, _ := os.ReadFile(a.logPath)
			a.t.Fatalf("agent exited at start: %s", b)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (a *agentProc) running() bool {
	if a.cmd == nil {
		return false
	}
	select {
	case <-a.exited:
		return false
	default:
		return true
	}
}

// kill9 kills the agent with SIGKILL (only this agent's PID).
func (a *agentProc) kill9() {
	a.t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		a.t.Fatal(err)
	}
	<-a.exited
}

// stop shuts the agent down with SIGTERM (containers keep running).
func (a *agentProc) stop() {
	if !a.running() {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		a.t.Errorf("agent did not stop on SIGTERM; killing it")
		_ = a.cmd.Process.Signal(syscall.SIGKILL)
		<-a.exited
	}
}

// cleanup destroys every container through the agent, stops it, then kills
// whatever this test's containers and shims left (processes in this test's
// cgroup parent, shims of this test's state dir) and removes the cgroups.
func (a *agentProc) cleanup() {
	t := a.t
	if a.running() {
		for _, c := range a.list() {
			if r := a.brim("container", "rm", "-f", c.ID); r.code != 0 {
				t.Errorf("cleanup: rm %s: %s", c.ID, r.stderr)
			}
		}
		a.stop()
	}
	for _, pid := range a.leftoverPids() {
		t.Errorf("cleanup: process %d left behind; killing it", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	testutil.RemoveCgroupTree(t, a.Parent)
}

// leftoverPids are processes inside this test's cgroup parent or whose
// command line names its state dir (shims).
func (a *agentProc) leftoverPids() []int {
	seen := map[int]bool{}
	dirs, _ := filepath.Glob(filepath.Join(testutil.CgroupRoot, "pids", a.Parent, "*", "cgroup.procs"))
	for _, f := range dirs {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(l); err == nil {
				seen[pid] = true
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, _ := os.ReadFile(f)
		if bytes.Contains(b, []byte(a.StateDir)) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			if a.cmd != nil && pid == a.cmd.Process.Pid && a.running() {
				continue
			}
			seen[pid] = true
		}
	}
	var out []int
	for pid := range seen {
		out = append(out, pid)
	}
	return out
}

// unmountUnder lazily unmounts anything still mounted below dir.
func unmountUnder(t *testing.T, dir string) {
	for _, m := range mountsUnder(dir) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", m, err)
		}
	}
}

// mountsUnder lists mount points below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			out = append([]string{fields[4]}, out...)
		}
	}
	return out
}

type result struct {
	stdout, stderr string
	code           int
}

// brim runs the CLI against this agent's socket.
func (a *agentProc) brim(args ...string) result {
	a.t.Helper()
	full := append([]string{}, args...)
	// Insert --socket after the subcommand path (before "--").
	pos := len(full)
	for i, s := range full {
		if s == "--" {
			pos = i
			break
		}
	}
	full = append(full[:pos], append([]string{"--socket", a.Socket}, full[pos:]...)...)
	return runBrim(a.t, full...)
}

func runBrim(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(brimBinary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	return exitResult(t, args, cmd.Run(), &out, &errb)
}

// exitResult is a finished brim run: its exit code (err from Run or Wait)
// and output. An error other than a non-zero exit fails the test.
func exitResult(t *testing.T, args []string, err error, out, errb *bytes.Buffer) result {
	t.Helper()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("brim %v: %v", args, err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// mustBrim runs the CLI and fails the test unless it exits 0.
func (a *agentProc) mustBrim(args ...string) string {
	a.t.Helper()
	r := a.brim(args...)
	if r.code != 0 {
		a.t.Fatalf("brim %v: exit %d: %s%s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// run starts a container and returns its ID.
func (a *agentProc) run(args ...string) string {
	a.t.Helper()
	return strings.TrimSpace(a.mustBrim(append([]string{"container", "run"}, args...)...))
}

type exitJSON struct {
	Code      int    `json:"code"`
	Signal    int    `json:"signal"`
	OOMKilled bool   `json:"oomKilled"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
}

type containerJSON struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	State      string    `json:"state"`
	Pid        int       `json:"pid"`
	CPUs       float64   `json:"cpus"`
	MemMiB     int64     `json:"memMiB"`
	Exit       *exitJSON `json:"exit"`
	SandboxDir string    `json:"sandboxDir"`
}

func (a *agentProc) list() []containerJSON {
	a.t.Helper()
	r := a.brim("container", "ls", "--json")
	if r.code != 0 {
		a.t.Errorf("ls: exit %d: %s", r.code, r.stderr)
		return nil
	}
	var out []containerJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		a.t.Fatalf("ls --json: %v: %s", err, r.stdout)
	}
	return out
}

func (a *agentProc) inspect(id string) containerJSON {
	a.t.Helper()
	var c containerJSON
	if err := json.Unmarshal([]byte(a.mustBrim("container", "inspect", id)), &c); err != nil {
		a.t.Fatal(err)
	}
	return c
}

// cgroupFile reads a cgroup v1 file of a container.
func (a *agentProc) cgroupFile(ctrl, id, file string) string {
	a.t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.CgroupRoot, ctrl, a.Parent, id, file))
	if err != nil {
		a.t.Fatalf("read cgroup file: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// assertGone checks that nothing of container id remains: cgroup
// directories, mounts, state files, processes.
func (a *agentProc) assertGone(id string) {
	a.t.Helper()
	if dirs, _ := filepath.Glob(filepath.Join(testutil.CgroupRoot, "*", a.Parent, id)); len(dirs) > 0 {
		a.t.Errorf("container %s: cgroups remain: %v", id, dirs)
	}
	if m := mountsContaining(id); len(m) > 0 {
		a.t.Errorf("container %s: mounts remain: %v", id, m)
	}
	for _, p := range []string{
		filepath.Join(a.StateDir, "checkpoint", id+".json"),
		filepath.Join(a.StateDir, "containers", id),
		filepath.Join(a.StateDir, "runc", id),
	} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			a.t.Errorf("container %s: state remains: %s (%v)", id, p, err)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		if b, _ := os.ReadFile(f); bytes.Contains(b, []byte(filepath.Join(a.StateDir, "containers", id))) {
			a.t.Errorf("container %s: process remains: %s %q", id, f, b)
		}
	}
}

func mountsContaining(s string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// eventually polls cond (a state the system must reach, never a timing
// assertion) for up to a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sprint(v any) string { return fmt.Sprintf("%+v", v) }
