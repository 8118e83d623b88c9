package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/internal/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// apiClient returns a gRPC client of a's local API.
func apiClient(t *testing.T, a *agentProc) agentpb.AgentClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+a.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return agentpb.NewAgentClient(conn)
}

// explainOut is the part of `brim agent explain --json` the tests read.
type explainOut struct {
	Enabled bool `json:"enabled"`
	Current *struct {
		Estimator  string    `json:"estimator"`
		Summary    string    `json:"summary"`
		Revocable  string    `json:"revocable"`
		CPUs       float64   `json:"cpus"`
		MemMiB     float64   `json:"memMiB"`
		ComputedAt time.Time `json:"computedAt"`
		Terms      []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
		} `json:"terms"`
	} `json:"current"`
	RevocableTotal string          `json:"revocableTotal"`
	RevocableUsed  string          `json:"revocableUsed"`
	RevocableFree  string          `json:"revocableFree"`
	RunQueueSource string          `json:"runqueueSource"`
	Active         []correctionOut `json:"active"`
	Recent         []correctionOut `json:"recent"`
}

type correctionOut struct {
	Type      string `json:"type"`
	Container string `json:"container"`
	Reason    string `json:"reason"`
	Error     string `json:"error"`
	Trigger   struct {
		Signal    string  `json:"signal"`
		Victim    string  `json:"victim"`
		Value     float64 `json:"value"`
		Baseline  float64 `json:"baseline"`
		Threshold float64 `json:"threshold"`
	} `json:"trigger"`
}

func (a *agentProc) explain() explainOut {
	a.t.Helper()
	var ex explainOut
	out := a.mustBrim("agent", "explain", "--json")
	if err := json.Unmarshal([]byte(out), &ex); err != nil {
		a.t.Fatalf("explain --json: %v: %s", err, out)
	}
	return ex
}

func (ex explainOut) term(name string) (float64, bool) {
	if ex.Current == nil {
		return 0, false
	}
	for _, t := range ex.Current.Terms {
		if t.Name == name {
			return t.Value, true
		}
	}
	return 0, false
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestFixedEstimator: with the fixed estimator the revocable pool is the
// configured amount; explain shows it minus the revocable resources in
// use; a revocable container runs best-effort and does not use the
// agent's own resources; the metrics endpoint says which run-queue source
// is active (schedstat with --no-bpf).
func TestFixedEstimator(t *testing.T) {
	port := freePort(t)
	a := startAgent(t, "--estimator", "fixed", "--estimator-opt", "resources=cpus:1;mem:512",
		"--estimator-interval", "1s", "--no-bpf", "--metrics-listen", fmt.Sprintf("127.0.0.1:%d", port))

	ex := a.explain()
	if !ex.Enabled || ex.Current == nil || ex.Current.Estimator != "fixed" || ex.Current.CPUs != 1 || ex.Current.MemMiB != 512 ||
		ex.RevocableFree != "cpus:1;mem:512" || ex.RunQueueSource != "schedstat-mean" {
		t.Fatalf("explain before any container: %+v", ex)
	}

	launched := time.Now()
	rev := a.run("--revocable", "--cpus", "0.3", "--mem", "64", "--", "sleep", "600")
	// Best-effort class: 10 shares per cpu (3 here; the kernel may round
	// what it reads back) and, where the kernel has it, a SCHED_IDLE group.
	if got, _ := strconv.Atoi(a.cgroupFile("cpu", rev, "cpu.shares")); got < 2 || got > 10 {
		t.Fatalf("revocable cpu.shares = %d, want about 3", got)
	}
	if _, err := os.Stat(filepath.Join(testutil.CgroupRoot, "cpu", a.Parent, rev, "cpu.idle")); err == nil {
		if got := a.cgroupFile("cpu", rev, "cpu.idle"); got != "1" {
			t.Fatalf("revocable cpu.idle = %s, want 1", got)
		}
	}
	// The pool's accounting is immediate; the estimate follows at the next
	// check: the fixed amount minus what revocable containers hold.
	if ex := a.explain(); ex.RevocableUsed != "cpus:0.3;mem:64" || ex.RevocableFree != "cpus:0.7;mem:448" {
		t.Fatalf("pool after a revocable launch: used %s free %s", ex.RevocableUsed, ex.RevocableFree)
	}
	eventually(t, "the estimate subtracts the revocable container", func() bool {
		ex = a.explain()
		return ex.Current.ComputedAt.After(launched) && ex.Current.CPUs == 0.7 && ex.Current.MemMiB == 448
	})
	if v, ok := ex.term("revocable allocated cpus"); !ok || v != 0.3 {
		t.Fatalf("explain terms: %+v", ex.Current.Terms)
	}
	text := a.mustBrim("agent", "explain")
	for _, want := range []string{"estimator", "fixed", "revocable allocated cpus", "0.3 cpus", "revocable free", "cpus:0.7;mem:448"} {
		if !strings.Contains(text, want) {
			t.Fatalf("explain output lacks %q:\n%s", want, text)
		}
	}
	// Revocable resources are not the agent's own: the whole node is still
	// free for non-revocable work.
	info := a.mustBrim("agent", "info")
	if !regexp.MustCompile(`resources free\s+cpus:2;mem:2048`).MatchString(info) || !regexp.MustCompile(`revocable used\s+cpus:0.3;mem:64`).MatchString(info) {
		t.Fatalf("agent info:\n%s", info)
	}
	// Beyond the pool: refused, naming the pool and the estimator.
	r := a.brim("container", "run", "--revocable", "--cpus", "0.8", "--mem", "64", "--", "sleep", "600")
	if r.code != 1 || !strings.Contains(r.stderr, "insufficient revocable resources: asked cpus:0.8, free cpus:0.7") ||
		!strings.Contains(r.stderr, "estimator fixed") {
		t.Fatalf("revocable launch beyond the pool: %d %q", r.code, r.stderr)
	}
	// Growing the revocable container is checked against the pool too.
	if r := a.brim("container", "update", "--cpus", "1.5", rev); r.code != 1 || !strings.Contains(r.stderr, "insufficient revocable resources") {
		t.Fatalf("revocable update beyond the pool: %d %q", r.code, r.stderr)
	}

	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`brim_monitor_runqueue_source{source="schedstat-mean"} 1`, `brim_estimator_revocable{resource="cpus",state="current"}`, "brim_qos_active_corrections"} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}
	a.mustBrim("container", "rm", "-f", rev)
	a.assertGone(rev)
}

// TestNoopEstimatorRefusesRevocable: with the default (noop) estimator
// nothing revocable is admitted, and the error says why.
func TestNoopEstimatorRefusesRevocable(t *testing.T) {
	a := startAgent(t)
	r := a.brim("container", "run", "--revocable", "--cpus", "0.2", "--", "sleep", "600")
	if r.code != 1 || !strings.Contains(r.stderr, "insufficient revocable resources") || !strings.Contains(r.stderr, "estimator noop") {
		t.Fatalf("revocable launch with noop: %d %q", r.code, r.stderr)
	}
	if cs := a.list(); len(cs) != 0 {
		t.Fatalf("refused launch left containers: %+v", cs)
	}
	if ex := a.explain(); !ex.Enabled || ex.Current == nil || ex.Current.Estimator != "noop" || ex.RevocableTotal != "cpus:0;mem:0" {
		t.Fatalf("explain with noop: %+v", ex)
	}
}

// TestUsageEstimator: with a non-revocable container idle the usage
// estimate grows; when it turns busy (told through a file in its
// sandbox) the estimate shrinks within a few estimator checks.
func TestUsageEstimator(t *testing.T) {
	a := startAgent(t, "--estimator", "usage",
		"--estimator-opt", "window=30s", "--estimator-opt", "min-samples=3", "--estimator-opt", "recent=2",
		"--estimator-opt", "cap=1", "--estimator-opt", "memory=false",
		"--estimator-interval", "1s", "--monitor-interval", "500ms")
	lc := a.run("--cpus", "1.5", "--mem", "64", "--", "sh", "-c",
		`while [ ! -e /mnt/sandbox/busy ]; do sleep 0.1; done; while :; do :; done`)
	// Before min-samples the container is predicted at its allocation
	// (nothing to offer); once it has samples showing it idle, the
	// estimate grows to about its allocation minus the margin.
	var idle explainOut
	eventually(t, "the estimate grows while the container idles", func() bool {
		idle = a.explain()
		return idle.Current.CPUs >= 1.2
	})
	t.Logf("idle: %s (%s)", idle.Current.Revocable, idle.Current.Summary)
	// Without --no-bpf the agent loads the eBPF run-queue monitor, or
	// falls back to schedstat where it cannot (and logs why).
	if src := idle.RunQueueSource; src != "ebpf" && src != "schedstat-mean" {
		t.Fatalf("run-queue source %q", src)
	}
	t.Logf("run-queue source: %s", idle.RunQueueSource)

	c := a.inspect(lc)
	if err := os.WriteFile(filepath.Join(c.SandboxDir, "busy"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Count the estimator's checks until the estimate shrinks: the monitor
	// sees the busy container at its next sample (500 ms), the recent
	// mean follows within two samples, and the next check shrinks.
	seen := map[time.Time]bool{}
	var busy explainOut
	eventually(t, "the estimate shrinks once the container is busy", func() bool {
		busy = a.explain()
		if busy.Current.ComputedAt.After(start) {
			seen[busy.Current.ComputedAt] = true
		}
		return busy.Current.CPUs <= idle.Current.CPUs-0.25
	})
	t.Logf("busy: %s after %d checks, %s (%s)", busy.Current.Revocable, len(seen), time.Since(start).Round(time.Millisecond), busy.Current.Summary)
	// The bound is in checks, not seconds: the busy loop must first get
	// a cpu on this shared machine and be sampled (one check), then the
	// recent mean needs two samples (one or two checks).
	if len(seen) > 4 {
		t.Fatalf("the estimate shrank only after %d checks", len(seen))
	}
}

// TestAgentOversubFlags: bad oversubscription flags exit 2 and create
// nothing.
func TestAgentOversubFlags(t *testing.T) {
	testutil.RequireRoot(t)
	notExec := filepath.Join(t.TempDir(), "not-a-plugin")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--estimator", "bogus"}, `--estimator "bogus": unknown (want one of fixed, idle, noop, usage`},
		{[]string{"--estimator", "fixed"}, "option resources is required"},
		{[]string{"--estimator", "usage", "--estimator-opt", "percentile=200"}, `--estimator "usage"`},
		{[]string{"--estimator-opt", "novalue"}, "--estimator-opt"},
		{[]string{"--estimator-interval", "100ms"}, "--estimator-interval 100ms: must be at least 1s"},
		{[]string{"--qos", "bogus"}, `--qos "bogus": unknown (want one of interference, load, noop`},
		{[]string{"--qos", "interference", "--qos-opt", "enter-factor=x"}, "enter-factor"},
		{[]string{"--qos-interval", "0s"}, "--qos-interval 0s: must be at least"},
		{[]string{"--monitor-interval", "1ms"}, "--monitor-interval 1ms: must be at least"},
		{[]string{"--metrics-listen", "nope"}, `--metrics-listen "nope": want host:port`},
		{[]string{"--estimator", "plugin:/nonexistent/estimator"}, `--estimator "plugin:/nonexistent/estimator": plugin: stat /nonexistent/estimator: no such file or directory`},
		{[]string{"--qos", "plugin:" + notExec}, "plugin " + notExec + ": not an executable file"},
	} {
		base := t.TempDir()
		state, sock := filepath.Join(base, "state"), filepath.Join(base, "agent.sock")
		parent := "/" + testutil.UniqueName("brim-test")
		args := append([]string{"agent", "--state-dir", state, "--socket", sock, "--cgroup-parent", parent}, tc.args...)
		r := runBrimBounded(t, parent, args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
		for _, p := range []string{state, sock, filepath.Join(testutil.CgroupRoot, "cpu", parent)} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%v: %s was created", tc.args, p)
			}
		}
	}
}

// runBrimBounded runs the CLI like runBrim, but an agent that starts when
// it should have refused is stopped (SIGTERM, by PID) after 30 s and its
// cgroup parent removed, so the test fails instead of hanging.
func runBrimBounded(t *testing.T, parent string, args ...string) result {
	t.Helper()
	cmd := exec.Command(brimBinary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Errorf("brim %v: still running after 30 s; stopping it", args)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err = <-done
		testutil.RemoveCgroupTree(t, parent)
	}
	return exitResult(t, args, err, &out, &errb)
}

// reportLatency sends one latency report through the agent API.
func reportLatency(ctx context.Context, api agentpb.AgentClient, id string, p50, p99 time.Duration) error {
	_, err := api.ReportLatency(ctx, &agentpb.ReportLatencyRequest{Id: id, P50Nanos: int64(p50), P99Nanos: int64(p99)})
	return err
}

// TestReportLatencyCLI: `brim agent report-latency` attaches an
// application's latency to its container's samples (visible in /metrics)
// and refuses bad reports.
func TestReportLatencyCLI(t *testing.T) {
	port := freePort(t)
	a := startAgent(t, "--monitor-interval", "200ms", "--metrics-listen", fmt.Sprintf("127.0.0.1:%d", port))
	a.run("--name", "lc", "--cpus", "0.1", "--mem", "32", "--", "sleep", "600")
	// The metrics listener also answers /health once the agent serves.
	if code, body := httpGetBody(t, fmt.Sprintf("http://127.0.0.1:%d/health", port)); code != http.StatusOK || !strings.Contains(body, `"ready"`) {
		t.Errorf("agent /health: %d %s", code, body)
	}
	eventually(t, "the reported p99 in /metrics", func() bool {
		// A report stays attached for three monitor rounds: report again
		// on every poll.
		a.mustBrim("agent", "report-latency", "lc", "--p50", "1ms", "--p99", "3ms")
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "brim_container_app_latency_seconds{") && strings.Contains(l, `name="lc"`) &&
				strings.Contains(l, `percentile="99"`) && strings.HasSuffix(l, " 0.003") {
				return true
			}
		}
		return false
	})
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"nope", "--p99", "1ms"}, 1, `container "nope" not found`},
		{[]string{"lc", "--p50", "5ms", "--p99", "1ms"}, 1, "want 0 ≤ p50 ≤ p99 ≤ p999"},
		{[]string{"lc"}, 2, "--p99 must be positive"},
		{[]string{"lc", "--p99", "soon"}, 2, "invalid argument"},
	} {
		r := a.brim(append([]string{"agent", "report-latency"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("report-latency %v: exit %d %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}
