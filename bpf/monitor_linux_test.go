//go:build linux && amd64

package bpf

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

// group is a cgroup created by a test in the hierarchies it names.
type group struct {
	path  string   // relative to the hierarchy roots
	ctrls []string // hierarchies it exists in
}

func newGroup(t *testing.T, parent, name string, ctrls ...string) group {
	t.Helper()
	g := group{path: parent + "/" + name, ctrls: ctrls}
	for _, c := range ctrls {
		if err := os.MkdirAll(g.dir(c), 0o755); err != nil {
			t.Fatalf("create cgroup: %v", err)
		}
	}
	return g
}

func (g group) dir(ctrl string) string { return testutil.CgroupDir(ctrl, g.path) }

// hostFile returns the file and value that stand for v1's file and value
// on the host's layout: on v2 cpu.shares is cpu.weight (converted as
// isolator/cgroups.Weight does), the memory limits memory.max and
// memory.swap.max (0: no swap beyond the limit).
func hostFile(file, value string) (string, string) {
	if !testutil.CgroupV2() {
		return file, value
	}
	switch file {
	case "cpu.shares":
		s, _ := strconv.ParseUint(value, 10, 64)
		return "cpu.weight", strconv.FormatUint(1+((max(s, 2)-2)*9999)/262142, 10)
	case "memory.limit_in_bytes":
		return "memory.max", value
	case "memory.memsw.limit_in_bytes":
		return "memory.swap.max", "0"
	}
	return file, value
}

func (g group) write(t *testing.T, ctrl, file, value string) {
	t.Helper()
	file, value = hostFile(file, value)
	if err := os.WriteFile(filepath.Join(g.dir(ctrl), file), []byte(value), 0o644); err != nil {
		t.Fatalf("write %s: %v", file, err)
	}
}

// read returns a number from a v1 file; on v2 cpuacct.usage is read from
// cpu.stat's usage_usec.
func (g group) read(t *testing.T, ctrl, file string) uint64 {
	t.Helper()
	if testutil.CgroupV2() && file == "cpuacct.usage" {
		b, err := os.ReadFile(filepath.Join(g.dir(ctrl), "cpu.stat"))
		if err != nil {
			t.Fatalf("read cpu.stat: %v", err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatalf("parse cpu.stat usage_usec: %v", err)
				}
				return n * 1000
			}
		}
		t.Fatalf("no usage_usec in cpu.stat: %q", b)
	}
	b, err := os.ReadFile(filepath.Join(g.dir(ctrl), file))
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	return n
}

// start runs the shell snippet body pinned to cpu, inside g (it joins every
// hierarchy of g before running body), and kills it on cleanup.
func (g group) start(t *testing.T, cpu int, body string) *exec.Cmd {
	t.Helper()
	args := []string{"-c", strconv.Itoa(cpu), "sh", "-c",
		`for f; do echo $$ > "$f" || exit 1; done; ` + body, "sh"}
	for _, c := range g.ctrls {
		args = append(args, filepath.Join(g.dir(c), "cgroup.procs"))
	}
	cmd := exec.Command("taskset", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %q: %v", body, err)
	}
	t.Cleanup(func() { stop(cmd) })
	return cmd
}

// stop kills the process group cmd started (its own pgid) and reaps it.
func stop(cmd *exec.Cmd) {
	if cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
}

func loadMonitor(t *testing.T) *Monitor {
	t.Helper()
	testutil.RequireRoot(t)
	m, err := Load(Options{MaxCgroups: 64})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return m
}

func track(t *testing.T, tr interface{ Track(string) (uint64, error) }, g group) uint64 {
	t.Helper()
	id, err := tr.Track(g.path)
	if err != nil {
		t.Fatalf("track %s: %v", g.path, err)
	}
	return id
}

// TestContention runs two CPU hogs on one CPU in cgroups with cpu.shares
// 1024 and 64, and a mostly sleeping task on the other CPU. Both sources
// must rank the low-share group's run-queue latency clearly above the
// high-share one's; the sleeper's must be low; on-CPU time must agree with
// cpuacct.usage within 5 %.
func TestContention(t *testing.T) {
	m := loadMonitor(t)
	fb, err := NewFallback("")
	if err != nil {
		t.Fatalf("new fallback: %v", err)
	}
	t.Cleanup(func() { _ = fb.Close() })
	parent := testutil.NewCgroupParent(t)
	high := newGroup(t, parent, "high", "cpu", "cpuacct")
	low := newGroup(t, parent, "low", "cpu", "cpuacct")
	idle := newGroup(t, parent, "idle", "cpu", "cpuacct")
	// Others' tasks in the root cgroup compete with ours: make the test's
	// parent weigh more so the contention measured is mostly high vs low.
	f, v := hostFile("cpu.shares", "8192")
	if err := os.WriteFile(filepath.Join(testutil.CgroupDir("cpu", parent), f), []byte(v), 0o644); err != nil {
		t.Fatalf("set parent shares: %v", err)
	}
	high.write(t, "cpu", "cpu.shares", "1024")
	low.write(t, "cpu", "cpu.shares", "64")

	ids := map[string]uint64{}
	for name, g := range map[string]group{"high": high, "low": low, "idle": idle} {
		ids[name] = track(t, m, g)
		if fid := track(t, fb, g); fid != ids[name] {
			t.Fatalf("fallback id %d != monitor id %d", fid, ids[name])
		}
	}

	hog := "while :; do :; done"
	hogs := []*exec.Cmd{high.start(t, 1, hog), low.start(t, 1, hog)}
	sleeper := idle.start(t, 0, "while :; do sleep 0.01; done")
	// Run until every group has enough waits for its quantiles to mean
	// something: on this shared machine that may take a while.
	ebpf, sched := map[uint64]CgroupStats{}, map[uint64]CgroupStats{}
	for deadline := time.Now().Add(90 * time.Second); ; {
		time.Sleep(250 * time.Millisecond)
		if err := m.Read(ebpf); err != nil {
			t.Fatalf("read: %v", err)
		}
		enough := true
		for _, id := range ids {
			enough = enough && ebpf[id].Waits >= 40
		}
		if enough {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("too few waits after 90 s: %+v", ebpf)
		}
	}
	if err := fb.Read(sched); err != nil {
		t.Fatalf("fallback read: %v", err)
	}
	for _, c := range append(hogs, sleeper) {
		stop(c)
	}

	for _, name := range []string{"high", "low", "idle"} {
		s := ebpf[ids[name]]
		t.Logf("%-4s ebpf: waits %d mean %v p50 %v p99 %v p99.9 %v oncpu %v wakeups %d switches %d",
			name, s.Waits, s.MeanRunDelay(), s.RunQueue.Quantile(0.5), s.RunQueue.Quantile(0.99),
			s.RunQueue.Quantile(0.999), s.OnCPU, s.Wakeups, s.Switches)
		f := sched[ids[name]]
		t.Logf("%-4s schedstat: waits %d mean %v oncpu %v", name, f.Waits, f.MeanRunDelay(), f.OnCPU)
		if s.Waits == 0 || f.Waits == 0 {
			t.Fatalf("%s: no waits seen (ebpf %d, schedstat %d)", name, s.Waits, f.Waits)
		}
	}
	hi, lo, id := ebpf[ids["high"]], ebpf[ids["low"]], ebpf[ids["idle"]]
	// Ordering with generous margins: the machine is shared and noisy.
	if lo.MeanRunDelay() < 3*hi.MeanRunDelay() {
		t.Errorf("ebpf: low-share mean wait %v not clearly above high-share %v", lo.MeanRunDelay(), hi.MeanRunDelay())
	}
	if lo.RunQueue.Quantile(0.5) < 3*hi.RunQueue.Quantile(0.5) {
		t.Errorf("ebpf: low-share p50 %v not clearly above high-share %v", lo.RunQueue.Quantile(0.5), hi.RunQueue.Quantile(0.5))
	}
	if id.RunQueue.Quantile(0.5)*10 > lo.RunQueue.Quantile(0.5) {
		t.Errorf("ebpf: uncontended p50 %v not low next to contended %v", id.RunQueue.Quantile(0.5), lo.RunQueue.Quantile(0.5))
	}
	if id.Wakeups == 0 {
		t.Errorf("ebpf: no wakeups counted for the sleeper")
	}
	fhi, flo, fid := sched[ids["high"]], sched[ids["low"]], sched[ids["idle"]]
	if flo.MeanRunDelay() < 3*fhi.MeanRunDelay() || fid.MeanRunDelay() > flo.MeanRunDelay()/10 {
		t.Errorf("schedstat ordering differs: low %v high %v idle %v", flo.MeanRunDelay(), fhi.MeanRunDelay(), fid.MeanRunDelay())
	}

	// Every task has exited: its last slice is charged, counters are final.
	if err := m.Read(ebpf); err != nil {
		t.Fatalf("read: %v", err)
	}
	for name, g := range map[string]group{"high": high, "low": low} {
		bpfNS := float64(ebpf[ids[name]].OnCPU)
		acct := float64(g.read(t, "cpuacct", "cpuacct.usage"))
		t.Logf("%-4s on-CPU ebpf %v cpuacct %v (ratio %.4f)", name, time.Duration(bpfNS), time.Duration(acct), bpfNS/acct)
		if acct == 0 || bpfNS < 0.95*acct || bpfNS > 1.05*acct {
			t.Errorf("%s: on-CPU %v disagrees with cpuacct %v by more than 5%%", name, time.Duration(bpfNS), time.Duration(acct))
		}
	}
}

// TestOOM runs a memory hog in a memory cgroup limited to 32 MiB and expects
// its kill reported with that cgroup.
func TestOOM(t *testing.T) {
	m := loadMonitor(t)
	parent := testutil.NewCgroupParent(t)
	g := newGroup(t, parent, "hog", "cpu", "memory")
	other := newGroup(t, parent, "bystander", "cpu", "memory")
	const limit = "33554432"
	g.write(t, "memory", "memory.limit_in_bytes", limit)
	if f, _ := hostFile("memory.memsw.limit_in_bytes", ""); fileExists(filepath.Join(g.dir("memory"), f)) {
		g.write(t, "memory", "memory.memsw.limit_in_bytes", limit)
	}
	id := track(t, m, g)
	track(t, m, other)
	memID, err := CgroupID(g.dir("memory"))
	if err != nil {
		t.Fatal(err)
	}
	other.start(t, 0, "while :; do sleep 0.05; done")
	hog := g.start(t, 0, "exec tail /dev/zero")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		ev, err := m.ReadOOM(ctx)
		if err != nil {
			t.Fatalf("no oom event for pid %d: %v", hog.Process.Pid, err)
		}
		t.Logf("oom event: %+v", ev)
		if ev.Pid != hog.Process.Pid {
			continue // someone else's OOM on this shared machine
		}
		if ev.CgroupID != id || ev.MemCgroupID != memID {
			t.Fatalf("oom of pid %d attributed to cgroup %d / memory %d, want %d / %d", ev.Pid, ev.CgroupID, ev.MemCgroupID, id, memID)
		}
		if ev.Comm != "tail" {
			t.Errorf("comm %q, want tail", ev.Comm)
		}
		if d := time.Since(ev.Time); d < 0 || d > time.Hour {
			t.Errorf("event time %v is not recent", ev.Time)
		}
		break
	}
	if err := hog.Wait(); err == nil {
		t.Errorf("hog exited cleanly, want killed")
	}
}

// TestTrackUntrack checks slot bookkeeping against a real cgroup: ErrFull,
// ErrNotTracked, counters restarting from zero after re-tracking, ReadOOM
// returning on cancel and after Close.
func TestTrackUntrack(t *testing.T) {
	testutil.RequireRoot(t)
	m, err := Load(Options{MaxCgroups: 2})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	defer m.Close()
	parent := testutil.NewCgroupParent(t)
	var gs []group
	for i := range 3 {
		gs = append(gs, newGroup(t, parent, fmt.Sprint("g", i), "cpu"))
	}
	a := track(t, m, gs[0])
	if again := track(t, m, gs[0]); again != a {
		t.Fatalf("re-track gave id %d, want %d", again, a)
	}
	track(t, m, gs[1])
	if _, err := m.Track(gs[2].path); !errors.Is(err, ErrFull) {
		t.Fatalf("third track: %v, want ErrFull", err)
	}
	if err := m.Untrack(12345); !errors.Is(err, ErrNotTracked) {
		t.Fatalf("untrack unknown: %v, want ErrNotTracked", err)
	}
	cmd := gs[0].start(t, 0, "while :; do sleep 0.01; done")
	dst := map[uint64]CgroupStats{}
	for dst[a].Wakeups == 0 {
		time.Sleep(50 * time.Millisecond)
		if err := m.Read(dst); err != nil {
			t.Fatal(err)
		}
	}
	stop(cmd)
	if err := m.Untrack(a); err != nil {
		t.Fatal(err)
	}
	c := track(t, m, gs[2]) // takes a's slot: must start from zero
	if err := m.Read(dst); err != nil {
		t.Fatal(err)
	}
	if _, ok := dst[a]; ok {
		t.Errorf("untracked cgroup still reported")
	}
	if s := dst[c]; s != (CgroupStats{}) {
		t.Errorf("reused slot not reset: %+v", s)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.ReadOOM(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadOOM on cancelled ctx: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := m.ReadOOM(context.Background()); done <- err }()
	time.Sleep(100 * time.Millisecond)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("ReadOOM after Close: %v, want ErrClosed", err)
	}
	if err := m.Read(dst); !errors.Is(err, ErrClosed) {
		t.Errorf("Read after Close: %v, want ErrClosed", err)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
