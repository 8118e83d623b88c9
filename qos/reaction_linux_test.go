package qos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/monitor"
)

// benchNode is a latency-critical process and cpu antagonists in real
// cgroup v1 groups (cpu, cpuacct, freezer) under a unique test parent,
// read by a monitor.Source and corrected through an Actuator that writes
// the cgroup files — the agent's path without the containerizer.
// Antagonists are created before the onset, blocked on their stdin, and
// become containers of the node (Containers) when started.
type benchNode struct {
	t      testing.TB
	parent string
	start  time.Time

	mu      sync.Mutex
	procs   map[string]*exec.Cmd
	started map[string]bool // containers of the node
	stdin   map[string]io.WriteCloser
	first   time.Time // first correction applied
	kinds   []string
	lcOut   *bufio.Scanner
}

func cgPath(ctrl, parent, id string, file ...string) string {
	return filepath.Join(append([]string{testutil.CgroupRoot, ctrl, parent, id}, file...)...)
}

func (n *benchNode) spawn(id, role string, shares int) *exec.Cmd {
	n.t.Helper()
	for _, ctrl := range []string{"cpu", "cpuacct", "freezer"} {
		if err := os.MkdirAll(cgPath(ctrl, n.parent, id), 0o755); err != nil {
			n.t.Fatal(err)
		}
	}
	if err := os.WriteFile(cgPath("cpu", n.parent, id, "cpu.shares"), []byte(strconv.Itoa(shares)), 0o644); err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role)
	cmd.Stderr = os.Stderr
	var out *bufio.Scanner
	var in io.WriteCloser
	if role == "antagonist" {
		p, err := cmd.StdinPipe()
		if err != nil {
			n.t.Fatal(err)
		}
		in = p
	}
	if role == "lc" {
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			n.t.Fatal(err)
		}
		out = bufio.NewScanner(pipe)
	}
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	pid := []byte(strconv.Itoa(cmd.Process.Pid))
	for _, ctrl := range []string{"cpu", "cpuacct", "freezer"} {
		// Moving the process moves the threads it has; the Go runtime's
		// later threads are created inside the group.
		if err := os.WriteFile(cgPath(ctrl, n.parent, id, "cgroup.procs"), pid, 0o644); err != nil {
			n.t.Fatal(err)
		}
	}
	n.mu.Lock()
	n.procs[id] = cmd
	if in != nil {
		n.stdin[id] = in
	} else {
		n.started[id] = true
	}
	n.mu.Unlock()
	if out != nil {
		n.lcOut = out
	}
	return cmd
}

// stop kills every process the benchmark started (thawing first) and
// waits for them.
func (n *benchNode) stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for id, cmd := range n.procs {
		_ = os.WriteFile(cgPath("freezer", n.parent, id, "freezer.state"), []byte("THAWED"), 0o644)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		delete(n.procs, id)
	}
}

// release starts the antagonists created with spawn at once: from now on
// they are containers of the node, and burn. It returns the onset, the
// moment just before the first of them is released.
func (n *benchNode) release() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	onset := time.Now()
	for _, id := range slices.Sorted(maps.Keys(n.stdin)) {
		n.started[id] = true
		if _, err := n.stdin[id].Write([]byte{1}); err != nil {
			n.t.Errorf("release %s: %v", id, err)
		}
	}
	return onset
}

// Containers implements monitor.Source.
func (n *benchNode) Containers(context.Context) ([]monitor.ContainerInfo, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []monitor.ContainerInfo
	for id := range n.started {
		out = append(out, monitor.ContainerInfo{ID: id, Revocable: id != "lc", StartedAt: n.start,
			Limits: isolator.Limits{MilliCPUs: 1000}})
	}
	slices.SortFunc(out, func(a, b monitor.ContainerInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Usage implements monitor.Source from cpuacct.usage and cpu.stat.
func (n *benchNode) Usage(_ context.Context, id string) (*isolator.Statistics, error) {
	b, err := os.ReadFile(cgPath("cpuacct", n.parent, id, "cpuacct.usage"))
	if err != nil {
		return nil, fmt.Errorf("usage %s: %w: %w", id, isolator.ErrNotFound, err)
	}
	s := &isolator.Statistics{Timestamp: time.Now(), HasCPU: true}
	s.CPUUsageNanos, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if b, err := os.ReadFile(cgPath("cpu", n.parent, id, "cpu.stat")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, " ")
			x, _ := strconv.ParseUint(v, 10, 64)
			switch k {
			case "nr_periods":
				s.CPUPeriods = x
			case "nr_throttled":
				s.CPUThrottled = x
			case "throttled_time":
				s.CPUThrottledTime = time.Duration(x)
			}
		}
	}
	return s, nil
}

func (n *benchNode) record(kind string) {
	n.mu.Lock()
	if n.first.IsZero() {
		n.first = time.Now()
	}
	n.kinds = append(n.kinds, kind)
	n.mu.Unlock()
}

// SetCPUQuota implements Actuator.
func (n *benchNode) SetCPUQuota(_ context.Context, id string, milli int64) error {
	q := "-1"
	if milli > 0 {
		q = strconv.FormatInt(milli*100, 10) // period 100 ms
	}
	if err := os.WriteFile(cgPath("cpu", n.parent, id, "cpu.cfs_quota_us"), []byte(q), 0o644); err != nil {
		return err
	}
	n.record("THROTTLE")
	return nil
}

// Freeze implements Actuator.
func (n *benchNode) Freeze(_ context.Context, id string) error {
	n.record("FREEZE")
	return os.WriteFile(cgPath("freezer", n.parent, id, "freezer.state"), []byte("FROZEN"), 0o644)
}

// Thaw implements Actuator.
func (n *benchNode) Thaw(_ context.Context, id string) error {
	return os.WriteFile(cgPath("freezer", n.parent, id, "freezer.state"), []byte("THAWED"), 0o644)
}

// Kill implements Actuator.
func (n *benchNode) Kill(_ context.Context, id, _ string) error {
	n.record("KILL")
	n.mu.Lock()
	cmd := n.procs[id]
	delete(n.procs, id)
	delete(n.started, id)
	n.mu.Unlock()
	if cmd == nil {
		return errors.New("no such container")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	return nil
}

type reaction struct {
	// fromOnset is the time from the antagonists' start to the first
	// correction applied; fromDegraded from the LC's first degraded report
	// after the onset (the controller's own delay: persist and the round
	// timing), -1 when no report was degraded before the correction.
	fromOnset, fromDegraded time.Duration
	// Median LC p99: solo, contended before the first correction, and
	// over the 2nd–4th second after it.
	baseline, degraded, corrected time.Duration
	// hurt: the contended median is degraded (degradedBound of the solo
	// median).
	hurt  bool
	kinds []string
}

// The antagonists are cpu spinners at the LC's own weight (1024 per cpu,
// what a non-revocable 1-cpu container gets): best-effort work without the
// best-effort cpu class. In that class (cpu.shares 10 per cpu,
// cpu.idle=1) a waking LC preempts them and they hurt a 2 ms request by
// one scheduler tick at most (p99 ×1.5–2, measured here): too little, too
// rarely, to measure a reaction against. At equal weight they stretch its
// requests in most windows (p99 ×2.5–3.5). The bench's parent group gets
// a high weight at the root so the other builds on this shared machine
// (root-level tasks, load 2–11) hurt the LC less than the antagonists do.
const (
	parentShares     = 8192
	lcShares         = 1024
	antagonistShares = 1024
	antagonists      = 4  // 1-cpu containers, each burning every cpu
	soloWindows      = 60 // 6 s: the baseline, and ≥ 5 rounds of warm-up in tick mode
	reactionDeadline = 20 * time.Second
)

// degradedBound is the controller's default enter threshold over a
// baseline b: a report above it is degraded.
func degradedBound(b time.Duration) time.Duration {
	floor := time.Duration(DefaultFloors[SignalAppLatency] * float64(time.Second))
	return max(2*b, b+floor)
}

// runReaction measures one reaction: the LC alone until its baseline is
// learned, then the antagonists start at once (the onset); it returns the
// time from the onset, and from the LC's first degraded report, to the
// first correction applied. It fails after reactionDeadline without a
// correction.
func runReaction(t testing.TB, loop LoopConfig) (reaction, error) {
	n := &benchNode{t: t, parent: testutil.NewCgroupParent(t), start: time.Now(), procs: map[string]*exec.Cmd{},
		started: map[string]bool{}, stdin: map[string]io.WriteCloser{}}
	defer n.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := os.MkdirAll(cgPath("cpu", n.parent, ""), 0o755); err != nil {
		return reaction{}, err
	}
	if err := os.WriteFile(cgPath("cpu", n.parent, "", "cpu.shares"), []byte(strconv.Itoa(parentShares)), 0o644); err != nil {
		return reaction{}, err
	}

	mon := monitor.New(n, monitor.Config{Host: monitor.NoHost, Interval: time.Second}, nil)
	c, err := NewInterference(Options{"warmup": "5", "cooldown": "1s"}, nil)
	if err != nil {
		return reaction{}, err
	}
	ic := c.(*Interference)
	applier := NewApplier(n, nil)

	n.spawn("lc", "lc", lcShares)
	// Created now, burning from the onset: their start-up (a Go binary's
	// exec, tens of ms here) is not part of the reaction.
	for i := range antagonists {
		n.spawn(fmt.Sprintf("be%d", i), "antagonist", antagonistShares)
	}
	if err := mon.Sample(ctx); err != nil {
		return reaction{}, err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(2)
	go func() { defer wg.Done(); _ = mon.Run(ctx) }()
	go func() {
		defer wg.Done()
		_ = Run(ctx, mon, ic, applier, loop, nil)
	}()

	reports := make(chan time.Duration, 100)
	go func() {
		for n.lcOut.Scan() {
			us, err := strconv.Atoi(strings.TrimSpace(n.lcOut.Text()))
			if err != nil {
				continue
			}
			reports <- time.Duration(us) * time.Microsecond
		}
		close(reports)
	}()
	var (
		onset, degradedAt, first time.Time
		before, after, corrected []time.Duration
		deadline, release        <-chan time.Time
	)
	for {
		select {
		case <-release:
			release = nil
			onset = n.release()
			deadline = time.After(reactionDeadline)
			// The agent samples right after a launch (it knows when it
			// starts a container), so new revocable work is in the usage
			// before the next tick.
			_ = mon.Sample(ctx)
			continue
		case <-deadline:
			// Say whether the LC was hurt at all.
			return reaction{}, fmt.Errorf("no correction within %v: lc p99 solo %v, median since onset %v, degraded reports: %v; controller's baseline %v",
				reactionDeadline, median(before), median(after), !degradedAt.IsZero(), ic.baseline("lc", SignalAppLatency))
		case p99, ok := <-reports:
			if !ok {
				return reaction{}, errors.New("lc exited")
			}
			_ = mon.ReportLatency("lc", monitor.LatencySummary{P99: p99})
			switch {
			case onset.IsZero():
				before = append(before, p99)
				if len(before) == soloWindows {
					// At a random phase of the 1 s loops: the onset is
					// not locked to the ticks (or the reports).
					release = time.After(rand.N(time.Second))
				}
			case first.IsZero():
				after = append(after, p99)
				if degradedAt.IsZero() && p99 > degradedBound(median(before)) {
					degradedAt = time.Now()
				}
			default:
				corrected = append(corrected, p99)
			}
		}
		if first.IsZero() {
			n.mu.Lock()
			first = n.first
			n.mu.Unlock()
		}
		if len(corrected) == 40 { // 4 s after the first correction
			n.mu.Lock()
			kinds := slices.Clone(n.kinds)
			n.mu.Unlock()
			r := reaction{fromOnset: first.Sub(onset), baseline: median(before), degraded: median(after),
				corrected: median(corrected[20:]), kinds: kinds, fromDegraded: -1}
			r.hurt = r.degraded > degradedBound(r.baseline)
			if !degradedAt.IsZero() {
				r.fromDegraded = max(0, first.Sub(degradedAt))
			}
			return r, nil
		}
	}
}

// baseline returns the controller's baseline of victim's signal sig, as a
// duration (latency signals).
func (ic *Interference) baseline(victim, sig string) time.Duration {
	if b := ic.baselines[victim][sig]; b != nil {
		return time.Duration(b.value * float64(time.Second))
	}
	return 0
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// pct returns the p-th percentile of d by nearest rank: the smallest
// value with at least p % of d at or below it (of 10 runs, p90 is the 9th).
func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[max(0, min(len(s), (len(s)*p+99)/100)-1)]
}

// BenchmarkReaction measures the time from the onset of interference (the
// moment the antagonists start, at a random phase of the 1 s loops) to the
// first correction applied, with real processes in real cgroups:
// event-driven rounds (on every latency report and monitor sample), 1 s
// ticks with the default re-check of a pending degradation, and plain 1 s
// ticks; the controller's default persist (2 degraded observations of the
// last 3). A run without a
// correction within reactionDeadline (missed-runs) counts as the deadline
// in the percentiles. Also reported: the time from the LC's first degraded
// report (the controller's own delay), runs where the LC's contended
// median was not degraded (unhurt-runs), and the LC's p99 solo, contended
// and after the correction. Each b.N iteration is one full run; run it
// with -benchtime=Nx.
func BenchmarkReaction(b *testing.B) {
	testutil.RequireRoot(b)
	for _, mode := range []struct {
		name string
		loop LoopConfig
	}{
		{"event", LoopConfig{Interval: time.Second}},
		// Rounds every second, and 100 ms after a round whose
		// controller has a degradation to confirm (the default Recheck).
		{"tick", LoopConfig{Interval: time.Second, TickOnly: true}},
		// Rounds every second only: confirming costs a whole interval.
		{"tick-plain", LoopConfig{Interval: time.Second, TickOnly: true, Recheck: time.Second}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			var onset, degraded []time.Duration
			var base, deg, corr []time.Duration
			missed, unhurt := 0, 0
			for b.Loop() {
				r, err := runReaction(b, mode.loop)
				if err != nil {
					b.Logf("%s: %v", mode.name, err)
					missed++
					onset = append(onset, reactionDeadline)
					continue
				}
				onset = append(onset, r.fromOnset)
				if r.fromDegraded >= 0 {
					degraded = append(degraded, r.fromDegraded)
				}
				if !r.hurt {
					unhurt++
				}
				base, deg, corr = append(base, r.baseline), append(deg, r.degraded), append(corr, r.corrected)
				b.Logf("%s: reaction %v from onset, %v from the first degraded report (-1ns: none); lc p99 solo %v contended %v corrected %v; corrections %v",
					mode.name, r.fromOnset.Round(time.Millisecond), r.fromDegraded.Round(time.Millisecond), r.baseline, r.degraded, r.corrected, r.kinds)
			}
			b.ReportMetric(float64(missed), "missed-runs")
			b.ReportMetric(float64(unhurt), "unhurt-runs")
			if len(onset) == 0 {
				return
			}
			b.ReportMetric(pct(onset, 50).Seconds()*1000, "p50-onset-ms")
			b.ReportMetric(pct(onset, 90).Seconds()*1000, "p90-onset-ms")
			if len(degraded) > 0 {
				b.ReportMetric(pct(degraded, 50).Seconds()*1000, "p50-detect-ms")
				b.ReportMetric(pct(degraded, 90).Seconds()*1000, "p90-detect-ms")
			}
			if len(base) > 0 {
				b.ReportMetric(float64(median(base).Microseconds()), "lc-p99-solo-us")
				b.ReportMetric(float64(median(deg).Microseconds()), "lc-p99-contended-us")
				b.ReportMetric(float64(median(corr).Microseconds()), "lc-p99-corrected-us")
			}
		})
	}
}
