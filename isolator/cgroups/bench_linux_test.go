package cgroups

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// BenchmarkUpdate measures a live resize (cpu shares + memory limit, memsw
// kept in step) of a group with a process in it, against containerd's
// cgroup1 Update of the same values on a twin group, interleaved in the
// same run. It reports p50/p90 in µs and containerd's p50 over brim's.
func BenchmarkUpdate(b *testing.B) {
	parent := testutil.NewCgroupParent(b)
	skipOnV2(b)
	testutil.Require(b, exists(root+"/memory") && !exists(root+"/cgroup.controllers"), "needs a cgroup v1 (or hybrid) host")
	i, err := New(Config{Parent: parent})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	limits := [2]isolator.Limits{{MilliCPUs: 1000, MemoryBytes: 64 << 20}, {MilliCPUs: 1500, MemoryBytes: 96 << 20}}
	if err := i.Prepare(ctx, "brim", limits[0], nil); err != nil {
		b.Fatal(err)
	}
	// containerd's Update cannot grow memory and memsw in one call (EINVAL,
	// PLATFORM.md): its group keeps memsw unlimited and gets the limit only.
	if err := i.Prepare(ctx, "ctrd", isolator.Limits{MilliCPUs: 1000}, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = i.Cleanup(ctx, "brim")
		_ = i.Cleanup(ctx, "ctrd")
	})
	for _, id := range []string{"brim", "ctrd"} {
		_, run := start(b, groupDirs(i, id), "sleep", "3600")
		run()
	}
	cg, err := cgroup1.Load(cgroup1.StaticPath(i.Path("ctrd")))
	if err != nil {
		b.Fatal(err)
	}
	var res [2]*specs.LinuxResources
	for k, l := range limits {
		shares, mem := Shares(l), l.MemoryBytes
		res[k] = &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: &shares}, Memory: &specs.LinuxMemory{Limit: &mem}}
	}

	ours := make([]time.Duration, 0, b.N)
	theirs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		k := (n + 1) % 2
		t0 := time.Now()
		if err := i.Update(ctx, "brim", limits[k]); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := cg.Update(res[k]); err != nil {
			b.Fatal(err)
		}
		theirs = append(theirs, time.Since(t1))
		ours = append(ours, t1.Sub(t0))
	}
	b.StopTimer()
	p50, p90 := percentile(ours, 50), percentile(ours, 90)
	c50 := percentile(theirs, 50)
	b.ReportMetric(float64(p50)/1e3, "p50-µs")
	b.ReportMetric(float64(p90)/1e3, "p90-µs")
	b.ReportMetric(float64(percentile(ours, 99))/1e3, "p99-µs")
	b.ReportMetric(float64(c50)/1e3, "containerd-p50-µs")
	b.ReportMetric(float64(percentile(theirs, 99))/1e3, "containerd-p99-µs")
	b.ReportMetric(float64(c50)/float64(p50), "containerd/brim")
	last := limits[b.N%2]
	checkFiles(b, i, "brim", map[string]string{
		"cpu/cpu.shares":               strconv.FormatUint(Shares(last), 10),
		"memory/memory.limit_in_bytes": strconv.FormatInt(last.MemoryBytes, 10),
	})
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}
