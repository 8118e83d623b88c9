package monitor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/load"
	"github.com/shirou/gopsutil/v4/mem"
)

// HostSampler samples node-wide cpu, load and memory through gopsutil. It
// is safe for concurrent use.
type HostSampler struct {
	mu     sync.Mutex
	ncpu   int
	prev   cpu.TimesStat
	primed bool
}

// NewHostSampler returns a gopsutil-backed HostSource.
func NewHostSampler() *HostSampler { return &HostSampler{} }

// Host implements HostSource. CPUBusyFraction is computed against the
// previous call (zero on the first).
func (h *HostSampler) Host(ctx context.Context) (HostStatistics, error) {
	hs := HostStatistics{Timestamp: time.Now()}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ncpu == 0 {
		n, err := cpu.CountsWithContext(ctx, true)
		if err != nil {
			return hs, fmt.Errorf("count cpus: %w", err)
		}
		h.ncpu = n
	}
	hs.NumCPU = h.ncpu
	times, err := cpu.TimesWithContext(ctx, false)
	if err != nil {
		return hs, fmt.Errorf("read cpu times: %w", err)
	}
	if len(times) > 0 {
		t := times[0]
		hs.CPUUserSeconds, hs.CPUSystemSeconds, hs.CPUIdleSeconds = t.User+t.Nice, t.System+t.Irq+t.Softirq, t.Idle
		hs.CPUIOWaitSeconds, hs.CPUStealSeconds = t.Iowait, t.Steal
		if h.primed {
			hs.CPUBusyFraction = busyFraction(h.prev, t)
		}
		h.prev, h.primed = t, true
	}
	l, err := load.AvgWithContext(ctx)
	if err != nil {
		return hs, fmt.Errorf("read load average: %w", err)
	}
	hs.Load1, hs.Load5, hs.Load15 = l.Load1, l.Load5, l.Load15
	vm, err := mem.VirtualMemoryWithContext(ctx)
	if err != nil {
		return hs, fmt.Errorf("read memory: %w", err)
	}
	hs.MemTotalBytes, hs.MemAvailableBytes, hs.MemUsedBytes = vm.Total, vm.Available, vm.Used
	if p, err := readPressure(hostCPUPressure); err == nil {
		hs.CPUPressure, hs.HasCPUPressure = p, true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return hs, err
	}
	return hs, nil
}

func busyFraction(a, b cpu.TimesStat) float64 {
	total := func(t cpu.TimesStat) float64 {
		return t.User + t.System + t.Idle + t.Nice + t.Iowait + t.Irq + t.Softirq + t.Steal
	}
	dt := total(b) - total(a)
	if dt <= 0 {
		return 0
	}
	idle := (b.Idle + b.Iowait) - (a.Idle + a.Iowait)
	f := 1 - idle/dt
	return min(max(f, 0), 1)
}
