package agent

import (
	"fmt"
	"time"

	"github.com/brimnode/brim/monitor"
)

// SchedSignals are the scheduler signals the monitor's latest round holds
// for one container: its run-queue latency over the round's interval and
// its cumulative on-cpu time (from the run-queue source the agent was
// configured with: the eBPF monitor, or the schedstat fallback).
type SchedSignals struct {
	// Sampled is when the monitor's latest sample of the container was
	// taken (OnCPU is as of then).
	Sampled time.Time
	// RunQueue is the run-queue latency over the latest interval; nil
	// before the container was sampled twice or without a run-queue
	// source. Its Source says who measured it ("ebpf", "schedstat-mean").
	RunQueue *monitor.LatencySummary
	// OnCPU is the container's cumulative on-cpu time; HasOnCPU is false
	// when the source did not measure it (yet).
	OnCPU    time.Duration
	HasOnCPU bool
	// CPUUsageNanos is the cumulative cpu usage (cpuacct) the cgroups
	// isolator read in the same sample: OnCPU and it are comparable.
	CPUUsageNanos uint64
}

// SchedSignals returns the scheduler signals of container ref from the
// monitor's latest round (it does not sample). Errors wrap ErrNotFound,
// ErrNotSupported (the agent runs without oversubscription, so without a
// monitor) or monitor.ErrNotFound (not sampled yet: launched since the
// last round).
func (a *Agent) SchedSignals(ref string) (SchedSignals, error) {
	c, err := a.Get(ref)
	if err != nil {
		return SchedSignals{}, fmt.Errorf("scheduler signals: %w", err)
	}
	if a.over == nil {
		return SchedSignals{}, fmt.Errorf("scheduler signals of %s: %w: the agent runs without a monitor", c.ID, ErrNotSupported)
	}
	u := a.over.mon.Usage()
	cu := u.Container(c.ID)
	if cu == nil || cu.Latest.Timestamp.IsZero() {
		return SchedSignals{}, fmt.Errorf("scheduler signals of %s: %w", c.ID, monitor.ErrNotFound)
	}
	last := cu.Latest
	s := SchedSignals{Sampled: last.Timestamp, RunQueue: last.RunQueue, OnCPU: last.OnCPU, CPUUsageNanos: last.CPUUsageNanos}
	// The schedstat fallback measures on-cpu time too (it fills OnCPU
	// from the same cumulative counters); zero means none was read.
	s.HasOnCPU = last.OnCPU > 0 || last.RunQueue != nil
	return s, nil
}
