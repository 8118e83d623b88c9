package cliout

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/brimnode/brim/agent/agentclient"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/demand"
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
	on, thr := 1.234, 2.5
	rows := []agentclient.Stats{{ID: "c1", Name: "web", ThrottledPercent: &thr, CPUPercent: 12.345, CPUs: 0.5, MemUsageBytes: 10 << 20, MemLimitBytes: 128 << 20, Pids: 3, PidsLimit: 10,
		CPUThrottled: 2, CPUPeriods: 100, ThrottledSeconds: 0.25, OOMKills: 1, HasNet: true, NetRxBytes: 10, NetTxBytes: 20,
		RunQueue: &agentclient.RunQueue{P50Seconds: 12.3e-6, P99Seconds: 4.567e-3, P999Seconds: 0.5, Source: "ebpf"}, OnCPUSeconds: &on},
		{ID: "c2", MemLimitBytes: 1 << 62}}
	golden(t, "stats", func(b *bytes.Buffer) error { return Stats(b, nil, rows, false) })
	golden(t, "stats-json", func(b *bytes.Buffer) error { return Stats(b, nil, rows, true) })
	wide, err := ParseFormat("table {{.ID}}\t{{.CPUs}}\t{{.ThrottledTotal}}\t{{.OOMKills}}\t{{.RunQueue}}\t{{.OnCPU}}")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "stats-format", func(b *bytes.Buffer) error { return Stats(b, wide, rows, false) })
}

// The default stats table fits 100 columns with every figure at its
// widest: a long name is cut, sizes keep three digits.
func TestStatsWidth(t *testing.T) {
	thr := 100.0
	rows := []agentclient.Stats{{ID: "0123456789ab", Name: "a-very-long-container-name-indeed", CPUPercent: 199.9, ThrottledPercent: &thr,
		MemUsageBytes: 1023 << 20, MemLimitBytes: 1 << 62, Pids: 4096, HasNet: true, NetRxBytes: 999_499_999, NetTxBytes: 123_456_789_012}}
	var b bytes.Buffer
	if err := Stats(&b, nil, rows, false); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if n := utf8.RuneCountInString(l); n > 100 {
			t.Errorf("%d columns: %q", n, l)
		}
	}
	if !strings.Contains(b.String(), "a-very-long-c…") {
		t.Errorf("name not cut:\n%s", b.String())
	}
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
		{Id: "c1", Name: "web", State: "running", Pid: 42, MilliCpus: 250, MemMib: 128, CreatedAtUnixNano: now.Add(-90 * time.Second).UnixNano(),
			CpuLimitMode: "shares", Paused: true, Labels: map[string]string{"app": "web", "tier": "front"}},
		{Id: "c2", Name: "job", State: "exited", Pid: 43, MilliCpus: 2000, MemMib: 64, CreatedAtUnixNano: now.Add(-72 * time.Hour).UnixNano(),
			Exit: &agentpb.ExitStatus{Code: 3, Reason: "COMMAND_EXITED"}, CpuLimitMode: "quota"},
	}
	golden(t, "containers", func(b *bytes.Buffer) error { return Containers(b, nil, list, now) })
	for _, c := range []struct{ format, want string }{
		{"{{.ID}} {{.Name}}", "c1 web\nc2 job\n"},
		{"table {{.ID}}\t{{.Names}}\t{{.Label \"app\"}}", "ID  NAMES  APP\nc1  web    web\nc2  job\n"},
		{`table {{.ID}}\t{{.State}}`, "ID  STATE\nc1  paused\nc2  exited\n"},
		{"{{json .Labels}} {{upper .Name}}", "\"app=web,tier=front\" WEB\n\"\" JOB\n"},
		{"json", `{"ID":"c1","Name":"web"`},
	} {
		f, err := ParseFormat(c.format)
		if err != nil {
			t.Fatalf("%q: %v", c.format, err)
		}
		var b bytes.Buffer
		if err := Containers(&b, f, list, now); err != nil {
			t.Fatalf("%q: %v", c.format, err)
		}
		if !strings.HasPrefix(b.String(), c.want) {
			t.Errorf("--format %q:\n%s\nwant:\n%s", c.format, b.String(), c.want)
		}
	}
	for bad, want := range map[string]string{"{{.Image}}": "can't evaluate field Image", "{{.ID": "unclosed action"} {
		f, err := ParseFormat(bad)
		if err == nil {
			err = Containers(io.Discard, f, list, now)
		}
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "--format") {
			t.Errorf("--format %q: %v, want an error saying %q", bad, err, want)
		}
	}
	for milli, want := range map[int64]string{250: "0.25", 2000: "2", 1: "0.001", 1500: "1.5"} {
		if got := CPUs(milli); got != want {
			t.Errorf("CPUs(%d) = %q, want %q", milli, got, want)
		}
	}
}

func TestAgentInfo(t *testing.T) {
	in := &agentpb.AgentInfoResponse{Id: "a1", Version: "v", StateDir: "/s", CgroupParent: "/brim", ResourcesTotal: "cpus:4", CpuLimitMode: "shares",
		ContainersRunning: 1, ContainersExited: 2}
	golden(t, "agent-info", func(b *bytes.Buffer) error { return AgentInfo(b, in, nil) })
	in.Estimator, in.QosController, in.CorrectionsActive = "fixed", "load", 1
	ex := &agentpb.ExplainResponse{Current: &agentpb.Estimate{Estimator: "fixed", Revocable: "cpus:1", Summary: "s"},
		Active: []*agentpb.Correction{{Type: "throttle", ContainerId: "c1", Trigger: &agentpb.Trigger{Signal: "cpu", Value: 1.5}}, {Type: "freeze", ContainerId: "c2"}}}
	golden(t, "agent-info-oversub", func(b *bytes.Buffer) error { return AgentInfo(b, in, ex) })
	full := &agentpb.AgentInfoResponse{Id: "a1", Version: "v", StateDir: "/s", CgroupParent: "/brim", ResourcesTotal: "cpus:4",
		ContainersRunning: 1, StateDirFull: true, CheckpointUnsaved: 2, LogMaxSizeBytes: 10 << 20, LogMaxFiles: 5,
		WarmSandboxesReady: 2, WarmSandboxesFilling: 1, WarmSandboxesMemoryBytes: 15 << 20, LaunchesWarm: 40, LaunchesCold: 3,
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

// A frame redraws in place: home, lines cut at the width and cleared to
// their end, no more lines than the screen has rows less one (no scroll),
// the rest cleared.
func TestFrame(t *testing.T) {
	got := string(Frame("ID  NAME\nc1  web\nc2  job\nc3  db\n", 6, 3))
	want := "\x1b[HID  NA\x1b[K\nc1  we\x1b[K\n\x1b[J"
	if got != want {
		t.Errorf("Frame = %q, want %q", got, want)
	}
	if got := string(Frame("é€x\n", 2, 0)); got != "\x1b[Hé€\x1b[K\n\x1b[J" {
		t.Errorf("Frame cuts runes, not bytes: %q", got)
	}
}

// TestDemands: brim demand ls marks a late demand; show does too.
func TestDemands(t *testing.T) {
	ds := []api.Demand{
		{ID: "d1", State: demand.Allocating.String(), Framework: "fw", Start: now, End: now.Add(time.Hour), Placement: []api.DemandSlot{{Agent: "a1", Tasks: 2}}},
		{ID: "d2", State: demand.Monitoring.String(), Framework: "fw", Start: now, Late: true, Placement: []api.DemandSlot{{Agent: "a1", Tasks: 1}, {Agent: "a2", Tasks: 1}}},
		{ID: "d3", State: demand.Failed.String(), Framework: "fw", Reason: string(demand.ReasonNotAllocatable)},
	}
	golden(t, "demands", func(b *bytes.Buffer) error { return Demands(b, ds) })
	golden(t, "demand-late", func(b *bytes.Buffer) error { return Demand(b, &ds[1]) })
}
