package monitor

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/bpf"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// rqSource lists cgroups made by the test as containers; their usage is
// empty (the run-queue signal is what the test looks at).
type rqSource struct{ infos []ContainerInfo }

func (s *rqSource) Containers(context.Context) ([]ContainerInfo, error) { return s.infos, nil }

func (s *rqSource) Usage(context.Context, string) (*isolator.Statistics, error) {
	return &isolator.Statistics{}, nil
}

// rqGroup makes the cgroup parent/name in the cpu and cpuacct hierarchies
// with the given cpu.shares.
func rqGroup(t *testing.T, parent, name string, shares int) string {
	t.Helper()
	p := parent + "/" + name
	for _, ctrl := range []string{"cpu", "cpuacct"} {
		if err := os.MkdirAll(testutil.CgroupDir(ctrl, p), 0o755); err != nil {
			t.Fatalf("create cgroup: %v", err)
		}
	}
	testutil.SetCPUShares(t, p, uint64(shares))
	return p
}

// rqHog starts a shell busy loop pinned to cpu inside cgroup p (it joins
// the cpu and cpuacct groups before looping) and kills it on cleanup.
func rqHog(t *testing.T, p string, cpu int) {
	t.Helper()
	cmd := exec.Command("taskset", "-c", strconv.Itoa(cpu), "sh", "-c",
		`for f; do echo $$ > "$f" || exit 1; done; while :; do :; done`, "sh",
		filepath.Join(testutil.CgroupDir("cpu", p), "cgroup.procs"),
		filepath.Join(testutil.CgroupDir("cpuacct", p), "cgroup.procs"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start hog: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
}

// TestRunQueueSignalContention runs two CPU hogs on one CPU in cgroups with
// cpu.shares 1024 and 64 and samples them with two monitors, one over the
// eBPF monitor and one over the schedstat fallback: both must report the
// low-share container's run-queue p99 clearly above the high-share one's
// (median over the sampled intervals; ordering only, with a generous
// margin, as the machine is shared).
func TestRunQueueSignalContention(t *testing.T) {
	testutil.RequireRoot(t)
	ebpfSrc, err := OpenRunQueueSource(false, bpf.Options{MaxCgroups: 16}, nil)
	if err != nil {
		t.Fatalf("open ebpf source: %v", err)
	}
	t.Cleanup(func() { _ = ebpfSrc.Close() })
	if ebpfSrc.Source() != bpf.SourceEBPF {
		t.Fatalf("source %q, want ebpf on this host", ebpfSrc.Source())
	}
	fbSrc, err := OpenRunQueueSource(true, bpf.Options{}, nil)
	if err != nil {
		t.Fatalf("open fallback: %v", err)
	}
	t.Cleanup(func() { _ = fbSrc.Close() })
	if fbSrc.Source() != bpf.SourceSchedstat {
		t.Fatalf("source %q with bpf disabled", fbSrc.Source())
	}

	parent := testutil.NewCgroupParent(t)
	src := &rqSource{infos: []ContainerInfo{
		{ID: "high", CgroupPath: rqGroup(t, parent, "high", 1024)},
		{ID: "low", CgroupPath: rqGroup(t, parent, "low", 64)},
	}}
	// Others' tasks compete with ours in the root group: weigh the parent
	// more so the contention measured is mostly high vs low.
	testutil.SetCPUShares(t, parent, 8192)
	sigs := map[string]*RunQueueSignal{"ebpf": NewRunQueueSignal(ebpfSrc), "schedstat": NewRunQueueSignal(fbSrc)}
	mons := map[string]*Monitor{}
	for name, sig := range sigs {
		mons[name] = New(src, Config{Host: NoHost, Signals: []SignalSource{sig}}, nil)
	}
	ctx := context.Background()
	sampleAll := func() {
		t.Helper()
		for name, m := range mons {
			if err := m.Sample(ctx); err != nil {
				t.Fatalf("%s: sample: %v", name, err)
			}
		}
	}
	sampleAll() // tracks the cgroups
	rqHog(t, src.infos[0].CgroupPath, 1)
	rqHog(t, src.infos[1].CgroupPath, 1)

	// Collect the p99s of intervals in which both containers waited 5 times
	// or more; stop at 5 such intervals per source.
	p99s := map[string]map[string][]time.Duration{}
	prevCount := map[string]map[string]uint64{}
	for name := range mons {
		p99s[name] = map[string][]time.Duration{}
		prevCount[name] = map[string]uint64{}
	}
	enough := func() bool {
		for name := range mons {
			if len(p99s[name]["low"]) < 5 {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(120 * time.Second); !enough(); {
		if time.Now().After(deadline) {
			t.Fatalf("too few busy intervals after 120 s: %v", p99s)
		}
		time.Sleep(time.Second)
		sampleAll()
		for name, m := range mons {
			u := m.Usage()
			rqs := map[string]*LatencySummary{}
			for _, c := range u.Containers {
				rqs[c.ID] = c.Latest.RunQueue
			}
			busy := true
			for id, rq := range rqs {
				if rq == nil {
					t.Fatalf("%s: %s has no run-queue summary", name, id)
				}
				busy = busy && rq.Count >= prevCount[name][id]+5
				prevCount[name][id] = rq.Count
			}
			if !busy {
				continue
			}
			for id, rq := range rqs {
				p99s[name][id] = append(p99s[name][id], rq.P99)
				if rq.Source != sigs[name].Source() {
					t.Fatalf("%s: %s source %q", name, id, rq.Source)
				}
			}
		}
	}
	median := func(ds []time.Duration) time.Duration {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	var errs []error
	for name := range mons {
		hi, lo := median(p99s[name]["high"]), median(p99s[name]["low"])
		t.Logf("%s (%s): p99 median high %v low %v (ratio %.1f); intervals high %v low %v",
			name, sigs[name].Source(), hi, lo, float64(lo)/float64(max(hi, 1)), p99s[name]["high"], p99s[name]["low"])
		if lo < 2*hi {
			errs = append(errs, errors.New(name+": low-share p99 not clearly above high-share p99"))
		}
	}
	for _, m := range mons {
		for _, c := range m.Usage().Containers {
			if c.Latest.OnCPU == 0 {
				t.Errorf("%s: no on-cpu time", c.ID)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRunQueueSignal100 measures the cost the run-queue signal adds to
// a sampling round over 100 real container groups (made by the cgroups
// isolator, no processes), with the eBPF monitor and with the schedstat
// fallback, against a round without it, interleaved in the same run. It
// reports each in µs of process CPU per round and the signals' added cost
// as a percentage of one core at the default 1 s interval.
func BenchmarkRunQueueSignal100(b *testing.B) {
	testutil.RequireRoot(b)
	src := newCgroupSource(b, 100)
	ebpfSrc, err := OpenRunQueueSource(false, bpf.Options{MaxCgroups: 128}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ebpfSrc.Close() })
	fbSrc, err := OpenRunQueueSource(true, bpf.Options{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = fbSrc.Close() })
	mons := []*Monitor{
		New(src, Config{Host: NoHost}, nil),
		New(src, Config{Host: NoHost, Signals: []SignalSource{NewRunQueueSignal(ebpfSrc)}}, nil),
		New(src, Config{Host: NoHost, Signals: []SignalSource{NewRunQueueSignal(fbSrc)}}, nil),
	}
	ctx := context.Background()
	for _, m := range mons { // first rounds open files and track cgroups
		if err := m.Sample(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var cpu [3]time.Duration
	for b.Loop() {
		for j, m := range mons {
			c0 := cpuTime()
			if err := m.Sample(ctx); err != nil {
				b.Fatal(err)
			}
			cpu[j] += cpuTime() - c0
		}
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) / 1e3 }
	b.ReportMetric(us(cpu[0]), "base-cpu-us/round")
	b.ReportMetric(us(cpu[1]), "ebpf-cpu-us/round")
	b.ReportMetric(us(cpu[2]), "schedstat-cpu-us/round")
	// µs per 1 s round / 1e6 µs × 100 %.
	b.ReportMetric((us(cpu[1])-us(cpu[0]))/1e4, "ebpf-added-pct-core-at-1Hz")
	b.ReportMetric((us(cpu[2])-us(cpu[0]))/1e4, "schedstat-added-pct-core-at-1Hz")
}
