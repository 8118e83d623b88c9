package agentclient

import (
	"testing"

	"github.com/brimnode/brim/agent/agentpb"
)

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		exit *agentpb.ExitStatus
		want int
	}{
		{nil, 1},
		{&agentpb.ExitStatus{Code: 0}, 0},
		{&agentpb.ExitStatus{Code: 3}, 3},
		{&agentpb.ExitStatus{Code: 137, Signal: 9}, 137},
		{&agentpb.ExitStatus{Signal: 15}, 143},
	} {
		if got := ExitCode(&agentpb.Container{Exit: tc.exit}); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.exit, got, tc.want)
		}
	}
}

func TestComputeStats(t *testing.T) {
	a := &agentpb.Statistics{Id: "x", TimestampUnixNano: 1e9, CpuUsageNanos: 1e9}
	b := &agentpb.Statistics{Id: "x", TimestampUnixNano: 3e9, CpuUsageNanos: 2e9, MilliCpus: 500}
	if s := ComputeStats(a, b); s.CPUPercent != 50 || s.CPUs != 0.5 {
		t.Fatalf("ComputeStats = %+v", s)
	}
}
