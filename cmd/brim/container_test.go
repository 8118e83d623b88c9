package main

import (
	"testing"

	"github.com/brimnode/brim/agent/agentpb"
)

func TestMilliCPUs(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want int64
		ok   bool
	}{
		{0.1, 100, true}, {1.5, 1500, true}, {2, 2000, true}, {0.001, 1, true},
		{0, 0, false}, {-1, 0, false}, {0.0005, 0, false}, {1.2345, 0, false},
	} {
		got, err := milliCPUs(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("milliCPUs(%v) = %d, %v", tc.in, got, err)
		}
	}
}

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
		if got := exitCode(&agentpb.Container{Exit: tc.exit}); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.exit, got, tc.want)
		}
	}
}

func TestComputeStats(t *testing.T) {
	a := &agentpb.Statistics{Id: "x", TimestampUnixNano: 1e9, CpuUsageNanos: 1e9}
	b := &agentpb.Statistics{Id: "x", TimestampUnixNano: 3e9, CpuUsageNanos: 2e9, MilliCpus: 500}
	if s := computeStats(a, b); s.CPUPercent != 50 || s.CPUs != 0.5 {
		t.Fatalf("computeStats = %+v", s)
	}
}
