package monitor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
	"golang.org/x/sys/unix"
)

// cgroupSource is a Source over real container groups made by the cgroups
// isolator (without processes): the agent's Source minus the
// containerizer.
type cgroupSource struct {
	iso *cgroups.Isolator
	ids []string
}

func (s *cgroupSource) Containers(context.Context) ([]ContainerInfo, error) {
	out := make([]ContainerInfo, len(s.ids))
	for i, id := range s.ids {
		out[i] = ContainerInfo{ID: id, CgroupPath: s.iso.Path(id), Limits: isolator.Limits{MilliCPUs: 100, MemoryBytes: 64 << 20}}
	}
	return out, nil
}

func (s *cgroupSource) Usage(ctx context.Context, id string) (*isolator.Statistics, error) {
	var st isolator.Statistics
	if err := s.iso.Usage(ctx, id, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

func newCgroupSource(tb testing.TB, n int) *cgroupSource {
	tb.Helper()
	iso, err := cgroups.New(cgroups.Config{Parent: testutil.NewCgroupParent(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	s := &cgroupSource{iso: iso}
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("c%03d", i)
		if err := iso.Prepare(ctx, id, isolator.Limits{MilliCPUs: 100, CPUQuota: true, MemoryBytes: 64 << 20, Pids: 100}, &isolator.Launch{}); err != nil {
			tb.Fatal(err)
		}
		s.ids = append(s.ids, id)
	}
	tb.Cleanup(func() {
		for _, id := range s.ids {
			_ = iso.Cleanup(context.Background(), id)
		}
	})
	return s
}

func TestSampleRealCgroups(t *testing.T) {
	testutil.RequireRoot(t)
	m := New(newCgroupSource(t, 3), Config{}, nil)
	ctx := context.Background()
	for range 2 {
		if err := m.Sample(ctx); err != nil {
			t.Fatal(err)
		}
	}
	u := m.Usage()
	if len(u.Containers) != 3 || u.Host.NumCPU < 1 || u.Host.MemTotalBytes == 0 {
		t.Fatalf("usage: %d containers, host %+v", len(u.Containers), u.Host)
	}
	for _, c := range u.Containers {
		if !c.Latest.HasCPU || !c.Latest.HasMemory || c.History.Len() != 2 || c.Latest.MemLimitBytes != 64<<20 {
			t.Fatalf("%s: %+v", c.ID, c.Latest.Statistics)
		}
	}
}

func cpuTime() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSampleCgroups100 measures one sampling round over 100 real
// container groups (cgroup files read through the cgroups isolator, plus
// the gopsutil host sample) and reports the monitor's cpu cost at the
// default 1 s interval as a percentage of one core (target ≤ 1 %).
func BenchmarkSampleCgroups100(b *testing.B) {
	testutil.RequireRoot(b)
	m := New(newCgroupSource(b, 100), Config{}, nil)
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if err := m.Sample(ctx); err != nil {
			b.Fatal(err)
		}
	}
	perRound := (cpuTime() - cpu0) / time.Duration(b.N)
	b.ReportMetric(float64(perRound.Microseconds()), "cpu-us/round")
	b.ReportMetric(perRound.Seconds()*100, "pct-core-at-1Hz")
}
