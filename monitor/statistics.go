package monitor

import (
	"fmt"
	"github.com/brimnode/brim/internal/errdefs"
	"time"

	"github.com/brimnode/brim/isolator"
)

var (
	// ErrNotFound is returned for a container the monitor does not know.
	// It wraps internal/errdefs.ErrContainerNotFound, the one "container
	// not found", and stays narrower itself (not sampled yet).
	ErrNotFound = fmt.Errorf("%w in monitor", errdefs.ErrContainerNotFound)
	// ErrNotSupported is returned when this platform cannot provide a figure
	// (internal/errdefs.ErrNotSupported, the one "not supported").
	ErrNotSupported = errdefs.ErrNotSupported
)

// LatencySummary summarises a latency distribution measured over the last
// sample interval (run-queue latency from the eBPF monitor or schedstat, or
// a latency the application reports through the agent API).
type LatencySummary struct {
	P50, P99, P999 time.Duration
	// Source names who measured it: "ebpf", "schedstat", "app".
	Source string
	// Measured is when the summary was taken (for staleness).
	Measured time.Time

	// Optional cumulative histogram since the container was first seen, in
	// Prometheus form (exported as brim_runqueue_latency_seconds when set):
	// upper bound in seconds → waits at or below it (+Inf implied by
	// Count), the number of waits and their sum. bpf.Histogram's
	// CumulativeBuckets gives Buckets.
	Buckets map[float64]uint64
	Count   uint64
	Sum     time.Duration
}

// Statistics is one sample of a container: what its isolators measure plus
// the signals other providers add. Samples are values; the pointer fields
// point to immutable summaries and may be shared between copies.
type Statistics struct {
	isolator.Statistics

	// RunQueue is the container's run-queue (scheduling) latency over the
	// last interval; nil unless a SignalSource provides it.
	RunQueue *LatencySummary
	// OnCPU is the container's cumulative on-cpu time as measured by the
	// eBPF monitor; zero without it.
	OnCPU time.Duration
	// AppLatency is the latest latency the application reported through the
	// agent API (Monitor.ReportLatency); nil when none is fresh.
	AppLatency *LatencySummary
}

// ContainerInfo describes a container as the Source lists it.
type ContainerInfo struct {
	ID   string
	Name string
	// CgroupPath is the container's cgroup path ("/brim/<id>"); it becomes
	// the cAdvisor-style "id" label. Empty means the ID is used.
	CgroupPath string
	// Limits is the container's allocation.
	Limits isolator.Limits
	// Revocable is true for containers running on revocable resources.
	Revocable bool
	StartedAt time.Time
	// Tasks are the IDs of the tasks running in the container.
	Tasks  []string
	Labels map[string]string
	// Stopping: a kill of the container is under way (signalled, not yet
	// exited). Guards and QoS controllers leave it alone: a freeze would
	// stop its exit, and evicting it again frees nothing more.
	Stopping bool
}

// Capacity is an amount of the two resources estimators and controllers
// reason about.
type Capacity struct {
	MilliCPUs   int64
	MemoryBytes int64
}

// HostStatistics are node-wide figures.
type HostStatistics struct {
	Timestamp time.Time
	NumCPU    int
	// CPUBusyFraction is the fraction (0..1) of all cpus that were busy
	// (not idle, not iowait) since the previous host sample.
	CPUBusyFraction float64
	// Cumulative cpu times of all cpus, seconds.
	CPUUserSeconds, CPUSystemSeconds, CPUIdleSeconds, CPUIOWaitSeconds, CPUStealSeconds float64
	Load1, Load5, Load15                                                                float64
	MemTotalBytes, MemAvailableBytes, MemUsedBytes                                      uint64
	// CPUPressure is the host's cpu pressure (/proc/pressure/cpu), valid
	// when HasCPUPressure (kernels with PSI).
	HasCPUPressure bool
	CPUPressure    isolator.PSI
}

// ContainerUsage is one container in a Usage snapshot.
type ContainerUsage struct {
	ContainerInfo
	// Latest is the newest sample (zero, with HasCPU false, before the first).
	Latest Statistics
	// History holds the recent samples, oldest first. It keeps growing
	// after the snapshot was taken; read it with Samples or Last. Never nil
	// in a snapshot from Monitor.Usage.
	History *Ring
}

// Usage is a snapshot of the node: every container's allocation, latest
// statistics, history, tasks and whether it is revocable, the node's total
// resources and host figures (Mesos's ResourceUsage).
type Usage struct {
	Timestamp  time.Time
	Total      Capacity
	Host       HostStatistics
	Containers []ContainerUsage
}

// Allocated returns the sum of the allocations of the revocable or the
// non-revocable containers.
func (u *Usage) Allocated(revocable bool) Capacity {
	var c Capacity
	for i := range u.Containers {
		cu := &u.Containers[i]
		if cu.Revocable != revocable {
			continue
		}
		c.MilliCPUs += cu.Limits.MilliCPUs
		c.MemoryBytes += cu.Limits.MemoryBytes
	}
	return c
}

// Container returns the container with id, or nil.
func (u *Usage) Container(id string) *ContainerUsage {
	for i := range u.Containers {
		if u.Containers[i].ID == id {
			return &u.Containers[i]
		}
	}
	return nil
}

// CPURate returns the cpus used between two samples of one container
// (1.0 = one cpu fully busy). ok is false when the samples cannot be
// compared (no cpu figures, out of order, counter reset).
func CPURate(prev, cur *Statistics) (cpus float64, ok bool) {
	if !prev.HasCPU || !cur.HasCPU {
		return 0, false
	}
	dt := cur.Timestamp.Sub(prev.Timestamp)
	if dt <= 0 || cur.CPUUsageNanos < prev.CPUUsageNanos {
		return 0, false
	}
	return float64(cur.CPUUsageNanos-prev.CPUUsageNanos) / float64(dt.Nanoseconds()), true
}

// ThrottledFraction returns the fraction of CFS periods in which the
// container was throttled between two samples. ok is false when no period
// elapsed (no quota, idle) or the samples cannot be compared.
func ThrottledFraction(prev, cur *Statistics) (frac float64, ok bool) {
	if !prev.HasCPU || !cur.HasCPU || cur.CPUPeriods <= prev.CPUPeriods || cur.CPUThrottled < prev.CPUThrottled {
		return 0, false
	}
	return float64(cur.CPUThrottled-prev.CPUThrottled) / float64(cur.CPUPeriods-prev.CPUPeriods), true
}
