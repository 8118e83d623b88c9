package pluginpb

import (
	"testing"
	"time"

	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/monitor"
	"google.golang.org/protobuf/proto"
)

// TestUsageRoundTrip: what the agent sends a plugin comes back the same
// on the Go side of the plugin — Stopping too (before 2026-11-29 it was
// lost on the wire, so a Go QoS plugin blamed and corrected containers
// whose kill was under way).
func TestUsageRoundTrip(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ring := monitor.NewRing(10)
	for i := range 5 {
		var s monitor.Statistics
		s.Timestamp = t0.Add(time.Duration(i) * time.Second)
		s.HasCPU, s.CPUUsageNanos, s.CPUPeriods, s.CPUThrottled = true, uint64(i)*1e8, uint64(i*10), uint64(i)
		s.HasMemory, s.MemWorkingSet, s.MemOOMKills = true, 1<<20, 1
		s.HasPressure, s.CPUPressure.SomeTotal, s.MemPressure.FullAvg10 = true, time.Duration(i)*time.Millisecond, 0.5
		s.RunQueue = &monitor.LatencySummary{P99: time.Duration(i) * time.Millisecond, Source: "ebpf"}
		ring.Push(s)
	}
	latest, _ := ring.Latest()
	latest.AppLatency = &monitor.LatencySummary{P99: 7 * time.Millisecond, Source: "app"} // reported after the round
	u := monitor.Usage{
		Timestamp: t0.Add(4 * time.Second),
		Total:     monitor.Capacity{MilliCPUs: 2000, MemoryBytes: 4 << 30},
		Host:      monitor.HostStatistics{NumCPU: 2, Load1: 1.5, MemTotalBytes: 8 << 30},
		Containers: []monitor.ContainerUsage{{
			ContainerInfo: monitor.ContainerInfo{ID: "be", Name: "n", Revocable: true, Stopping: true, StartedAt: t0,
				Limits: isolator.Limits{MilliCPUs: 500, MemoryBytes: 1 << 30}, Tasks: []string{"t1"}, Labels: map[string]string{"a": "b"}},
			Latest: latest, History: ring,
		}},
	}
	pb := FromUsage(&u, 3)
	b, err := proto.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	var back Usage
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got := back.ToMonitor()
	if !got.Timestamp.Equal(u.Timestamp) || got.Total != u.Total || got.Host.NumCPU != 2 || got.Host.Load1 != 1.5 {
		t.Fatalf("node fields: %+v", got)
	}
	c := got.Containers[0]
	if c.ID != "be" || !c.Revocable || !c.Stopping || c.Limits.Class != isolator.BestEffort || c.Limits.MilliCPUs != 500 ||
		!c.StartedAt.Equal(t0) || c.Tasks[0] != "t1" || c.Labels["a"] != "b" {
		t.Fatalf("container fields: %+v", c.ContainerInfo)
	}
	h := c.History.Samples()
	if len(h) != 3 || !h[0].Timestamp.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("history: %d samples from %v", len(h), h[0].Timestamp)
	}
	l := c.Latest
	if l.CPUUsageNanos != 4e8 || l.CPUThrottled != 4 || l.MemWorkingSet != 1<<20 || l.MemOOMKills != 1 ||
		l.CPUPressure.SomeTotal != 4*time.Millisecond || l.MemPressure.FullAvg10 != 0.5 ||
		l.RunQueue == nil || l.RunQueue.P99 != 4*time.Millisecond || l.AppLatency == nil || l.AppLatency.P99 != 7*time.Millisecond {
		t.Fatalf("latest: %+v", l)
	}
	if r, ok := monitor.CPURate(&h[1], &h[2]); !ok || r < 0.0999 || r > 0.1001 {
		t.Fatalf("cpu rate after round trip: %v", r)
	}
}
