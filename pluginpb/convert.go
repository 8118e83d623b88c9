package pluginpb

import (
	"time"

	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/monitor"
)

// FromUsage converts u to its wire form with at most history samples per
// container (the newest; all when history < 0).
func FromUsage(u *monitor.Usage, history int) *Usage {
	out := &Usage{
		TimestampUnixNano: unixNano(u.Timestamp),
		Total:             &Capacity{MilliCpus: u.Total.MilliCPUs, MemoryBytes: u.Total.MemoryBytes},
		Host: &Host{
			NumCpu: int32(u.Host.NumCPU), CpuBusyFraction: u.Host.CPUBusyFraction,
			Load1: u.Host.Load1, Load5: u.Host.Load5, Load15: u.Host.Load15,
			MemTotalBytes: u.Host.MemTotalBytes, MemAvailableBytes: u.Host.MemAvailableBytes, MemUsedBytes: u.Host.MemUsedBytes,
		},
		Containers: make([]*ContainerUsage, 0, len(u.Containers)),
	}
	for i := range u.Containers {
		c := &u.Containers[i]
		samples := c.History.Last(history)
		if len(samples) == 0 && !c.Latest.Timestamp.IsZero() {
			samples = []monitor.Statistics{c.Latest}
		}
		if n := len(samples); n > 0 && c.Latest.AppLatency != nil && samples[n-1].AppLatency == nil {
			// A latency reported after the round is in Latest only.
			samples[n-1].AppLatency = c.Latest.AppLatency
		}
		pc := &ContainerUsage{
			Id: c.ID, Name: c.Name, Revocable: c.Revocable, Stopping: c.Stopping,
			MilliCpus: c.Limits.MilliCPUs, MemoryBytes: c.Limits.MemoryBytes,
			StartedUnixNano: unixNano(c.StartedAt), Tasks: c.Tasks, Labels: c.Labels,
			History: make([]*Statistics, len(samples)),
		}
		for j := range samples {
			pc.History[j] = fromStatistics(&samples[j])
		}
		out.Containers = append(out.Containers, pc)
	}
	return out
}

// ToMonitor converts a wire Usage back (the Go serve side of a plugin).
// Each container's history becomes a ring holding exactly its samples.
func (u *Usage) ToMonitor() monitor.Usage {
	out := monitor.Usage{
		Timestamp:  fromUnixNano(u.GetTimestampUnixNano()),
		Total:      monitor.Capacity{MilliCPUs: u.GetTotal().GetMilliCpus(), MemoryBytes: u.GetTotal().GetMemoryBytes()},
		Containers: make([]monitor.ContainerUsage, 0, len(u.GetContainers())),
	}
	if h := u.GetHost(); h != nil {
		out.Host = monitor.HostStatistics{
			Timestamp: out.Timestamp, NumCPU: int(h.NumCpu), CPUBusyFraction: h.CpuBusyFraction,
			Load1: h.Load1, Load5: h.Load5, Load15: h.Load15,
			MemTotalBytes: h.MemTotalBytes, MemAvailableBytes: h.MemAvailableBytes, MemUsedBytes: h.MemUsedBytes,
		}
	}
	for _, c := range u.GetContainers() {
		ring := monitor.NewRing(len(c.History))
		cu := monitor.ContainerUsage{
			ContainerInfo: monitor.ContainerInfo{
				ID: c.Id, Name: c.Name, Revocable: c.Revocable, Stopping: c.Stopping,
				Limits:    isolator.Limits{MilliCPUs: c.MilliCpus, MemoryBytes: c.MemoryBytes},
				StartedAt: fromUnixNano(c.StartedUnixNano), Tasks: c.Tasks, Labels: c.Labels,
			},
			History: ring,
		}
		if cu.Revocable {
			cu.Limits.Class = isolator.BestEffort
		}
		for _, s := range c.History {
			ring.Push(toStatistics(s))
		}
		cu.Latest, _ = ring.Latest()
		out.Containers = append(out.Containers, cu)
	}
	return out
}

func fromStatistics(s *monitor.Statistics) *Statistics {
	return &Statistics{
		TimestampUnixNano: unixNano(s.Timestamp),
		HasCpu:            s.HasCPU, CpuUserSeconds: s.CPUUserSeconds, CpuSystemSeconds: s.CPUSystemSeconds,
		CpuUsageNanos: s.CPUUsageNanos, CpuLimit: s.CPULimit, CpuPeriods: s.CPUPeriods,
		CpuThrottled: s.CPUThrottled, CpuThrottledNs: int64(s.CPUThrottledTime),
		HasMemory: s.HasMemory, MemUsageBytes: s.MemUsageBytes, MemRssBytes: s.MemRSSBytes,
		MemCacheBytes: s.MemCacheBytes, MemLimitBytes: s.MemLimitBytes, MemWorkingSetBytes: s.MemWorkingSet,
		MemOomKills: s.MemOOMKills,
		HasPids:     s.HasPids, Pids: s.Pids,
		HasPressure: s.HasPressure,
		CpuPressure: fromPSI(&s.CPUPressure), MemPressure: fromPSI(&s.MemPressure), IoPressure: fromPSI(&s.IOPressure),
		RunQueue: fromLatency(s.RunQueue), OnCpuNs: int64(s.OnCPU), AppLatency: fromLatency(s.AppLatency),
	}
}

func toStatistics(p *Statistics) monitor.Statistics {
	var s monitor.Statistics
	s.Timestamp = fromUnixNano(p.GetTimestampUnixNano())
	s.HasCPU, s.CPUUserSeconds, s.CPUSystemSeconds = p.HasCpu, p.CpuUserSeconds, p.CpuSystemSeconds
	s.CPUUsageNanos, s.CPULimit, s.CPUPeriods = p.CpuUsageNanos, p.CpuLimit, p.CpuPeriods
	s.CPUThrottled, s.CPUThrottledTime = p.CpuThrottled, time.Duration(p.CpuThrottledNs)
	s.HasMemory, s.MemUsageBytes, s.MemRSSBytes = p.HasMemory, p.MemUsageBytes, p.MemRssBytes
	s.MemCacheBytes, s.MemLimitBytes, s.MemWorkingSet, s.MemOOMKills = p.MemCacheBytes, p.MemLimitBytes, p.MemWorkingSetBytes, p.MemOomKills
	s.HasPids, s.Pids = p.HasPids, p.Pids
	s.HasPressure = p.HasPressure
	s.CPUPressure, s.MemPressure, s.IOPressure = toPSI(p.CpuPressure), toPSI(p.MemPressure), toPSI(p.IoPressure)
	s.RunQueue, s.OnCPU, s.AppLatency = toLatency(p.RunQueue), time.Duration(p.OnCpuNs), toLatency(p.AppLatency)
	return s
}

func fromPSI(p *isolator.PSI) *PSI {
	return &PSI{
		SomeAvg10: p.SomeAvg10, SomeAvg60: p.SomeAvg60, SomeAvg300: p.SomeAvg300, SomeTotalNs: int64(p.SomeTotal),
		FullAvg10: p.FullAvg10, FullAvg60: p.FullAvg60, FullAvg300: p.FullAvg300, FullTotalNs: int64(p.FullTotal),
	}
}

func toPSI(p *PSI) isolator.PSI {
	if p == nil {
		return isolator.PSI{}
	}
	return isolator.PSI{
		SomeAvg10: p.SomeAvg10, SomeAvg60: p.SomeAvg60, SomeAvg300: p.SomeAvg300, SomeTotal: time.Duration(p.SomeTotalNs),
		FullAvg10: p.FullAvg10, FullAvg60: p.FullAvg60, FullAvg300: p.FullAvg300, FullTotal: time.Duration(p.FullTotalNs),
	}
}

func fromLatency(l *monitor.LatencySummary) *LatencySummary {
	if l == nil {
		return nil
	}
	return &LatencySummary{P50Ns: int64(l.P50), P99Ns: int64(l.P99), P999Ns: int64(l.P999), Source: l.Source}
}

func toLatency(l *LatencySummary) *monitor.LatencySummary {
	if l == nil {
		return nil
	}
	return &monitor.LatencySummary{P50: time.Duration(l.P50Ns), P99: time.Duration(l.P99Ns), P999: time.Duration(l.P999Ns), Source: l.Source}
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
