package cgroups

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// The tests below run the v2 paths on a host that mounts the unified
// hierarchy alone (make test-v2 boots one); the v1 tests in
// cgroups_linux_test.go cover the same ground on a v1 or hybrid host.

// newV2 returns an isolator on the host's unified hierarchy under a unique
// test parent (nested under $BRIM_TEST_CGROUP_BASE when set).
func newV2(t *testing.T) (*Isolator, string) {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.SkipUnless(t, testutil.CgroupV2(), "needs a cgroup v2 host (make test-v2 boots one)")
	parent := testutil.NewCgroupParent(t)
	i, err := New(Config{Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	if i.Version() != V2 {
		t.Fatalf("version %v on a v2 host", i.Version())
	}
	if f := i.Features(); !f.CPU || !f.Memory || !f.Pids {
		t.Fatalf("features on a v2 host with the controllers delegated: %+v", f)
	}
	return i, parent
}

// skipOnV2 skips a v1 test on a v2 host, where its v2 counterpart runs.
func skipOnV2(t testing.TB) {
	t.Helper()
	testutil.SkipUnless(t, !testutil.CgroupV2(), "a cgroup v1 test on a cgroup v2 host (its V2 counterpart runs here)")
}

func weight(milli int64, class isolator.QoSClass) string {
	return strconv.FormatUint(Weight(Shares(isolator.Limits{MilliCPUs: milli, Class: class})), 10)
}

func TestLifecycleV2(t *testing.T) {
	i, parent := newV2(t)
	ctx := context.Background()
	var launch isolator.Launch
	if err := i.Prepare(ctx, "c1", isolator.Limits{MilliCPUs: 1500, CPUQuota: true, MemoryBytes: 64 << 20, Pids: 100}, &launch); err != nil {
		t.Fatal(err)
	}
	if launch.CgroupPath != parent+"/c1" {
		t.Errorf("CgroupPath = %q", launch.CgroupPath)
	}
	f := i.Features()
	if !f.CPUIdle || !f.MemSwap {
		t.Errorf("6.1 kernel without cpu.idle or memory.swap.max: %+v", f)
	}
	checkFiles(t, i, "c1", map[string]string{"/cpu.weight": weight(1500, isolator.Guaranteed), "/cpu.max": "150000 100000",
		"/memory.max": "67108864", "/memory.swap.max": "0", "/pids.max": "100", "/cpu.idle": "0"})
	// No process in an inner node: the parent holds only groups.
	if procs := readTrim(t, filepath.Join(root, parent, "cgroup.procs")); procs != "" {
		t.Errorf("processes in the parent %s: %q", parent, procs)
	}
	d := filepath.Join(root, launch.CgroupPath)
	cmd, run := start(t, []string{d}, "sh", "-c", `x=$(head -c 16000000 /dev/zero | tr "\0" a); sleep 300`)
	run()
	pid := cmd.Process.Pid
	if err := i.Isolate(ctx, "c1", pid); err != nil {
		t.Fatal(err)
	}
	if pids, err := i.PIDs(ctx, "c1"); err != nil || !slices.Contains(pids, pid) {
		t.Errorf("PIDs = %v, %v; want %d in it", pids, err, pid)
	}
	for deadline := time.Now().Add(time.Minute); ; {
		var st isolator.Statistics
		if err := i.Usage(ctx, "c1", &st); err != nil {
			t.Fatal(err)
		}
		if st.MemRSSBytes > 16000000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shell never held 16 MB: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Live resize: best-effort (cpu.idle), no quota, more memory, no pids limit.
	if err := i.Update(ctx, "c1", isolator.Limits{MilliCPUs: 2500, MemoryBytes: 128 << 20, Class: isolator.BestEffort}); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, i, "c1", map[string]string{"/cpu.max": "max 100000", "/cpu.idle": "1", "/memory.max": "134217728",
		"/memory.swap.max": "0", "/pids.max": "max"})
	// Back to guaranteed with less memory.
	if err := i.Update(ctx, "c1", isolator.Limits{MilliCPUs: 500, MemoryBytes: 48 << 20, Pids: 10}); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, i, "c1", map[string]string{"/cpu.weight": weight(500, isolator.Guaranteed), "/cpu.idle": "0",
		"/memory.max": "50331648", "/pids.max": "10"})

	if err := i.Cleanup(ctx, "c1"); !errors.Is(err, ErrBusy) {
		t.Errorf("Cleanup with a process inside = %v, want ErrBusy", err)
	}
	// Below what the shell holds: v1 refuses (EBUSY, ErrMemoryInUse); v2
	// reclaims and then OOM-kills inside the group, and the write succeeds.
	if err := i.Update(ctx, "c1", isolator.Limits{MilliCPUs: 500, MemoryBytes: 4 << 20, Pids: 10}); err != nil && !errors.Is(err, ErrMemoryInUse) {
		t.Fatalf("shrink below usage = %v, want nil or ErrMemoryInUse", err)
	}
	// The write returns once a victim is chosen; its memory is freed as
	// it exits (under qemu's TCG seen still 16 MB with 3 kills done).
	for deadline := time.Now().Add(30 * time.Second); ; {
		var st isolator.Statistics
		if err := i.Usage(ctx, "c1", &st); err != nil {
			t.Fatal(err)
		}
		if st.MemUsageBytes <= 4<<20 && st.MemOOMKills >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s after shrinking below usage: usage %d, oom kills %d (want ≤ 4 MiB, ≥ 1)", st.MemUsageBytes, st.MemOOMKills)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	killAll(t, []string{d})
	if err := i.Cleanup(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if exists(d) {
		t.Errorf("%s left after Cleanup", d)
	}
	if err := i.Update(ctx, "c1", isolator.Limits{MilliCPUs: 100}); !errors.Is(err, isolator.ErrNotFound) {
		t.Errorf("Update after Cleanup = %v, want ErrNotFound", err)
	}
}

func TestSetCPUQuotaV2(t *testing.T) {
	i, _ := newV2(t)
	ctx := context.Background()
	if err := i.Prepare(ctx, "q", isolator.Limits{MilliCPUs: 2000}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = i.Cleanup(ctx, "q") })
	if err := i.SetCPUQuota(ctx, "q", 500); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, i, "q", map[string]string{"/cpu.max": "50000 100000", "/cpu.weight": weight(2000, isolator.Guaranteed)})
	if err := i.Update(ctx, "q", isolator.Limits{MilliCPUs: 3000}); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, i, "q", map[string]string{"/cpu.max": "50000 100000", "/cpu.weight": weight(3000, isolator.Guaranteed)})
	if err := i.SetCPUQuota(ctx, "q", 0); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, i, "q", map[string]string{"/cpu.max": "max 100000"})
}

// TestUsageV2: a throttled busy loop shows in cpu.stat (usage and
// throttling) and in the group's own PSI, which v2 has per cgroup.
func TestUsageV2(t *testing.T) {
	i, _ := newV2(t)
	ctx := context.Background()
	var launch isolator.Launch
	if err := i.Prepare(ctx, "u", isolator.Limits{MilliCPUs: 200, CPUQuota: true, MemoryBytes: 256 << 20, Pids: 64}, &launch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = i.Cleanup(ctx, "u") })
	cmd, run := start(t, []string{filepath.Join(root, launch.CgroupPath)}, "sh", "-c", "while :; do :; done")
	run()
	var st isolator.Statistics
	for deadline := time.Now().Add(time.Minute); ; {
		st = isolator.Statistics{}
		if err := i.Usage(ctx, "u", &st); err != nil {
			t.Fatal(err)
		}
		if st.CPUUsageNanos > uint64(100*time.Millisecond) && st.CPUThrottledTime > 0 && st.CPUPressure.SomeTotal > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a throttled busy loop: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !st.HasCPU || !st.HasMemory || !st.HasPids || !st.HasPressure {
		t.Errorf("has cpu/mem/pids/psi %v/%v/%v/%v", st.HasCPU, st.HasMemory, st.HasPids, st.HasPressure)
	}
	if st.CPULimit != 0.2 || st.CPUPeriods < st.CPUThrottled || st.CPUUserSeconds <= 0 {
		t.Errorf("cpu limit %v periods %d throttled %d user %v", st.CPULimit, st.CPUPeriods, st.CPUThrottled, st.CPUUserSeconds)
	}
	if st.MemUsageBytes == 0 || st.MemLimitBytes != 256<<20 || st.MemWorkingSet > st.MemUsageBytes || st.MemOOMKills != 0 {
		t.Errorf("memory usage %d limit %d ws %d ooms %d", st.MemUsageBytes, st.MemLimitBytes, st.MemWorkingSet, st.MemOOMKills)
	}
	if st.Pids != 1 || st.PidsLimit != 64 {
		t.Errorf("pids %d limit %d", st.Pids, st.PidsLimit)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// TestOOMV2 runs the v2 OOM path for real: inotify on memory.events fires
// when the group's oom counter rises, Usage reads the kill from
// memory.events, and removing the group closes the channel.
func TestOOMV2(t *testing.T) {
	i, _ := newV2(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var launch isolator.Launch
	if err := i.Prepare(ctx, "oom", isolator.Limits{MilliCPUs: 1000, MemoryBytes: 32 << 20}, &launch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = i.Cleanup(context.Background(), "oom") })
	events, err := i.OOMEvents(ctx, "oom")
	if err != nil {
		t.Fatal(err)
	}
	cmd, run := start(t, []string{filepath.Join(root, launch.CgroupPath)}, "tail", "/dev/zero")
	run()
	select {
	case _, ok := <-events:
		if !ok {
			t.Fatal("oom channel closed without an event")
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("no oom event for a process growing past its memory limit")
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Errorf("tail exited with %v, want killed", err)
	}
	var st isolator.Statistics
	if err := i.Usage(ctx, "oom", &st); err != nil {
		t.Fatal(err)
	}
	if st.MemOOMKills < 1 || !st.MemLimitHit || st.MemMaxUsage < 30<<20 {
		t.Errorf("after oom: kills %d limit hit %v max usage %d", st.MemOOMKills, st.MemLimitHit, st.MemMaxUsage)
	}
	if err := i.Cleanup(ctx, "oom"); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(time.Minute)
	for ok := true; ok; {
		select {
		case _, ok = <-events:
		case <-timeout:
			t.Fatal("oom channel not closed after Cleanup")
		}
	}
}

func TestFreezeV2(t *testing.T) {
	i, _ := newV2(t)
	ctx := context.Background()
	var launch isolator.Launch
	if err := i.Prepare(ctx, "fz", isolator.Limits{MilliCPUs: 100}, &launch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = i.Cleanup(ctx, "fz") })
	_, run := start(t, []string{filepath.Join(root, launch.CgroupPath)}, "sh", "-c", "while :; do :; done")
	run()
	if err := i.Freeze(ctx, "fz"); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, i, "fz", map[string]string{"/cgroup.freeze": "1"})
	if ev := readTrim(t, filepath.Join(root, launch.CgroupPath, "cgroup.events")); !slices.Contains(splitLines(ev), "frozen 1") {
		t.Errorf("cgroup.events after Freeze: %q", ev)
	}
	frozen := usage(t, i, "fz")
	time.Sleep(100 * time.Millisecond)
	if after := usage(t, i, "fz"); after != frozen {
		t.Errorf("a frozen busy loop used cpu: %d → %d ns", frozen, after)
	}
	if err := i.Thaw(ctx, "fz"); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, i, "fz", map[string]string{"/cgroup.freeze": "0"})
	if err := i.Freeze(ctx, "none"); !errors.Is(err, isolator.ErrNotFound) {
		t.Errorf("Freeze(none) = %v, want ErrNotFound", err)
	}
}

func TestRecoverV2(t *testing.T) {
	i, parent := newV2(t)
	ctx := context.Background()
	keep := isolator.Limits{MilliCPUs: 1000, MemoryBytes: 64 << 20}
	for _, id := range []string{"keep", "orphan1", "orphan2"} {
		if err := i.Prepare(ctx, id, keep, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, i.Path("orphan1"), "nested"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(root, i.Path("keep"), "cpu.weight"), "77"); err != nil {
		t.Fatal(err)
	}
	j, err := New(Config{Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Recover(ctx, map[string]isolator.Limits{"keep": keep, "gone": keep}); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(root, parent))
	for _, e := range ents {
		if e.IsDir() && e.Name() != "keep" {
			t.Errorf("orphan %s left", e.Name())
		}
	}
	checkFiles(t, j, "keep", map[string]string{"/cpu.weight": weight(1000, isolator.Guaranteed), "/memory.max": "67108864"})
	if err := j.Cleanup(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
}

func splitLines(s string) []string { return strings.Split(s, "\n") }

// TestDelegatedV2 is the systemd layout with Delegate=yes on a real v2
// tree: a "unit" group holding a process, which EnterLeafV2 moves into a
// leaf; then an isolator whose parent is nested two levels inside the unit
// enables controllers down from the unit (and only there), its containers
// get cpu, memory and pids, and no inner node holds a process.
func TestDelegatedV2(t *testing.T) {
	_, base := newV2(t)
	unit := base + "/brim-agent.service"
	if err := os.Mkdir(filepath.Join(root, unit), 0o755); err != nil {
		t.Fatal(err)
	}
	agent, run := start(t, []string{filepath.Join(root, unit)}, "sleep", "300")
	run()
	parent := unit + "/nested/containers"
	// Without the move the unit may not pass controllers on: a process
	// sits in it.
	i, err := New(Config{Parent: parent, Delegated: unit})
	if err != nil {
		t.Fatal(err)
	}
	if err := i.Prepare(context.Background(), "c", isolator.Limits{MilliCPUs: 100}, nil); err == nil {
		t.Fatal("Prepare with a process in the delegated unit's root succeeded")
	}
	own, err := EnterLeafV2(root, agent.Process.Pid, "agent")
	if err != nil {
		t.Fatal(err)
	}
	if own != unit {
		t.Errorf("EnterLeafV2 = %q, want %q", own, unit)
	}
	if got, err := OwnV2(agent.Process.Pid); err != nil || got != unit+"/agent" {
		t.Errorf("the process is in %q, %v; want %s/agent", got, err, unit)
	}
	// Again: already in the leaf, nothing moves.
	if own, err := EnterLeafV2(root, agent.Process.Pid, "agent"); err != nil || own != unit {
		t.Errorf("second EnterLeafV2 = %q, %v", own, err)
	}
	i, err = New(Config{Parent: parent, Delegated: unit})
	if err != nil {
		t.Fatal(err)
	}
	var launch isolator.Launch
	ctx := context.Background()
	if err := i.Prepare(ctx, "c", isolator.Limits{MilliCPUs: 1000, MemoryBytes: 64 << 20, Pids: 20}, &launch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = i.Cleanup(context.Background(), "c") })
	checkFiles(t, i, "c", map[string]string{"/memory.max": "67108864", "/pids.max": "20", "/cpu.weight": weight(1000, isolator.Guaranteed)})
	for _, n := range []string{unit, unit + "/nested", parent} {
		if got := readTrim(t, filepath.Join(root, n, "cgroup.procs")); got != "" {
			t.Errorf("processes in inner node %s: %q", n, got)
		}
		if got := strings.Fields(readTrim(t, filepath.Join(root, n, "cgroup.subtree_control"))); !slices.Contains(got, "memory") || !slices.Contains(got, "cpu") {
			t.Errorf("%s passes on %v", n, got)
		}
	}
	// Above the delegated unit nothing was enabled by brim: the leaf the
	// process moved to passes nothing on.
	if got := readTrim(t, filepath.Join(root, unit, "agent", "cgroup.subtree_control")); got != "" {
		t.Errorf("the agent's leaf enables %q", got)
	}
	if _, err := EnterLeafV2(root, agent.Process.Pid, "a/b"); !errors.Is(err, ErrInvalid) {
		t.Errorf("EnterLeafV2 with a path = %v, want ErrInvalid", err)
	}
}
