package qos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/bpf"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/monitor"
)

// rqNode is a cgroupNode whose containers have their own limits.
type rqNode struct {
	*cgroupNode
	limits map[string]isolator.Limits
}

func (n *rqNode) Containers(ctx context.Context) ([]monitor.ContainerInfo, error) {
	cs, err := n.cgroupNode.Containers(ctx)
	for i := range cs {
		cs[i].Limits = n.limits[cs[i].ID]
	}
	return cs, err
}

// lcLoop is the latency-critical workload: a single-threaded shell (its
// own threads do not queue behind each other) that computes for about
// 4 ms and sleeps 5 ms, over and over.
const lcLoop = `while :; do i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; sleep 0.005; done`

// startPinned runs argv pinned to cpu (in its own process group, with
// the environment env added), moves it into every v1 group of container
// id, and kills the group on cleanup.
func startPinned(t *testing.T, iso *cgroups.Isolator, id string, cpu int, env string, argv ...string) *exec.Cmd {
	t.Helper()
	role := argv[0]
	// taskset execs argv: every thread and child inherits the affinity.
	cmd := exec.Command("taskset", append([]string{"-c", strconv.Itoa(cpu)}, argv...)...)
	if env != "" {
		cmd.Env = append(os.Environ(), env)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", role, err)
	}
	t.Cleanup(func() {
		_ = iso.Thaw(context.Background(), id)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	pid := []byte(strconv.Itoa(cmd.Process.Pid))
	for _, ctrl := range []string{"cpu", "cpuacct", "freezer", "memory", "pids"} {
		dir := testutil.CgroupDir(ctrl, iso.Path(id))
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		// cgroup.procs moves every thread the process has.
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), pid, 0o644); err != nil {
			t.Fatalf("move %s into %s: %v", role, dir, err)
		}
	}
	return cmd
}

// TestRunQueueSignalThrottles drives the interference controller with
// run-queue latency as its only signal, end to end on real kernel objects:
// a latency-critical loop (lcLoop) runs in a container group of the
// cgroups isolator, pinned to one CPU; the monitor samples it with the
// eBPF run-queue signal while the controller learns its baseline; then a
// CPU antagonist starts in a revocable container pinned to the same CPU.
// The controller must throttle the antagonist, naming the run-queue signal
// and the lc container as the trigger, and the Applier must write the
// quota into the antagonist's cgroup.
//
// The antagonist is prepared Guaranteed (cpu.shares 1024, as the lc): a BestEffort group (cpu.idle, shares 10) is already kept off
// the lc's CPU by the kernel, so it would not raise the lc's run-queue
// latency. Both groups sit under a parent weighing 65536 so the other
// work on this shared machine does not drown the contention.
func TestRunQueueSignalThrottles(t *testing.T) {
	testutil.RequireRoot(t)
	ctx := context.Background()
	iso, err := cgroups.New(cgroups.Config{Parent: testutil.NewCgroupParent(t)})
	if err != nil {
		t.Fatal(err)
	}
	n := &rqNode{cgroupNode: &cgroupNode{Isolator: iso, procs: map[string]*exec.Cmd{}}}
	limits := map[string]isolator.Limits{"lc": {MilliCPUs: 1000}, "be": {MilliCPUs: 16000}}
	for id, l := range limits {
		if err := iso.Prepare(ctx, id, l, &isolator.Launch{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = iso.Cleanup(context.Background(), id) })
	}
	testutil.SetCPUShares(t, filepath.Dir(iso.Path("lc")), 65536) // weigh the test parent
	n.ids = []string{"lc"}
	startPinned(t, iso, "lc", 1, "", "sh", "-c", lcLoop)

	rq, err := monitor.OpenRunQueueSource(false, bpf.Options{MaxCgroups: 16}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rq.Close() })
	if rq.Source() != bpf.SourceEBPF {
		t.Fatalf("run-queue source %q, want ebpf on this host", rq.Source())
	}
	sig := monitor.NewRunQueueSignal(rq)
	mon := monitor.New(n, monitor.Config{Host: monitor.NoHost, Signals: []monitor.SignalSource{sig}}, nil)

	n.limits = limits
	// Run-queue p99 is the only signal: the others' floors are out of
	// reach. Throttle to 0.0125 × 16 cpus = 0.2 cpu.
	opts := Options{"warmup": "5", "cooldown": "3s", "throttle-fraction": "0.0125"}
	for _, s := range []string{SignalCPUThrottling, SignalPSICPU, SignalPSIMemory, SignalAppLatency} {
		opts["floor-"+s] = "1e9"
	}
	ic, err := NewInterference(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	applier := NewApplier(n, nil)

	lcP99 := func(u monitor.Usage) time.Duration {
		if c := u.Container("lc"); c != nil && c.Latest.RunQueue != nil {
			return c.Latest.RunQueue.P99
		}
		return -1
	}
	round := func() ([]Correction, time.Duration) {
		t.Helper()
		if err := mon.Sample(ctx); err != nil {
			t.Fatalf("sample: %v", err)
		}
		u := mon.Usage()
		cs, err := ic.Corrections(ctx, u)
		if err != nil {
			t.Fatalf("corrections: %v", err)
		}
		if err := applier.Apply(ctx, cs); err != nil {
			t.Fatalf("apply %v: %v", cs, err)
		}
		return cs, lcP99(u)
	}

	// Learn the baseline: the first round has no interval yet, then at
	// least 5 quiet rounds (warmup), and more until the warm-up is stable
	// (its halves' medians within 1.5× or 1 ms): a noisy start (a guest
	// under emulation, other jobs here) must not leave the controller
	// without a trusted baseline when the antagonist starts, since it
	// learns nothing above the exit threshold while revocable work runs.
	// No correction is possible before the warm-up.
	var quiet []time.Duration
	warm := func() bool {
		b := ic.(*Interference).baselines["lc"][SignalRunQueueP99]
		return b != nil && b.warm
	}
	for i := 0; i < 7 || !warm(); i++ {
		if i == 40 {
			t.Fatalf("no stable run-queue baseline after %d quiet rounds: %v", i, quiet)
		}
		time.Sleep(time.Second)
		cs, p99 := round()
		if len(cs) != 0 {
			t.Fatalf("quiet round %d: %v", i, render(cs))
		}
		quiet = append(quiet, p99)
	}
	t.Logf("lc run-queue p99 alone: %v", quiet)

	n.mu.Lock()
	n.ids = append(n.ids, "be")
	n.mu.Unlock()
	n.procs["be"] = startPinned(t, iso, "be", 1, roleEnv+"=burn", os.Args[0], "-test.run=^$")

	var contended []time.Duration
	var throttle *Correction
	for deadline := time.Now().Add(60 * time.Second); throttle == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("no correction within 60 s of the antagonist starting; lc p99 alone %v, contended %v", quiet, contended)
		}
		time.Sleep(time.Second)
		cs, p99 := round()
		contended = append(contended, p99)
		for i := range cs {
			if cs[i].Type != Throttle || cs[i].ContainerID != "be" {
				t.Fatalf("first correction: %s, want THROTTLE be", render(cs))
			}
			throttle = &cs[i]
		}
	}
	t.Logf("lc run-queue p99 with the antagonist: %v; correction %s, trigger %s", contended, render([]Correction{*throttle}), throttle.Trigger)
	tr := throttle.Trigger
	if tr.Signal != SignalRunQueueP99 || tr.Victim != "lc" || tr.Value <= tr.Threshold || tr.Threshold <= tr.Baseline {
		t.Fatalf("trigger %+v: want the run-queue p99 of lc above its threshold", tr)
	}
	if q := cgroupFile(t, "cpu", iso.Path("be"), "cpu.cfs_quota_us"); q != "20000" {
		t.Fatalf("be quota = %s, want 20000 (0.2 cpu of a 100 ms period)", q)
	}
	if q := cgroupFile(t, "cpu", iso.Path("lc"), "cpu.cfs_quota_us"); q != "-1" {
		t.Fatalf("lc quota = %s, want none", q)
	}
	if got := fmt.Sprint(applier.Active()); applier.Blocking() == "" {
		t.Fatalf("no block on revocable offers while throttled (active %s)", got)
	}
	// How much the throttle helped, for the log (timing: not asserted).
	var after []time.Duration
	for range 3 {
		time.Sleep(time.Second)
		_, p99 := round()
		after = append(after, p99)
	}
	t.Logf("lc run-queue p99 with the antagonist throttled: %v", after)
}
