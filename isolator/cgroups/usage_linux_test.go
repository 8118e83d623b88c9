package cgroups

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// cpuTime returns the CPU time of the calling thread.
func cpuTime() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// openFDs counts the test process's open descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func v1Dirs(i *Isolator, id string) map[string]string {
	dirs := map[string]string{}
	for _, c := range []string{"cpu", "cpuacct", "memory", "pids"} {
		if exists(filepath.Join(i.root, c)) {
			dirs[c] = i.dir(c, i.Path(id))
		}
	}
	return dirs
}

// TestUsageDescriptors checks Usage's open descriptors: it reports what
// reading the files by path reports (limits from the spec included), keeps
// working when the group is removed and made again under its descriptors,
// says ErrNotFound once the group is gone, and Cleanup closes them.
func TestUsageDescriptors(t *testing.T) {
	var i *Isolator
	var parent string
	if testutil.CgroupV2() {
		i, parent = newV2(t)
	} else {
		i, parent = newV1(t)
	}
	readByPath := func(st *isolator.Statistics) error {
		if i.Version() == V2 {
			return ReadV2Stats(filepath.Join(root, i.Path("d")), i.Features(), st)
		}
		return ReadV1Stats(v1Dirs(i, "d"), st)
	}
	ctx := context.Background()
	// Not a whole number of pages: the kernel rounds the limit down.
	limits := isolator.Limits{MilliCPUs: 500, MemoryBytes: 100<<20 + 1000, Pids: 32}
	if err := i.Prepare(ctx, "d", limits, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = i.Cleanup(context.Background(), "d") })

	before := openFDs(t)
	var st isolator.Statistics
	if err := i.Usage(ctx, "d", &st); err != nil {
		t.Fatal(err)
	}
	// One per stat file: v1 has ten or more here; v2 nine (cpu.stat,
	// memory.current/stat/peak/events, pids.current, three pressure files;
	// memory.max and pids.max come from the spec).
	want := 10
	if i.Version() == V2 {
		want = 9
	}
	if opened := openFDs(t) - before; opened < want {
		t.Fatalf("%d descriptors kept open, want one per stat file (%d)", opened, want)
	}
	var byPath isolator.Statistics
	if err := readByPath(&byPath); err != nil {
		t.Fatal(err)
	}
	if st.MemLimitBytes != byPath.MemLimitBytes || st.PidsLimit != byPath.PidsLimit || st.MemLimitBytes == 0 || st.PidsLimit != 32 {
		t.Fatalf("limits from the spec %d/%d, from the files %d/%d", st.MemLimitBytes, st.PidsLimit, byPath.MemLimitBytes, byPath.PidsLimit)
	}
	if !st.HasCPU || !st.HasMemory || !st.HasPids || st.MemLimitHit != byPath.MemLimitHit || st.Pids != byPath.Pids {
		t.Fatalf("by descriptors %+v, by path %+v", st, byPath)
	}

	// Another isolator on the same parent removes the group and makes it
	// again: the first one's descriptors now point at removed files.
	other, err := New(Config{Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Cleanup(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if err := other.Prepare(ctx, "d", limits, nil); err != nil {
		t.Fatal(err)
	}
	st = isolator.Statistics{}
	if err := i.Usage(ctx, "d", &st); err != nil {
		t.Fatalf("usage after the group was made again: %v", err)
	}
	if !st.HasMemory || st.MemLimitBytes != byPath.MemLimitBytes {
		t.Fatalf("usage after the group was made again: %+v", st)
	}

	// Removed behind its back: ErrNotFound, descriptors released.
	if err := other.Cleanup(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if err := i.Usage(ctx, "d", &st); !errors.Is(err, isolator.ErrNotFound) {
		t.Fatalf("usage of a removed group: %v, want ErrNotFound", err)
	}
	if n := openFDs(t); n != before {
		t.Fatalf("%d descriptors open after the group went, %d before", n, before)
	}

	// Cleanup closes them.
	if err := i.Prepare(ctx, "d", limits, nil); err != nil {
		t.Fatal(err)
	}
	if err := i.Usage(ctx, "d", &st); err != nil {
		t.Fatal(err)
	}
	if err := i.Cleanup(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if n := openFDs(t); n != before {
		t.Fatalf("%d descriptors open after Cleanup, %d before", n, before)
	}
	if err := i.Usage(ctx, "d", &st); !errors.Is(err, isolator.ErrNotFound) {
		t.Fatalf("usage after Cleanup: %v, want ErrNotFound", err)
	}
}

// BenchmarkUsage measures Usage of one v1 group (with a unified directory
// for PSI, as libcontainer makes on a hybrid host) through its open
// descriptors against reading the same files by path (ReadV1Stats and
// ReadPressure, what Usage did before), interleaved in the same run. It
// reports both in µs of CPU per call and the ratio paths/descriptors.
func BenchmarkUsage(b *testing.B) {
	parent := testutil.NewCgroupParent(b)
	skipOnV2(b)
	testutil.Require(b, exists(filepath.Join(root, "memory")) && !exists(filepath.Join(root, "cgroup.controllers")), "needs a cgroup v1 (or hybrid) host")
	i, err := New(Config{Parent: parent})
	if err != nil {
		b.Fatal(err)
	}
	// Thread CPU time: lock the goroutine to its thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx := context.Background()
	if err := i.Prepare(ctx, "b", isolator.Limits{MilliCPUs: 500, MemoryBytes: 64 << 20, Pids: 32}, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = i.Cleanup(context.Background(), "b") })
	if i.unified != "" {
		if err := os.MkdirAll(filepath.Join(i.unified, i.Path("b")), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	dirs := v1Dirs(i, "b")
	var fast, slow time.Duration
	b.ReportAllocs()
	for b.Loop() {
		var st isolator.Statistics
		c0 := cpuTime()
		if err := i.Usage(ctx, "b", &st); err != nil {
			b.Fatal(err)
		}
		c1 := cpuTime()
		st = isolator.Statistics{}
		if err := ReadV1Stats(dirs, &st); err != nil {
			b.Fatal(err)
		}
		if i.unified != "" {
			if err := ReadPressure(filepath.Join(i.unified, i.Path("b")), &st); err != nil {
				b.Fatal(err)
			}
		}
		fast, slow = fast+c1-c0, slow+cpuTime()-c1
	}
	b.ReportMetric(float64(fast.Nanoseconds())/float64(b.N)/1e3, "fd-cpu-us/op")
	b.ReportMetric(float64(slow.Nanoseconds())/float64(b.N)/1e3, "path-cpu-us/op")
	b.ReportMetric(float64(slow)/float64(max(fast, 1)), "path/fd")
}
