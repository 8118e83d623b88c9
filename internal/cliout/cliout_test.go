package cliout

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/brimnode/brim/agent/agentclient"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/master/api"
)

var update = flag.Bool("update", false, "rewrite testdata/*.txt with the current output")

// golden compares what print writes with testdata/name.txt. The files of
// the tables moved from cmd/brim were written by cmd/brim's functions
// before the move: the layout is unchanged.
func golden(t *testing.T, name string, print func(*bytes.Buffer) error) {
	t.Helper()
	var b bytes.Buffer
	if err := print(&b); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	path := filepath.Join("testdata", name+".txt")
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("%s:\ngot:\n%s\nwant:\n%s", name, b.String(), want)
	}
}

var now = time.Unix(1700000000, 0).UTC()

func TestStats(t *testing.T) {
	on := 1.234
	rows := []agentclient.Stats{{ID: "c1", CPUPercent: 12.345, CPUs: 0.5, MemUsageBytes: 10 << 20, MemLimitBytes: 128 << 20, Pids: 3, PidsLimit: 10,
		CPUThrottled: 2, CPUPeriods: 100, ThrottledSeconds: 0.25, OOMKills: 1, HasNet: true, NetRxBytes: 10, NetTxBytes: 20,
		RunQueue: &agentclient.RunQueue{P50Seconds: 12.3e-6, P99Seconds: 4.567e-3, P999Seconds: 0.5, Source: "ebpf"}, OnCPUSeconds: &on},
		{ID: "c2", MemLimitBytes: 1 << 62}}
	golden(t, "stats", func(b *bytes.Buffer) error { return Stats(b, rows, false) })
	golden(t, "stats-json", func(b *bytes.Buffer) error { return Stats(b, rows, true) })
}

func TestExplain(t *testing.T) {
	at := now.Add(-90 * time.Second)
	ex := agentclient.Explain{Enabled: true, Current: &agentclient.Estimate{Estimator: "fixed", Revocable: "cpus:1", ComputedAt: now, Summary: "s",
		Terms: []agentclient.Term{{Name: "t", Value: 1.5, Unit: "cpus", Note: "n"}}}, Blocking: "b", RevocableTotal: "cpus:1", QoS: "load",
		Active: []agentclient.Correction{{Type: "throttle", Container: "c1", At: &at, Reason: "r", Error: "e",
			Trigger: agentclient.Trigger{Signal: "cpu", Value: 1, Baseline: 2, Threshold: 3, Victim: "v"}}}}
	golden(t, "explain", func(b *bytes.Buffer) error { return Explain(b, ex) })
	golden(t, "explain-off", func(b *bytes.Buffer) error { return Explain(b, agentclient.Explain{}) })
}

func TestState(t *testing.T) {
	st := &api.State{Agents: []api.AgentState{{ID: "a1", Hostname: "h", Resources: "cpus:4", Connected: true, Tasks: 1,
		Oversubscription: &api.AgentOversubState{Estimator: "fixed", QoS: "load",
			Corrections: []api.CorrectionState{{Type: "kill", ContainerID: "c", Signal: "cpu", Value: 1.5, Active: true}}}}},
		Frameworks: []api.FrameworkState{{ID: "f1", Name: "n", Roles: []string{"a", "b"}, Connected: true, Tasks: 1, Offers: 2}},
		Tasks:      []api.TaskState{{ID: "t1", State: "RUNNING", AgentID: "a1", Resources: "cpus:1"}},
		Roles:      []api.RoleState{{Role: "a", Weight: 2, Share: 0.25, Allocated: "cpus:1"}},
		Quota:      map[string]api.QuotaState{"a": {Guarantee: "cpus:1"}}, Offers: []api.OfferState{{ID: "o"}}}
	for i := range 12 { // the newest 10 are shown
		st.CompletedTasks = append(st.CompletedTasks, api.TaskState{ID: fmt.Sprint("d", i), State: "FINISHED", FrameworkID: "f1", AgentID: "a1"})
	}
	golden(t, "state", func(b *bytes.Buffer) error { return State(b, st) })
	golden(t, "state-empty", func(b *bytes.Buffer) error { return State(b, &api.State{}) })
	golden(t, "quota", func(b *bytes.Buffer) error {
		return Quota(b, map[string]api.QuotaState{"web": {Limit: "cpus:2"}, "ads": {Guarantee: "cpus:1", Limit: "cpus:4"}})
	})
	golden(t, "weights", func(b *bytes.Buffer) error { return Weights(b, map[string]float64{"web": 3, "ads": 0.5}) })
}

func TestContainers(t *testing.T) {
	list := []*agentpb.Container{
		{Id: "c1", Name: "web", State: "running", Pid: 42, MilliCpus: 250, MemMib: 128, CreatedAtUnixNano: now.Add(-90 * time.Second).UnixNano()},
		{Id: "c2", Name: "job", State: "exited", Pid: 43, MilliCpus: 2000, MemMib: 64, CreatedAtUnixNano: now.Add(-72 * time.Hour).UnixNano(),
			Exit: &agentpb.ExitStatus{Code: 3, Reason: "COMMAND_EXITED"}},
	}
	golden(t, "containers", func(b *bytes.Buffer) error { return Containers(b, list, now) })
	for milli, want := range map[int64]string{250: "0.25", 2000: "2", 1: "0.001", 1500: "1.5"} {
		if got := CPUs(milli); got != want {
			t.Errorf("CPUs(%d) = %q, want %q", milli, got, want)
		}
	}
}

func TestAgentInfo(t *testing.T) {
	in := &agentpb.AgentInfoResponse{Id: "a1", Version: "v", StateDir: "/s", CgroupParent: "/brim", ResourcesTotal: "cpus:4",
		ContainersRunning: 1, ContainersExited: 2}
	golden(t, "agent-info", func(b *bytes.Buffer) error { return AgentInfo(b, in, nil) })
	in.Estimator, in.QosController, in.CorrectionsActive = "fixed", "load", 1
	ex := &agentpb.ExplainResponse{Current: &agentpb.Estimate{Estimator: "fixed", Revocable: "cpus:1", Summary: "s"},
		Active: []*agentpb.Correction{{Type: "throttle", ContainerId: "c1", Trigger: &agentpb.Trigger{Signal: "cpu", Value: 1.5}}, {Type: "freeze", ContainerId: "c2"}}}
	golden(t, "agent-info-oversub", func(b *bytes.Buffer) error { return AgentInfo(b, in, ex) })
	full := &agentpb.AgentInfoResponse{Id: "a1", Version: "v", StateDir: "/s", CgroupParent: "/brim", ResourcesTotal: "cpus:4",
		ContainersRunning: 1, StateDirFull: true, CheckpointUnsaved: 2, LogMaxSizeBytes: 10 << 20, LogMaxFiles: 5,
		CheckpointError: "checkpoint c1: write /s/checkpoint/c1.json: no space left on device",
		ImageCacheBytes: 3 << 20, ImageCacheMaxBytes: 10 << 30}
	golden(t, "agent-info-full", func(b *bytes.Buffer) error { return AgentInfo(b, full, nil) })
}

func TestImages(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	r := &agentpb.ListImagesResponse{CacheBytes: 5 << 20, CacheMaxBytes: 1 << 30, Images: []*agentpb.Image{
		{Id: "sha256:a9135337e82a0000000000000000000000000000000000000000000000000000", Refs: []string{"127.0.0.1:5000/demo/hello:1"},
			Layers: 2, Size: 2 << 20, LastUsedUnixNano: now.Add(-time.Minute).UnixNano(), Containers: []string{"c1"}},
		{Id: "sha256:0123456789ab0000000000000000000000000000000000000000000000000000", Layers: 3, Size: 3 << 20,
			LastUsedUnixNano: now.Add(-50 * time.Hour).UnixNano()},
	}}
	golden(t, "images", func(b *bytes.Buffer) error { return Images(b, r, now) })
	golden(t, "images-json", func(b *bytes.Buffer) error { return JSON(b, agentclient.ImageViews(r)) })
	golden(t, "pull-progress", func(b *bytes.Buffer) error {
		PullProgress(b, &agentpb.PullImageProgress{Layer: 1, Layers: 2, Digest: "sha256:feedfacecafe0000", Fetched: 1 << 20})
		PullProgress(b, &agentpb.PullImageProgress{Layer: 2, Layers: 2, Digest: "sha256:0123456789abcdef", Cached: true})
		Pruned(b, "app:1", &agentpb.PruneImagesResponse{Images: []string{"sha256:a9135337e82a0000"}, Layers: 2, Bytes: 2 << 20})
		Pruned(b, "app:2", &agentpb.PruneImagesResponse{})
		Pruned(b, "", &agentpb.PruneImagesResponse{})
		return nil
	})
}
