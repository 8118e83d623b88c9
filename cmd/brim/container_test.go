package main

import (
	"testing"

	"github.com/brimnode/brim/agent"
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

func TestAgentFlags(t *testing.T) {
	for in, want := range map[string]string{"brim": "/brim", "/brim": "/brim", "a/b/": "/a/b"} {
		if got, err := cgroupParent(in); err != nil || got != want {
			t.Errorf("cgroupParent(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"/", "", "."} {
		if _, err := cgroupParent(bad); err == nil {
			t.Errorf("cgroupParent(%q) accepted", bad)
		}
	}
	r, err := agentResources("cpus:1.5;mem:2048;disk:100")
	if err != nil || r != (agent.Resources{MilliCPUs: 1500, MemMiB: 2048}) {
		t.Fatalf("agentResources = %+v, %v", r, err)
	}
	if r, err := agentResources(""); err != nil || r.MilliCPUs <= 0 || r.MemMiB <= 0 {
		t.Fatalf("host resources = %+v, %v", r, err)
	}
	for _, bad := range []string{"cpus:x", "mem:100", "cpus:1;mem:lots"} {
		if _, err := agentResources(bad); err == nil {
			t.Errorf("agentResources(%q) accepted", bad)
		}
	}
}
