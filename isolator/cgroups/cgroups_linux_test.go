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
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

const root = testutil.CgroupRoot

// newV1 returns an isolator on the host's v1 hierarchies under a unique
// test parent.
func newV1(t *testing.T) (*Isolator, string) {
	t.Helper()
	skipOnV2(t)
	parent := testutil.NewCgroupParent(t)
	testutil.Require(t, exists(filepath.Join(root, "memory")) && !exists(filepath.Join(root, "cgroup.controllers")),
		"needs a cgroup v1 (or hybrid) host")
	i, err := New(Config{Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	if i.Version() != V1 {
		t.Fatalf("version %v on a v1 host", i.Version())
	}
	return i, parent
}

// start runs args and moves the process into the given group directories
// (cgroup.procs of the test's own groups only) before it execs: the shell
// waits for a line on stdin first. The process is killed on cleanup.
func start(t testing.TB, dirs []string, args ...string) (*exec.Cmd, func()) {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", `read go; exec "$@"`, "sh"}, args...)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		killAll(t, dirs)
	})
	for _, d := range dirs {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(cmd.Process.Pid)); err != nil {
			t.Fatalf("move %d into %s: %v", cmd.Process.Pid, d, err)
		}
	}
	return cmd, func() {
		if _, err := in.Write([]byte("go\n")); err != nil {
			t.Fatal(err)
		}
	}
}

// killAll kills what is left in the test's group directories dirs (the
// children of a process start ran) and waits until they are empty.
func killAll(t testing.TB, dirs []string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		var left []int
		for _, d := range dirs {
			pids, err := readProcs(d)
			if err == nil {
				left = append(left, pids...)
			}
		}
		if len(left) == 0 {
			return
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("processes left in %v", dirs)
}

// groupDirs returns the v1 directories of id in every controller the
// isolator creates groups in.
func groupDirs(i *Isolator, id string) []string {
	var dirs []string
	for _, c := range v1Create {
		if exists(filepath.Join(root, c)) {
			dirs = append(dirs, i.dir(c, i.Path(id)))
		}
	}
	return dirs
}

func readTrim(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// checkFiles compares cgroup files ("ctrl/file" → value) of id.
func checkFiles(t testing.TB, i *Isolator, id string, want map[string]string) {
	t.Helper()
	for f, v := range want {
		ctrl, file, _ := strings.Cut(f, "/")
		if got := readTrim(t, filepath.Join(i.dir(ctrl, i.Path(id)), file)); got != v {
			t.Errorf("%s = %q, want %q", f, got, v)
		}
	}
}

func TestLifecycleV1(t *testing.T) {
	i, parent := newV1(t)
	ctx := context.Background()
	var launch isolator.Launch
	limits := isolator.Limits{MilliCPUs: 1500, CPUQuota: true, MemoryBytes: 64 << 20, Pids: 100}
	if err := i.Prepare(ctx, "c1", limits, &launch); err != nil {
		t.Fatal(err)
	}
	if launch.CgroupPath != parent+"/c1" {
		t.Errorf("CgroupPath = %q", launch.CgroupPath)
	}
	want := map[string]string{
		"cpu/cpu.shares": "1536", "cpu/cpu.cfs_period_us": "100000", "cpu/cpu.cfs_quota_us": "150000",
		"memory/memory.limit_in_bytes": "67108864", "pids/pids.max": "100",
	}
	f := i.Features()
	if f.MemSwap {
		want["memory/memory.memsw.limit_in_bytes"] = "67108864"
	}
	if f.CPUIdle {
		want["cpu/cpu.idle"] = "0"
	}
	checkFiles(t, i, "c1", want)
	if got := readTrim(t, filepath.Join(i.dir("cpuset", launch.CgroupPath), "cpuset.cpus")); got == "" {
		t.Error("cpuset.cpus of the group is empty: no process could join")
	}

	// The shell holds 16 MB of anonymous memory (no swap here) while its
	// child sleeps.
	cmd, run := start(t, groupDirs(i, "c1"), "sh", "-c", `x=$(head -c 16000000 /dev/zero | tr "\0" a); sleep 300`)
	run()
	pid := cmd.Process.Pid
	if err := i.Isolate(ctx, "c1", pid); err != nil {
		t.Fatal(err)
	}
	if err := i.Isolate(ctx, "c1", os.Getpid()); !errors.Is(err, ErrNotMember) {
		t.Errorf("Isolate(own pid) = %v, want ErrNotMember", err)
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

	// Live resize while running: grow memory (memsw first), become
	// best-effort, drop the quota and the pids limit.
	if err := i.Update(ctx, "c1", isolator.Limits{MilliCPUs: 2500, MemoryBytes: 128 << 20, Class: isolator.BestEffort}); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"cpu/cpu.cfs_quota_us": "-1", "memory/memory.limit_in_bytes": "134217728", "pids/pids.max": "max"}
	if f.CPUIdle {
		want["cpu/cpu.idle"] = "1"
		want["cpu/cpu.shares"] = "3" // what the kernel reports for an idle group
	} else {
		want["cpu/cpu.shares"] = "25"
	}
	checkFiles(t, i, "c1", want)
	// Back to guaranteed, shrinking memory (limit first).
	if err := i.Update(ctx, "c1", isolator.Limits{MilliCPUs: 500, MemoryBytes: 48 << 20, Pids: 10}); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, i, "c1", map[string]string{"cpu/cpu.shares": "512", "memory/memory.limit_in_bytes": "50331648", "pids/pids.max": "10"})
	if f.MemSwap {
		checkFiles(t, i, "c1", map[string]string{"memory/memory.memsw.limit_in_bytes": "50331648"})
	}
	// Below what sleep uses (no swap to push it to): EBUSY.
	err := i.Update(ctx, "c1", isolator.Limits{MilliCPUs: 500, MemoryBytes: 4096, Pids: 10})
	if !errors.Is(err, ErrMemoryInUse) {
		t.Errorf("shrink below usage = %v, want ErrMemoryInUse", err)
	}
	// The failed update leaves the group usable and the next one complete.
	if err := i.Update(ctx, "c1", isolator.Limits{MilliCPUs: 700, MemoryBytes: 40 << 20, Pids: 10}); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, i, "c1", map[string]string{"cpu/cpu.shares": "716", "memory/memory.limit_in_bytes": "41943040"})

	if err := i.Cleanup(ctx, "c1"); !errors.Is(err, ErrBusy) {
		t.Errorf("Cleanup with a process inside = %v, want ErrBusy", err)
	}
	if !exists(i.dir("memory", i.Path("c1"))) {
		t.Error("busy cleanup removed the memory group")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	killAll(t, groupDirs(i, "c1"))
	if err := i.Cleanup(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	for _, h := range i.hierarchies() {
		if exists(filepath.Join(h, parent, "c1")) {
			t.Errorf("%s/%s/c1 left after Cleanup", h, parent)
		}
	}
	if err := i.Cleanup(ctx, "c1"); err != nil {
		t.Errorf("second Cleanup: %v", err)
	}
	if err := i.Update(ctx, "c1", limits); !errors.Is(err, isolator.ErrNotFound) {
		t.Errorf("Update after Cleanup = %v, want ErrNotFound", err)
	}
}

func TestSetCPUQuotaV1(t *testing.T) {
	i, _ := newV1(t)
	ctx := context.Background()
	if err := i.Prepare(ctx, "q", isolator.Limits{MilliCPUs: 2000}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = i.Cleanup(ctx, "q") })
	if err := i.SetCPUQuota(ctx, "q", 500); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, i, "q", map[string]string{"cpu/cpu.cfs_quota_us": "50000", "cpu/cpu.shares": "2048"})
	if err := i.Update(ctx, "q", isolator.Limits{MilliCPUs: 3000}); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, i, "q", map[string]string{"cpu/cpu.cfs_quota_us": "50000", "cpu/cpu.shares": "3072"})
	if err := i.SetCPUQuota(ctx, "q", 0); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, i, "q", map[string]string{"cpu/cpu.cfs_quota_us": "-1"})
	if err := i.SetCPUQuota(ctx, "missing", 100); !errors.Is(err, isolator.ErrNotFound) {
		t.Errorf("SetCPUQuota(missing) = %v, want ErrNotFound", err)
	}
}

func TestUsageV1(t *testing.T) {
	i, parent := newV1(t)
	ctx := context.Background()
	if err := i.Prepare(ctx, "u", isolator.Limits{MilliCPUs: 200, CPUQuota: true, MemoryBytes: 256 << 20, Pids: 64}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = i.Cleanup(ctx, "u") })
	dirs := groupDirs(i, "u")
	if i.unified != "" { // what libcontainer does on a hybrid host: PSI comes from there
		u := filepath.Join(i.unified, parent, "u")
		if err := os.MkdirAll(u, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, u)
	}
	cmd, run := start(t, dirs, "sh", "-c", "while :; do :; done")
	run()

	var st isolator.Statistics
	deadline := time.Now().Add(60 * time.Second)
	for {
		st = isolator.Statistics{}
		if err := i.Usage(ctx, "u", &st); err != nil {
			t.Fatal(err)
		}
		if st.CPUUsageNanos > uint64(100*time.Millisecond) && st.CPUThrottledTime > 0 && st.CPUUserSeconds > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cpu usage did not grow with a busy loop inside: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !st.HasCPU || !st.HasMemory || !st.HasPids {
		t.Errorf("has cpu/mem/pids %v/%v/%v", st.HasCPU, st.HasMemory, st.HasPids)
	}
	if st.CPULimit != 0.2 || st.CPUThrottledTime <= 0 || st.CPUPeriods < st.CPUThrottled {
		t.Errorf("cpu limit %v periods %d throttled %d/%v", st.CPULimit, st.CPUPeriods, st.CPUThrottled, st.CPUThrottledTime)
	}
	if st.MemUsageBytes == 0 || st.MemLimitBytes != 256<<20 || st.MemWorkingSet > st.MemUsageBytes || st.MemOOMKills != 0 {
		t.Errorf("memory usage %d limit %d ws %d ooms %d", st.MemUsageBytes, st.MemLimitBytes, st.MemWorkingSet, st.MemOOMKills)
	}
	if st.Pids != 1 || st.PidsLimit != 64 {
		t.Errorf("pids %d limit %d", st.Pids, st.PidsLimit)
	}
	if i.unified != "" && (!st.HasPressure || st.CPUPressure.SomeTotal == 0) {
		t.Errorf("no cpu pressure from the unified directory of a throttled loop: %v %+v", st.HasPressure, st.CPUPressure)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err := i.Cleanup(ctx, "u"); err != nil {
		t.Fatal(err)
	}
	if i.unified != "" && exists(filepath.Join(i.unified, parent, "u")) {
		t.Error("Cleanup left the unified directory")
	}
}

func TestOOMV1(t *testing.T) {
	i, _ := newV1(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := i.Prepare(ctx, "oom", isolator.Limits{MilliCPUs: 1000, MemoryBytes: 32 << 20}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = i.Cleanup(context.Background(), "oom") })
	events, err := i.OOMEvents(ctx, "oom")
	if err != nil {
		t.Fatal(err)
	}
	// tail buffers /dev/zero looking for a newline: it grows until killed.
	cmd, run := start(t, groupDirs(i, "oom"), "tail", "/dev/zero")
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
	// Removing the group closes the channel.
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

func TestFreezeV1(t *testing.T) {
	i, _ := newV1(t)
	ctx := context.Background()
	if err := i.Prepare(ctx, "fz", isolator.Limits{MilliCPUs: 100}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = i.Cleanup(ctx, "fz") })
	_, run := start(t, groupDirs(i, "fz"), "sh", "-c", "while :; do :; done")
	run()
	before := usage(t, i, "fz")
	if err := i.Freeze(ctx, "fz"); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, i, "fz", map[string]string{"freezer/freezer.state": "FROZEN"})
	frozen := usage(t, i, "fz")
	if frozen < before {
		t.Errorf("cpu usage went back: %d < %d", frozen, before)
	}
	time.Sleep(100 * time.Millisecond)
	if after := usage(t, i, "fz"); after != frozen {
		t.Errorf("a frozen busy loop used cpu: %d → %d ns", frozen, after)
	}
	if err := i.Thaw(ctx, "fz"); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, i, "fz", map[string]string{"freezer/freezer.state": "THAWED"})
	if err := i.Freeze(ctx, "none"); !errors.Is(err, isolator.ErrNotFound) {
		t.Errorf("Freeze(none) = %v, want ErrNotFound", err)
	}
}

func usage(t *testing.T, i *Isolator, id string) uint64 {
	t.Helper()
	var st isolator.Statistics
	if err := i.Usage(context.Background(), id, &st); err != nil {
		t.Fatal(err)
	}
	return st.CPUUsageNanos
}

func TestRecoverV1(t *testing.T) {
	i, parent := newV1(t)
	ctx := context.Background()
	keep := isolator.Limits{MilliCPUs: 1000, MemoryBytes: 64 << 20}
	for _, id := range []string{"keep", "orphan1", "orphan2", "half"} {
		if err := i.Prepare(ctx, id, keep, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A known container whose group the dead agent was removing (or
	// making): gone from the cpu hierarchy, still in the others. Recover
	// failed on it before ("set cpu/cpu.idle=0: container not found in
	// isolator", containerizer TestNetworkRecoverAfterAgentKill9 in CI).
	if err := os.Remove(i.dir("cpu", i.Path("half"))); err != nil {
		t.Fatal(err)
	}
	// What libcontainer adds (name=systemd, unified) for an orphan, and a
	// nested group inside an orphan.
	extra := []string{filepath.Join(i.dir("memory", i.Path("orphan1")), "nested")}
	for _, h := range []string{"systemd", "unified"} {
		if exists(filepath.Join(root, h)) {
			extra = append(extra, filepath.Join(root, h, parent, "orphan3"))
		}
	}
	for _, d := range extra {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Someone changed the kept group behind brim's back: Recover restores it.
	if err := writeFile(filepath.Join(i.dir("cpu", i.Path("keep")), "cpu.shares"), "77"); err != nil {
		t.Fatal(err)
	}

	// A new isolator, as after an agent restart.
	j, err := New(Config{Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Recover(ctx, map[string]isolator.Limits{"keep": keep, "gone": keep, "half": keep}); err != nil {
		t.Fatal(err)
	}
	if err := j.Cleanup(ctx, "half"); err != nil {
		t.Fatalf("cleanup of the half-made group: %v", err)
	}
	for _, h := range j.hierarchies() {
		ents, _ := os.ReadDir(filepath.Join(h, parent))
		for _, e := range ents {
			if e.IsDir() && e.Name() != "keep" {
				t.Errorf("orphan %s left in %s", e.Name(), h)
			}
		}
	}
	checkFiles(t, j, "keep", map[string]string{"cpu/cpu.shares": "1024", "memory/memory.limit_in_bytes": "67108864"})
	if err := j.Update(ctx, "keep", isolator.Limits{MilliCPUs: 2000, MemoryBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, j, "keep", map[string]string{"cpu/cpu.shares": "2048"})
	if err := j.Update(ctx, "gone", keep); !errors.Is(err, isolator.ErrNotFound) {
		t.Errorf("Update of a known container without a group = %v, want ErrNotFound", err)
	}
	if err := j.Cleanup(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
}

// TestUnifiedV2 runs the v2 code paths for real on the host's v2 tree. On a
// hybrid host that tree has no controllers: groups, PSI, cpu.stat and
// cgroup.freeze still work.
func TestUnifiedV2(t *testing.T) {
	testutil.RequireRoot(t)
	r := root
	if !exists(filepath.Join(root, "cgroup.controllers")) {
		r = filepath.Join(root, "unified")
	}
	testutil.SkipUnless(t, exists(filepath.Join(r, "cgroup.controllers")), "no cgroup v2 hierarchy on this host")
	parent := testutil.NewCgroupParent(t)
	i, err := New(Config{Root: r, Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	if i.Version() != V2 {
		t.Fatalf("version %v", i.Version())
	}
	ctx := context.Background()
	f := i.Features()
	limits := isolator.Limits{}
	if f.CPU && f.Memory && f.Pids {
		limits = isolator.Limits{MilliCPUs: 1500, CPUQuota: true, MemoryBytes: 64 << 20, Pids: 50}
	} else if err := i.Prepare(ctx, "bad", isolator.Limits{MilliCPUs: 1000, MemoryBytes: 1 << 30}, nil); !errors.Is(err, isolator.ErrNotSupported) {
		t.Errorf("Prepare needing missing controllers = %v, want ErrNotSupported", err)
	}
	var launch isolator.Launch
	if err := i.Prepare(ctx, "v2", limits, &launch); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(r, launch.CgroupPath)
	if f.CPU {
		checkFiles(t, i, "v2", map[string]string{"/cpu.weight": "59", "/cpu.max": "150000 100000", "/memory.max": "67108864", "/pids.max": "50"})
	}
	cmd, run := start(t, []string{d}, "sh", "-c", "while :; do :; done")
	run()
	if err := i.Isolate(ctx, "v2", cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	var st isolator.Statistics
	for deadline := time.Now().Add(time.Minute); ; {
		st = isolator.Statistics{}
		if err := i.Usage(ctx, "v2", &st); err != nil {
			t.Fatal(err)
		}
		if st.CPUUsageNanos > uint64(50*time.Millisecond) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cpu usage in cpu.stat: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !st.HasCPU || !st.HasPressure {
		t.Errorf("has cpu %v pressure %v", st.HasCPU, st.HasPressure)
	}
	if err := i.Freeze(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	frozen := usage(t, i, "v2")
	time.Sleep(100 * time.Millisecond)
	if after := usage(t, i, "v2"); after != frozen {
		t.Errorf("a frozen busy loop used cpu: %d → %d ns", frozen, after)
	}
	if err := i.Thaw(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	if err := i.Cleanup(ctx, "v2"); !errors.Is(err, ErrBusy) {
		t.Errorf("Cleanup with a process = %v, want ErrBusy", err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err := i.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if exists(d) {
		t.Error("Recover with no known containers left the group")
	}
}

// TestOOMEventsV2Fixture drives the v2 inotify watcher with a fixture
// memory.events file.
func TestOOMEventsV2Fixture(t *testing.T) {
	r := copyTree(t, "testdata/v2")
	i, err := New(Config{Root: r, Parent: "/brim"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := i.OOMEvents(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(r, "brim", "c1", "memory.events")
	// A change of another counter is no oom.
	if err := os.WriteFile(file, []byte("low 1\nhigh 0\nmax 18\noom 3\noom_kill 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("low 1\nhigh 0\nmax 19\noom 4\noom_kill 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-events:
		if !ok {
			t.Fatal("channel closed")
		}
	case <-time.After(time.Minute):
		t.Fatal("no event for a rise of the oom counter")
	}
	select {
	case <-events:
		t.Error("a second event for one oom")
	default:
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	for ok := true; ok; {
		select {
		case _, ok = <-events:
		case <-time.After(time.Minute):
			t.Fatal("channel not closed after the file went away")
		}
	}
	// Cancelling ctx closes a watch too.
	ctx2, cancel2 := context.WithCancel(context.Background())
	if err := os.WriteFile(file, []byte("oom 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev2, err := i.OOMEvents(ctx2, "c1")
	if err != nil {
		t.Fatal(err)
	}
	cancel2()
	for ok := true; ok; {
		select {
		case _, ok = <-ev2:
		case <-time.After(time.Minute):
			t.Fatal("channel not closed after cancel")
		}
	}
	if _, err := i.OOMEvents(ctx, "missing"); !errors.Is(err, isolator.ErrNotFound) {
		t.Errorf("OOMEvents(missing) = %v, want ErrNotFound", err)
	}
}

// TestConcurrentContainersV1 drives several containers at once (run it
// with -race): each ends with its own last limits.
func TestConcurrentContainersV1(t *testing.T) {
	i, _ := newV1(t)
	ctx := context.Background()
	const n, rounds = 4, 50
	errs := make(chan error, n)
	for k := 0; k < n; k++ {
		id := "p" + strconv.Itoa(k)
		go func() {
			errs <- func() error {
				if err := i.Prepare(ctx, id, isolator.Limits{MilliCPUs: 100}, nil); err != nil {
					return err
				}
				for r := 1; r <= rounds; r++ {
					l := isolator.Limits{MilliCPUs: int64(100 * r), MemoryBytes: int64(r) << 20, Class: isolator.QoSClass(r % 2)}
					if err := i.Update(ctx, id, l); err != nil {
						return err
					}
					if err := i.SetCPUQuota(ctx, id, int64(r%3)*100); err != nil {
						return err
					}
					var st isolator.Statistics
					if err := i.Usage(ctx, id, &st); err != nil {
						return err
					}
				}
				return nil
			}()
		}()
	}
	for k := 0; k < n; k++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for k := 0; k < n; k++ {
		id := "p" + strconv.Itoa(k)
		// Last round: 5000 millicpus guaranteed, 50 MiB, throttle 200.
		checkFiles(t, i, id, map[string]string{"cpu/cpu.shares": "5120", "cpu/cpu.cfs_quota_us": "20000",
			"memory/memory.limit_in_bytes": strconv.Itoa(50 << 20)})
		if err := i.Cleanup(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

// copyTree copies fixture tree src into a fresh temporary directory.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if e.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestDefaultPids: a container that asks for no pids limit gets the
// isolator's default, at launch and after a resize; one that asks keeps
// its own (issue 13: one task cannot fork-bomb the node).
func TestDefaultPids(t *testing.T) {
	parent := testutil.NewCgroupParent(t)
	i, err := New(Config{Parent: parent, DefaultPids: 64})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Require(t, i.Features().Pids, "needs the pids controller")
	ctx := context.Background()
	pidsMax := func() string {
		return readTrim(t, filepath.Join(i.dir(i.pidsController(), i.Path("d")), "pids.max"))
	}
	if err := i.Prepare(ctx, "d", isolator.Limits{MilliCPUs: 100}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = i.Cleanup(ctx, "d") })
	if got := pidsMax(); got != "64" {
		t.Errorf("pids.max after Prepare without a limit = %q, want the default 64", got)
	}
	if err := i.Update(ctx, "d", isolator.Limits{MilliCPUs: 200, Pids: 10}); err != nil {
		t.Fatal(err)
	}
	if got := pidsMax(); got != "10" {
		t.Errorf("pids.max after Update to 10 = %q", got)
	}
	if err := i.Update(ctx, "d", isolator.Limits{MilliCPUs: 200}); err != nil {
		t.Fatal(err)
	}
	if got := pidsMax(); got != "64" {
		t.Errorf("pids.max after Update without a limit = %q, want the default 64", got)
	}
	if _, err := New(Config{Parent: parent, DefaultPids: -1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("New with DefaultPids -1 = %v, want ErrInvalid", err)
	}
}
