package integration

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/internal/testutil"
)

// hogOnCPU1 burns cpu pinned to cpu 1, so that the containers running it
// compete for the same cpu whatever else the machine runs.
var hogOnCPU1 = []string{"taskset", "-c", "1", "sh", "-c", "while :; do :; done"}

// TestRunQueueLatency (issue 6, with real containers and a real agent):
// two containers burning cpu 1 with cpu shares 1024 and 61, and a third
// one that mostly sleeps. The low-share one waits clearly longer in the
// run queue than the high-share one, the sleeper waits less than the
// low-share one, and the monitor's on-cpu time agrees with cpuacct within
// 5 %: with the eBPF source and with the schedstat fallback (--no-bpf).
// `brim container stats` shows the figures and their source.
func TestRunQueueLatency(t *testing.T) {
	testutil.RequireRoot(t)
	_, err := os.Stat("/sys/devices/system/cpu/cpu1")
	testutil.Require(t, err == nil, "needs a second cpu")
	for _, tc := range []struct {
		name, source string
		flags        []string
	}{
		{"ebpf", "ebpf", nil},
		{"schedstat", "schedstat-mean", []string{"--no-bpf"}},
	} {
		t.Run(tc.name, func(t *testing.T) { testRunQueue(t, tc.source, tc.flags...) })
	}
}

// rqRound is one monitor round of one container as the Stats RPC reports
// it.
type rqRound struct {
	sampled       int64
	p50, p99      time.Duration
	onCPU         time.Duration
	cpuacct       uint64
	source        string
	hasRQ, hasCPU bool
}

func testRunQueue(t *testing.T, source string, flags ...string) {
	a := startAgent(t, append([]string{"--monitor-interval", "1s"}, flags...)...)
	api := apiClient(t, a)
	names := []string{"high", "low", "idle"}
	ids := map[string]string{
		"high": a.run(append([]string{"--name", "high", "--cpus", "1", "--"}, hogOnCPU1...)...),
		"low":  a.run(append([]string{"--name", "low", "--cpus", "0.06", "--"}, hogOnCPU1...)...),
		"idle": a.run("--name", "idle", "--cpus", "0.5", "--", "sh", "-c", "while :; do sleep 0.05; done"),
	}
	if got := a.cgroupFile("cpu", ids["low"], "cpu.shares"); got != "61" {
		t.Fatalf("low: cpu.shares %s, want 61", got)
	}

	// Collect monitor rounds: a round is new when the monitor's sample time
	// of the container changes. The first rounds are the warm-up (the
	// hogs get going, the first interval is partial).
	const warmup, want = 2, 8
	rounds := map[string][]rqRound{}
	ctx := context.Background()
	deadline := time.Now().Add(45 * time.Second)
	for {
		done := true
		for _, n := range names {
			st, err := api.Stats(ctx, &agentpb.StatsRequest{Id: ids[n]})
			if err != nil {
				t.Fatalf("stats %s: %v", n, err)
			}
			r := rqRound{sampled: st.MonitorSampleUnixNano, p50: time.Duration(st.RunqueueP50Nanos),
				p99: time.Duration(st.RunqueueP99Nanos), onCPU: time.Duration(st.OnCpuNanos),
				cpuacct: st.MonitorCpuUsageNanos, source: st.RunqueueSource, hasRQ: st.HasRunqueue, hasCPU: st.HasOnCpu}
			rs := rounds[n]
			if r.hasRQ && (len(rs) == 0 || rs[len(rs)-1].sampled != r.sampled) {
				if r.source != source {
					t.Fatalf("%s: run-queue source %q, want %q", n, r.source, source)
				}
				if !r.hasCPU {
					t.Fatalf("%s: run-queue latency but no on-cpu time: %+v", n, st)
				}
				rounds[n] = append(rs, r)
			}
			if len(rounds[n]) < warmup+want {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("monitor rounds with run-queue latency after 45s: high %d, low %d, idle %d (want %d each)",
				len(rounds["high"]), len(rounds["low"]), len(rounds["idle"]), warmup+want)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Ordering, on the median over the rounds of each container's p99
	// (with schedstat-mean: of its mean wait).
	med := map[string]time.Duration{}
	for _, n := range names {
		var p99s []time.Duration
		for _, r := range rounds[n][warmup:] {
			p99s = append(p99s, r.p99)
		}
		slices.Sort(p99s)
		med[n] = p99s[len(p99s)/2]
		t.Logf("%s (%s): run-queue p99 per round %v, median %v", n, source, p99s, med[n])
	}
	if med["low"] < 2*med["high"] || med["low"] <= 0 {
		t.Errorf("low-share p99 %v not clearly above high-share p99 %v (want ≥ 2×)", med["low"], med["high"])
	}
	if med["idle"] >= med["low"] {
		t.Errorf("sleeper p99 %v not below low-share p99 %v", med["idle"], med["low"])
	}

	// On-cpu time against cpuacct over the same window: both figures of a
	// round come from the same monitor sample.
	for _, n := range []string{"high", "low"} {
		rs := rounds[n]
		first, last := rs[warmup], rs[len(rs)-1]
		dOn := last.onCPU - first.onCPU
		dAcct := time.Duration(last.cpuacct - first.cpuacct)
		if dAcct <= 0 {
			t.Errorf("%s: cpuacct did not grow over %d rounds: %d → %d", n, len(rs)-warmup, first.cpuacct, last.cpuacct)
			continue
		}
		ratio := float64(dOn) / float64(dAcct)
		t.Logf("%s (%s): on-cpu %v, cpuacct %v over the window: ratio %.4f", n, source, dOn, dAcct, ratio)
		if math.Abs(ratio-1) > 0.05 {
			t.Errorf("%s: on-cpu %v vs cpuacct %v over the window: off by %.1f %% (want ≤ 5 %%)", n, dOn, dAcct, (ratio-1)*100)
		}
	}
	// The monitor's cpuacct figure is this container's cgroup's: the file,
	// read after the last round, holds at least as much and at most what
	// two cpus could add since.
	for _, n := range []string{"high", "low"} {
		last := rounds[n][len(rounds[n])-1]
		file, err := strconv.ParseUint(readCgroup(t, a, "cpuacct", ids[n], "cpuacct.usage"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		since := time.Since(time.Unix(0, last.sampled))
		if file < last.cpuacct || time.Duration(file-last.cpuacct) > 2*since+time.Second {
			t.Errorf("%s: cpuacct.usage %d, monitor's %d taken %v ago", n, file, last.cpuacct, since)
		}
	}

	// The CLI shows the same figures.
	var rows []struct {
		ID       string `json:"id"`
		RunQueue *struct {
			Source      string  `json:"source"`
			P50Seconds  float64 `json:"p50Seconds"`
			P99Seconds  float64 `json:"p99Seconds"`
			P999Seconds float64 `json:"p999Seconds"`
		} `json:"runqueue"`
		OnCPUSeconds *float64 `json:"onCpuSeconds"`
	}
	out := a.mustBrim("container", "stats", "--json", "--interval", "200ms", ids["high"], ids["low"], ids["idle"])
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("stats --json: %v: %s", err, out)
	}
	if len(rows) != 3 {
		t.Fatalf("stats --json: %d rows: %s", len(rows), out)
	}
	for _, r := range rows {
		if r.RunQueue == nil || r.RunQueue.Source != source || r.OnCPUSeconds == nil || *r.OnCPUSeconds <= 0 ||
			r.RunQueue.P50Seconds > r.RunQueue.P99Seconds || r.RunQueue.P99Seconds > r.RunQueue.P999Seconds {
			t.Errorf("stats --json %s: %s", r.ID, out)
		}
	}
	// The default table fits 100 columns; the scheduler signals are
	// fields of --format.
	table := a.mustBrim("container", "stats", "--interval", "200ms", "--format", `table {{.Name}}\t{{.RunQueue}}\t{{.OnCPU}}`, ids["low"])
	t.Logf("brim container stats:\n%s", table)
	if !strings.Contains(table, "RUNQ P50/P99/P99.9") || !strings.Contains(table, "("+source+")") {
		t.Errorf("stats table lacks the run-queue column or its source %q:\n%s", source, table)
	}
}

// readCgroup reads a cgroup v1 file of container id, failing the test.
func readCgroup(t *testing.T, a *agentProc, ctrl, id, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.CgroupRoot, ctrl, a.Parent, id, file))
	if err != nil {
		t.Fatalf("read %s of %s: %v", file, id, err)
	}
	return strings.TrimSpace(string(b))
}

// TestOOMAttribution: a memory hog next to a sibling is OOM-killed; the
// agent reports memory-limit for the hog only, and the sibling runs on
// with no OOM kill charged to it.
func TestOOMAttribution(t *testing.T) {
	a := startAgent(t, "--monitor-interval", "1s")
	api := apiClient(t, a)
	sibling := a.run("--name", "sibling", "--mem", "64", "--", "sleep", "600")
	r := a.brim("container", "run", "--name", "hog", "--mem", "32", "--wait", "--", "tail", "/dev/zero")
	if r.code != 137 {
		t.Fatalf("hog: exit %d, want 137: %s", r.code, r.stderr)
	}
	hog := a.inspect(strings.TrimSpace(r.stdout))
	if hog.Exit == nil || !hog.Exit.OOMKilled || hog.Exit.Reason != "memory-limit" {
		t.Fatalf("hog: exit %s, want OOM-killed with reason memory-limit", sprint(hog.Exit))
	}
	sib := a.inspect(sibling)
	if sib.State != "running" || sib.Exit != nil {
		t.Fatalf("sibling: state %s, exit %s", sib.State, sprint(sib.Exit))
	}
	st, err := api.Stats(context.Background(), &agentpb.StatsRequest{Id: sibling})
	if err != nil {
		t.Fatal(err)
	}
	if st.MemOomKills != 0 {
		t.Errorf("sibling: %d OOM kills charged", st.MemOomKills)
	}
	if oc := readCgroup(t, a, "memory", sibling, "memory.oom_control"); !strings.Contains(oc, "oom_kill 0") {
		t.Errorf("sibling memory.oom_control:\n%s", oc)
	}
}
