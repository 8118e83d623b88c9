package estimator

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/monitor"
)

// burnEnv makes the test binary burn cpu instead of running tests (the
// busy phase of the latency-critical container).
const burnEnv = "BRIM_ESTIMATOR_TEST_BURN"

func TestMain(m *testing.M) {
	if os.Getenv(burnEnv) != "" {
		for x := uint64(1); ; x = x*6364136223846793005 + 1442695040888963407 {
			if x == 0 {
				os.Exit(1)
			}
		}
	}
	os.Exit(m.Run())
}

type isoSource struct {
	iso *cgroups.Isolator
	id  string
}

func (s isoSource) Containers(context.Context) ([]monitor.ContainerInfo, error) {
	return []monitor.ContainerInfo{{ID: s.id, CgroupPath: s.iso.Path(s.id), Limits: isolator.Limits{MilliCPUs: 1000, MemoryBytes: 256 << 20}}}, nil
}

func (s isoSource) Usage(ctx context.Context, id string) (*isolator.Statistics, error) {
	var st isolator.Statistics
	if err := s.iso.Usage(ctx, id, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// TestUsageEstimatorOnRealCgroups samples a real container group: while its
// process is idle the usage estimator offers most of its allocation; once
// it turns busy, the estimate forwarded to the master shrinks within two
// check intervals (counted in samples, not in wall time).
func TestUsageEstimatorOnRealCgroups(t *testing.T) {
	testutil.RequireRoot(t)
	iso, err := cgroups.New(cgroups.Config{Parent: testutil.NewCgroupParent(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := iso.Prepare(ctx, "lc", isolator.Limits{MilliCPUs: 1000, MemoryBytes: 256 << 20}, &isolator.Launch{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = iso.Cleanup(context.Background(), "lc") })
	mon := monitor.New(isoSource{iso: iso, id: "lc"}, monitor.Config{
		Host: monitor.NoHost, Total: monitor.Capacity{MilliCPUs: 2000, MemoryBytes: 1 << 30},
	}, nil)
	est, err := NewUsage(Options{"min-samples": "5", "cap": "1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fwd := NewForwarder(ForwarderConfig{})
	const checkEvery = 5 // samples per check interval
	var last Estimate
	check := func() bool {
		e, err := est.Estimate(ctx, mon.Usage())
		if err != nil {
			t.Fatal(err)
		}
		last = e
		return fwd.Decide(e, time.Now())
	}
	sample := func(n int) {
		for range n {
			time.Sleep(100 * time.Millisecond)
			if err := mon.Sample(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Idle: the estimate grows from nothing (too few samples: predicted at
	// the allocation) to most of the allocation.
	_ = mon.Sample(ctx)
	if check(); last.Revocable.CPUs() > 0 {
		t.Fatalf("offered before any history: %s", last.Revocable)
	}
	sample(2 * checkEvery)
	check()
	idle := last.Revocable.CPUs().Float64()
	if idle < 0.5 {
		t.Fatalf("idle estimate %.3f cpus, want most of 1 − margin 0.1\n%s", idle, last.Explanation)
	}

	// Busy: a process burning cpu in the group.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), burnEnv+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for _, ctrl := range []string{"cpu", "cpuacct", "memory", "pids", "freezer"} {
		dir := filepath.Join(testutil.CgroupRoot, ctrl, iso.Path("lc"))
		if _, err := os.Stat(dir); err == nil {
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 1; i <= 2; i++ {
		sample(checkEvery)
		if check() {
			fwdEst, _, _ := fwd.Forwarded()
			if got := fwdEst.Revocable.CPUs().Float64(); got < idle {
				t.Logf("check %d after turning busy: forwarded %.3f cpus (idle %.3f)\n%s", i, got, idle, last.Explanation)
				return
			}
		}
	}
	t.Fatalf("estimate not shrunk within two check intervals: idle %.3f, now %.3f\n%s", idle, last.Revocable.CPUs().Float64(), last.Explanation)
}
