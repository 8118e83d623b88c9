package cgroups

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// TestPolicyWrites checks the oversubscription writes on the host's own
// layout (v1 here, v2 in make test-v2): the soft limit (v1
// memory.soft_limit_in_bytes, v2 memory.high), memory.low for guaranteed
// containers and their sum on the parent (v2), the io weight where the
// host has a weight file, the io throttle (v1 blkio.throttle.*, v2
// io.max) on and off, oom_score_adj through Launch and rewritten for
// processes in the group by Recover, and Recover lifting the io throttle.
func TestPolicyWrites(t *testing.T) {
	testutil.RequireRoot(t)
	parent := testutil.NewCgroupParent(t)
	disk := testutil.DiskDir(t)
	i, err := New(Config{Parent: parent, IOPaths: []string{disk}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v2 := i.Version() == V2
	const mem = 64 << 20
	lc, be := testutil.UniqueName("lc"), testutil.UniqueName("be")
	var lcLaunch, beLaunch isolator.Launch
	if err := i.Prepare(ctx, lc, isolator.Limits{MilliCPUs: 500, MemoryBytes: mem}, &lcLaunch); err != nil {
		t.Fatal(err)
	}
	if err := i.Prepare(ctx, be, isolator.Limits{MilliCPUs: 500, MemoryBytes: mem, Class: isolator.BestEffort}, &beLaunch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, id := range []string{lc, be} {
			if err := i.Cleanup(ctx, id); err != nil {
				t.Error(err)
			}
		}
	})
	f := i.Features()
	t.Logf("features: %+v", f)
	if !f.MemSoft || !f.IOThrottle || len(f.IODevices) != 1 {
		t.Fatalf("features %+v: want a memory soft limit, io throttling and one disk", f)
	}
	if lcLaunch.OOMScoreAdj == nil || *lcLaunch.OOMScoreAdj != 0 || beLaunch.OOMScoreAdj == nil || *beLaunch.OOMScoreAdj != 1000 {
		t.Errorf("launch oom_score_adj: guaranteed %v, best-effort %v; want 0, 1000", lcLaunch.OOMScoreAdj, beLaunch.OOMScoreAdj)
	}
	soft := strconv.Itoa(mem * 9 / 10 / pageSize * pageSize)
	mfile := func(id, file string) string { return readTrim(t, filepath.Join(i.dir("memory", i.Path(id)), file)) }
	if v2 {
		checkFiles(t, i, be, map[string]string{"memory/memory.high": soft, "memory/memory.low": "0"})
		checkFiles(t, i, lc, map[string]string{"memory/memory.high": "max", "memory/memory.low": strconv.Itoa(mem)})
		if got := readTrim(t, filepath.Join(root, parent, "memory.low")); got != strconv.Itoa(mem) {
			t.Errorf("parent memory.low = %s, want %d (the guaranteed container's)", got, mem)
		}
	} else {
		checkFiles(t, i, be, map[string]string{"memory/memory.soft_limit_in_bytes": soft})
		if n, _ := strconv.ParseUint(mfile(lc, "memory.soft_limit_in_bytes"), 10, 64); n < math.MaxInt64/2 {
			t.Errorf("guaranteed memory.soft_limit_in_bytes = %d, want none", n)
		}
	}
	if wf := f.IOWeightFile; wf != "" {
		for id, class := range map[string]isolator.QoSClass{lc: isolator.Guaranteed, be: isolator.BestEffort} {
			got := readTrim(t, filepath.Join(i.dir("blkio", i.Path(id)), wf))
			if want := strconv.FormatUint(IOWeight(wf, class), 10); got != want && got != "default "+want {
				t.Errorf("%s of %s = %q, want %s", wf, class, got, want)
			}
		}
	} else {
		t.Logf("no io weight file on this host (v1 needs CFQ or BFQ on the disk, v2 blk-iocost or BFQ)")
	}

	// oom_score_adj of a process already in the group: Recover rewrites it.
	dirs := groupDirs(i, be)
	if v2 {
		dirs = []string{i.dir("", i.Path(be))}
	}
	cmd, release := start(t, dirs, "sleep", "1000")
	release()
	if adj, err := OOMScoreAdj(cmd.Process.Pid); err != nil || adj != 0 {
		t.Fatalf("before recover: oom_score_adj %d, %v; want the test's 0", adj, err)
	}

	// The io throttle.
	dev := f.IODevices[0]
	throttleFile := func() string {
		if v2 {
			return readTrim(t, filepath.Join(i.dir("", i.Path(be)), "io.max"))
		}
		return readTrim(t, filepath.Join(i.dir("blkio", i.Path(be)), "blkio.throttle.write_bps_device"))
	}
	if err := i.ThrottleIO(ctx, be, IOLimit{WriteBPS: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	want := dev + " 1048576"
	if v2 {
		want = dev + " rbps=max wbps=1048576 riops=max wiops=max"
	}
	if got := throttleFile(); got != want {
		t.Errorf("throttled: %q, want %q", got, want)
	}
	// An Update keeps the throttle and moves the soft limit.
	if err := i.Update(ctx, be, isolator.Limits{MilliCPUs: 500, MemoryBytes: 2 * mem, Class: isolator.BestEffort}); err != nil {
		t.Fatal(err)
	}
	if got := throttleFile(); got != want {
		t.Errorf("after update: %q, want %q", got, want)
	}
	softFile := "memory/memory.soft_limit_in_bytes"
	if v2 {
		softFile = "memory/memory.high"
	}
	checkFiles(t, i, be, map[string]string{softFile: strconv.Itoa(2 * mem * 9 / 10 / pageSize * pageSize)})
	if err := i.ThrottleIO(ctx, be, IOLimit{}); err != nil {
		t.Fatal(err)
	}
	if got := throttleFile(); got != "" {
		t.Errorf("unthrottled: %q, want empty", got)
	}
	// The QoS controller's IO correction (qos.IOActuator) caps reads and
	// writes alike and lifts with 0. The io guard's throttle (ThrottleIO)
	// is kept apart: the group gets the tighter of the two, and either
	// lifting its own leaves the other's in force (the controller's lift
	// once erased the guard's throttle).
	v2max := func(r, w string) string { return dev + " rbps=" + r + " wbps=" + w + " riops=max wiops=max" }
	guard := func(w int64) func() error { return func() error { return i.ThrottleIO(ctx, be, IOLimit{WriteBPS: w}) } }
	ctl := func(b int64) func() error { return func() error { return i.SetIOLimit(ctx, be, b) } }
	for _, st := range []struct {
		what   string
		do     func() error
		v1, v2 string // v1: the write file; v2: io.max
	}{
		{"controller 1 MiB/s", ctl(1 << 20), dev + " 1048576", v2max("1048576", "1048576")},
		{"controller lifts", ctl(0), "", ""},
		{"guard 1 MiB/s write", guard(1 << 20), dev + " 1048576", v2max("max", "1048576")},
		{"controller 4 MiB/s beside it", ctl(4 << 20), dev + " 1048576", v2max("4194304", "1048576")},
		{"controller lifts: the guard's stays", ctl(0), dev + " 1048576", v2max("max", "1048576")},
		{"controller 2 MiB/s", ctl(2 << 20), dev + " 1048576", v2max("2097152", "1048576")},
		{"guard lifts: the controller's stays", guard(0), dev + " 2097152", v2max("2097152", "2097152")},
		{"both lifted", ctl(0), "", ""},
	} {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		want := st.v1
		if v2 {
			want = st.v2
		}
		if got := throttleFile(); got != want {
			t.Errorf("%s: %q, want %q", st.what, got, want)
		}
	}
	if err := i.SetIOLimit(ctx, be, -1); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetIOLimit -1: %v, want ErrInvalid", err)
	}

	// Recover: limits, soft limits and oom_score_adj rewritten, throttle lifted.
	if err := i.ThrottleIO(ctx, be, IOLimit{WriteBPS: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	j, err := New(Config{Parent: parent, IOPaths: []string{disk}})
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]isolator.Limits{
		lc: {MilliCPUs: 500, MemoryBytes: mem},
		be: {MilliCPUs: 500, MemoryBytes: 2 * mem, Class: isolator.BestEffort},
	}
	if err := j.Recover(ctx, known); err != nil {
		t.Fatal(err)
	}
	if adj, err := OOMScoreAdj(cmd.Process.Pid); err != nil || adj != 1000 {
		t.Errorf("after recover: oom_score_adj %d, %v; want 1000", adj, err)
	}
	if got := throttleFile(); got != "" {
		t.Errorf("after recover: throttle %q, want none (corrections do not survive a restart)", got)
	}
	if s, ok := j.Spec(be); !ok || s.OOMScoreAdj != 1000 || s.MemorySoft == 0 || !s.IOCap().IsZero() {
		t.Errorf("recovered record %+v, %v", s, ok)
	}
	if v2 {
		if got := readTrim(t, filepath.Join(root, parent, "memory.low")); got != strconv.Itoa(mem) {
			t.Errorf("parent memory.low after recover = %s, want %d", got, mem)
		}
		killAll(t, dirs)
		if err := j.Cleanup(ctx, lc); err != nil {
			t.Fatal(err)
		}
		if got := readTrim(t, filepath.Join(root, parent, "memory.low")); got != "0" {
			t.Errorf("parent memory.low after the guaranteed container's cleanup = %s, want 0", got)
		}
	}
}
