package bpf

import (
	"errors"
	"github.com/brimnode/brim/internal/errdefs"
	"math"
	"time"
)

var (
	// ErrNotSupported is wrapped by errors saying BPF cannot be used on this
	// host: no kernel BTF, no permission, a program or map the kernel
	// rejects, or a platform without generated objects.
	// It is internal/errdefs.ErrNotSupported, the one "not supported".
	ErrNotSupported = errdefs.ErrNotSupported
	// ErrNotTracked is returned for a cgroup id that is not tracked.
	ErrNotTracked = errors.New("cgroup not tracked")
	// ErrFull is returned by Track when every slot is in use
	// (Options.MaxCgroups).
	ErrFull = errors.New("no free cgroup slot")
	// ErrClosed is returned by a Monitor or Fallback used after Close.
	ErrClosed = errors.New("closed")
)

// Sources, as reported by Source and exported by the monitor's metric.
const (
	SourceEBPF      = "ebpf"
	SourceSchedstat = "schedstat"
)

// Buckets is the number of log2 buckets of a Histogram.
const Buckets = 32

// Histogram counts run-queue waits by duration: bucket i counts waits in
// [2^i, 2^(i+1)) ns (bucket 0 also counts 0 ns), the last bucket everything
// from 2^31 ns (2.1 s) up. Values are cumulative; take deltas with Sub. A
// Histogram is a value: safe to copy and to read concurrently.
type Histogram [Buckets]uint64

// Count returns the number of waits in h.
func (h Histogram) Count() uint64 {
	var n uint64
	for _, c := range h {
		n += c
	}
	return n
}

// Sub returns h - prev bucket by bucket, clamped at zero (a counter that
// went backwards, e.g. a slot reused, yields zero rather than a huge value).
func (h Histogram) Sub(prev Histogram) Histogram {
	var d Histogram
	for i := range h {
		if h[i] > prev[i] {
			d[i] = h[i] - prev[i]
		}
	}
	return d
}

// Add adds o into h.
func (h *Histogram) Add(o Histogram) {
	for i := range h {
		h[i] += o[i]
	}
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of the waits in h,
// interpolated geometrically inside its bucket; 0 when h is empty. Its
// resolution is the bucket width: the result is within a factor of 2 of the
// true value.
func (h Histogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	q = math.Max(0, math.Min(1, q))
	rank := q * float64(n)
	var cum float64
	for i, c := range h {
		if c == 0 {
			continue
		}
		if cum+float64(c) >= rank {
			frac := (rank - cum) / float64(c)
			lo := math.Ldexp(1, i)
			return time.Duration(lo * math.Exp2(frac))
		}
		cum += float64(c)
	}
	return time.Duration(math.Ldexp(1, Buckets)) // unreachable: rank ≤ n
}

// CgroupStats are one cgroup's cumulative scheduler counters since it was
// tracked. Fallback leaves RunQueue and Wakeups zero: schedstat has sums,
// not distributions.
type CgroupStats struct {
	// RunQueue is the distribution of run-queue waits: from a task being
	// queued runnable (woken, created, preempted) to it getting a CPU.
	RunQueue Histogram
	// RunDelay is the sum of the waits.
	RunDelay time.Duration
	// Waits is the number of waits.
	Waits uint64
	// OnCPU is the CPU time of the cgroup's tasks (what cpuacct charges).
	OnCPU time.Duration
	// Wakeups counts sched_wakeup and sched_wakeup_new of its tasks.
	Wakeups uint64
	// Switches counts the times one of its tasks got a CPU.
	Switches uint64
}

// Sub returns the change from prev to s: the statistics of one interval.
func (s CgroupStats) Sub(prev CgroupStats) CgroupStats {
	sub := func(a, b uint64) uint64 {
		if a > b {
			return a - b
		}
		return 0
	}
	return CgroupStats{
		RunQueue: s.RunQueue.Sub(prev.RunQueue),
		RunDelay: time.Duration(sub(uint64(s.RunDelay), uint64(prev.RunDelay))),
		Waits:    sub(s.Waits, prev.Waits),
		OnCPU:    time.Duration(sub(uint64(s.OnCPU), uint64(prev.OnCPU))),
		Wakeups:  sub(s.Wakeups, prev.Wakeups),
		Switches: sub(s.Switches, prev.Switches),
	}
}

// MeanRunDelay returns RunDelay / Waits, 0 without waits. It is the
// latency figure both sources give.
func (s CgroupStats) MeanRunDelay() time.Duration {
	if s.Waits == 0 {
		return 0
	}
	return s.RunDelay / time.Duration(s.Waits)
}

// OOMEvent is one OOM kill: the victim chosen by the kernel and its cgroups.
type OOMEvent struct {
	// CgroupID is the victim's cgroup in the hierarchy Track keys by (cpu on
	// v1, unified on v2).
	CgroupID uint64
	// MemCgroupID is the victim's memory cgroup (the memory hierarchy on v1;
	// equal to CgroupID on v2).
	MemCgroupID uint64
	// Pid is the victim's process (thread group) id, Tid its thread id.
	Pid, Tid int
	// UID is the victim's user id.
	UID uint32
	// Comm is the victim's command name.
	Comm string
	// Time is when the kernel marked the victim.
	Time time.Time
}

// ProgramStats are the kernel's run-time statistics of one BPF program
// (kernel.bpf_stats_enabled; see Options.RunTimeStats).
type ProgramStats struct {
	// Name is the program's name (sched_switch, sched_wakeup, ...).
	Name string
	// RunCount is how many times it ran.
	RunCount uint64
	// RunTime is its total run time.
	RunTime time.Duration
}

// PerRun returns the mean cost of one run, 0 if it never ran.
func (p ProgramStats) PerRun() time.Duration {
	if p.RunCount == 0 {
		return 0
	}
	return p.RunTime / time.Duration(p.RunCount)
}

// Options configure Load.
type Options struct {
	// MaxCgroups bounds how many cgroups can be tracked at once
	// (default 1024). Memory: 320 bytes per cgroup per possible CPU.
	MaxCgroups int
	// RunTimeStats enables kernel.bpf_stats_enabled while the Monitor is
	// open, so Stats reports run counts and times. It costs two clock reads
	// per program run: enable it to measure, not in production.
	RunTimeStats bool
	// CgroupRoot is where the cgroup hierarchies are mounted
	// (default /sys/fs/cgroup).
	CgroupRoot string
}

const defaultCgroupRoot = "/sys/fs/cgroup"

// Interval turns the cumulative statistics of successive Reads into
// per-interval ones. It is not safe for concurrent use; the zero value is
// ready.
type Interval struct {
	prev map[uint64]CgroupStats
}

// Next stores in dst (cleared first) each cgroup's change since the previous
// call — all of its counters the first time it appears, since counters start
// at zero when a cgroup is tracked — and remembers cur. Cgroups absent from
// cur are forgotten.
func (iv *Interval) Next(cur, dst map[uint64]CgroupStats) {
	clear(dst)
	if iv.prev == nil {
		iv.prev = make(map[uint64]CgroupStats, len(cur))
	}
	for id, s := range cur {
		dst[id] = s.Sub(iv.prev[id])
	}
	clear(iv.prev)
	for id, s := range cur {
		iv.prev[id] = s
	}
}

// CumulativeBuckets returns h in Prometheus form: upper bound in seconds
// (2^(i+1) ns) -> number of waits at or below it, for every bucket but the
// last (whose bound is +Inf, implied by the total count). Pass it to
// prometheus.NewConstHistogram with h.Count() and the sum of waits.
func (h Histogram) CumulativeBuckets() map[float64]uint64 {
	out := make(map[float64]uint64, Buckets-1)
	var cum uint64
	for i := 0; i < Buckets-1; i++ {
		cum += h[i]
		out[math.Ldexp(1, i+1)/1e9] = cum
	}
	return out
}
