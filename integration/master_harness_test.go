package integration

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

// masterProc is one `brim master` process started by a test.
type masterProc struct {
	t        *testing.T
	Addr     string
	StateDir string
	args     []string
	cmd      *exec.Cmd
	exited   chan struct{}
	logPath  string
	// url and http reach its HTTP API (https with a TLS master).
	url  string
	http *http.Client
}

// startMasterProc starts `brim master` on a free port with a fresh state
// dir; short heartbeats unless extra overrides them.
func startMasterProc(t *testing.T, extra ...string) *masterProc {
	t.Helper()
	return startMasterWith(t, nil, extra...)
}

// startMasterWith is startMasterProc for a master that serves TLS (its
// flags in extra): clientTLS verifies it.
func startMasterWith(t *testing.T, clientTLS *tls.Config, extra ...string) *masterProc {
	t.Helper()
	testutil.RequireRoot(t)
	base := t.TempDir()
	m := &masterProc{t: t, Addr: testutil.FreeAddr(t), StateDir: filepath.Join(base, "master"), logPath: filepath.Join(base, "master.log"),
		http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS}}}
	m.url = "http://" + m.Addr
	if clientTLS != nil {
		m.url = "https://" + m.Addr
	}
	m.args = append([]string{"master", "--listen", m.Addr, "--state-dir", m.StateDir, "--allocation-interval", "100ms",
		"--heartbeat-interval", "200ms", "--max-missed-heartbeats", "10", "--log-level", "debug"}, extra...)
	t.Cleanup(func() {
		m.stop()
		if t.Failed() {
			if b, err := os.ReadFile(m.logPath); err == nil {
				t.Logf("master %s log:\n%s", m.Addr, b)
			}
		}
	})
	m.start()
	return m
}

func (m *masterProc) start() {
	m.t.Helper()
	m.cmd, m.exited = startBrim(m.t, m.logPath, m.args)
	for {
		if resp, err := m.http.Get(m.url + "/state"); err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-m.exited:
			b, _ := os.ReadFile(m.logPath)
			m.t.Fatalf("master exited at start: %s", b)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop ends the master with SIGTERM (SIGKILL after 30 s).
func (m *masterProc) stop() {
	if m.cmd == nil {
		return
	}
	select {
	case <-m.exited:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(30 * time.Second):
		m.t.Errorf("master did not stop on SIGTERM; killing it")
		_ = m.cmd.Process.Signal(syscall.SIGKILL)
		<-m.exited
	}
}

// masterState is the part of GET /state the tests read.
type masterState struct {
	Agents []struct {
		ID        string `json:"id"`
		Connected bool   `json:"connected"`
		Reserved  string `json:"reserved"`
		Tasks     int    `json:"tasks"`
	} `json:"agents"`
	Frameworks []struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Connected bool   `json:"connected"`
		Tasks     int    `json:"tasks"`
	} `json:"frameworks"`
	Tasks []struct {
		ID          string `json:"id"`
		FrameworkID string `json:"frameworkId"`
		AgentID     string `json:"agentId"`
		State       string `json:"state"`
		Reason      string `json:"reason"`
	} `json:"tasks"`
	Roles []struct {
		Role  string  `json:"role"`
		Share float64 `json:"share"`
	} `json:"roles"`
	Quota map[string]struct {
		Guarantee string `json:"guarantee"`
		Limit     string `json:"limit"`
	} `json:"quota"`
}

func getState(t *testing.T, addr string) masterState {
	t.Helper()
	return fetchState(t, http.DefaultClient, "http://"+addr)
}

// tryState GETs the state of master m, the leader; false if m is nil or
// does not answer it (it stepped down, or is gone).
func tryState(m *masterProc) (masterState, bool) {
	var st masterState
	if m == nil {
		return st, false
	}
	resp, err := http.Get("http://" + m.Addr + "/state")
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, false
	}
	return st, json.NewDecoder(resp.Body).Decode(&st) == nil
}

// fetchState GETs url/state with hc (a TLS master: masterProc's url and
// http).
func fetchState(t *testing.T, hc *http.Client, url string) masterState {
	t.Helper()
	resp, err := hc.Get(url + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st masterState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// waitState polls /state until ok holds (events, not timing, decide: the
// deadline only bounds a hung test).
func waitState(t *testing.T, addr, what string, ok func(masterState) bool) masterState {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := getState(t, addr)
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; state: %+v", what, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startLinkedAgent starts `brim dev --join ADDR`: an agent linked to the
// master at addr, with its own state dir, socket and cgroup parent.
func startLinkedAgent(t *testing.T, addr string, extra ...string) *agentProc {
	t.Helper()
	return startDevProc(t, append([]string{"--join", addr}, extra...)...)
}

// startDevProc starts `brim dev` (master + agent, or an agent with --join).
func startDevProc(t *testing.T, extra ...string) *agentProc {
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
		StateDir: base,
		Socket:   filepath.Join(base, "run", "agent.sock"),
		Parent:   "/" + testutil.UniqueName("brim-test"),
		logPath:  filepath.Join(base, "dev.log"),
	}
	a.args = append([]string{"dev", "--state-dir", filepath.Join(base, "state"), "--socket", a.Socket,
		"--cgroup-parent", a.Parent, "--resources", "cpus:2;mem:2048", "--kill-grace", "2s",
		"--status-retry-min", "200ms", "--status-retry-max", "2s", "--log-level", "debug"}, extra...)
	t.Cleanup(func() {
		a.cleanup()
		if t.Failed() {
			if b, err := os.ReadFile(a.logPath); err == nil {
				t.Logf("dev log:\n%s", b)
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

// runProc is a `brim run` in the background, its output line by line.
type runProc struct {
	cmd   *exec.Cmd
	lines chan string
	mu    sync.Mutex
	all   []string
	done  chan struct{}
	code  int
}

func startRun(t *testing.T, addr string, args ...string) *runProc {
	t.Helper()
	cmd := exec.Command(brimBinary, append([]string{"run", "--master", addr}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &runProc{cmd: cmd, lines: make(chan string, 1000), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.mu.Lock()
			r.all = append(r.all, sc.Text())
			r.mu.Unlock()
			r.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		}
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-r.done
		}
		if t.Failed() {
			t.Logf("brim run %s output:\n%s", strings.Join(args, " "), r.output())
		}
	})
	return r
}

// waitLine waits for an output line containing s.
func (r *runProc) waitLine(t *testing.T, s string) string {
	t.Helper()
	deadline := time.After(90 * time.Second)
	for {
		select {
		case l := <-r.lines:
			if strings.Contains(l, s) {
				return l
			}
		case <-r.done:
			// Drain what is buffered.
			for {
				select {
				case l := <-r.lines:
					if strings.Contains(l, s) {
						return l
					}
				default:
					t.Fatalf("brim run exited (%d) without %q:\n%s", r.code, s, r.output())
				}
			}
		case <-deadline:
			t.Fatalf("no %q from brim run:\n%s", s, r.output())
		}
	}
}

func (r *runProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("brim run did not exit:\n%s", r.output())
	}
	return r.code
}

func (r *runProc) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.all, "\n")
}

// taskStates extracts the states `brim run` printed, in order.
func taskStates(out string) []string {
	var states []string
	for _, l := range strings.Split(out, "\n") {
		var id, state string
		if _, err := fmt.Sscanf(l, "task %s %s", &id, &state); err == nil {
			states = append(states, state)
		}
	}
	return states
}

func writeTemp(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
