package agent

import (
	"slices"
	"sort"
	"testing"
	"time"
)

// TestPlanRecovery: the plan of Recover, from the checkpoint and the
// runtime alone — what is adopted, which records changed (the only ones
// written), what is dropped, what is an orphan.
func TestPlanRecovery(t *testing.T) {
	now := time.Unix(1000, 0)
	started := time.Unix(900, 0)
	running := func(id string) *RuntimeInfo {
		return &RuntimeInfo{ID: id, Running: true, Pid: 7, StartedAt: started, SandboxDir: "/sb/" + id}
	}
	exited := func(id string, code int) *RuntimeInfo {
		return &RuntimeInfo{ID: id, Exit: &ExitStatus{Code: code}, SandboxDir: "/sb/" + id}
	}
	for _, tc := range []struct {
		name    string
		record  *Container
		in      *RuntimeInfo
		state   string // "" dropped
		changed bool
		reason  ExitReason
	}{
		{"running, unchanged", &Container{ID: "a", State: StateRunning, Pid: 7, StartedAt: started, SandboxDir: "/sb/a"}, running("a"), StateRunning, false, ""},
		{"running, new pid", &Container{ID: "a", State: StateRunning, Pid: 6, StartedAt: started, SandboxDir: "/sb/a"}, running("a"), StateRunning, true, ""},
		{"exited meanwhile", &Container{ID: "a", State: StateRunning, Pid: 7}, exited("a", 3), StateExited, true, ""},
		{"exited before", &Container{ID: "a", State: StateExited, Exit: &ExitStatus{Code: 3}, SandboxDir: "/sb/a"}, exited("a", 3), StateExited, false, ""},
		{"vanished", &Container{ID: "a", State: StateRunning}, nil, StateExited, true, ReasonLost},
		{"exited, runtime forgot it", &Container{ID: "a", State: StateExited, Exit: &ExitStatus{Code: 3}}, nil, StateExited, false, ""},
		{"launch adopted", &Container{ID: "a", State: StateLaunching}, running("a"), StateRunning, true, ""},
		{"launch ended", &Container{ID: "a", State: StateLaunching}, exited("a", 1), "", false, ""},
		{"launch never seen", &Container{ID: "a", State: StateLaunching}, nil, "", false, ""},
		// A restart has an exit: its ID was given out, it stays.
		{"restart interrupted", &Container{ID: "a", State: StateLaunching, Exit: &ExitStatus{Code: 137}}, nil, StateExited, true, ReasonRestartFailed},
		{"restart before the destroy", &Container{ID: "a", State: StateLaunching, Exit: &ExitStatus{Code: 137}}, exited("a", 137), StateExited, true, ReasonRestartFailed},
		{"restart adopted", &Container{ID: "a", State: StateLaunching, Exit: &ExitStatus{Code: 137}}, running("a"), StateRunning, true, ""},
	} {
		var infos []*RuntimeInfo
		if tc.in != nil {
			infos = append(infos, tc.in)
		}
		p := planRecovery([]*Container{tc.record}, nil, infos, now)
		switch {
		case tc.state == "" && (len(p.drop) != 1 || len(p.adopt) != 0):
			t.Errorf("%s: plan %+v, want the launch dropped", tc.name, p)
		case tc.state != "" && (len(p.adopt) != 1 || p.adopt[0].State != tc.state):
			t.Errorf("%s: plan %+v, want adopted %s", tc.name, p, tc.state)
		case p.changed["a"] != tc.changed:
			t.Errorf("%s: changed %v, want %v", tc.name, p.changed["a"], tc.changed)
		case tc.state == StateRunning && p.adopt[0].Exit != nil:
			t.Errorf("%s: running with an exit %+v", tc.name, p.adopt[0].Exit)
		case tc.reason != "" && p.adopt[0].Exit.Reason != tc.reason:
			t.Errorf("%s: exit %+v, want reason %s", tc.name, p.adopt[0].Exit, tc.reason)
		case len(p.orphans) != 0:
			t.Errorf("%s: orphans %v", tc.name, p.orphans)
		}
	}

	// Orphans are the runtime's containers no record names; a
	// quarantined record's container is none.
	p := planRecovery([]*Container{{ID: "a", State: StateRunning}}, []Quarantined{{ID: "q"}},
		[]*RuntimeInfo{running("a"), running("q"), running("o1"), exited("o2", 0)}, now)
	var orphans []string
	for _, in := range p.orphans {
		orphans = append(orphans, in.ID)
	}
	sort.Strings(orphans)
	if !slices.Equal(orphans, []string{"o1", "o2"}) || len(p.quarantine) != 1 || p.quarantine[0].in == nil || p.quarantine[0].in.ID != "q" {
		t.Errorf("orphans %v, quarantine %+v", orphans, p.quarantine)
	}
}

// TestCheckpointDurability: only a record that carries a container's exit
// is fsynced; the records of its launch and run are not (a crash of the
// machine ends the container anyway, a crash of the agent loses nothing).
func TestCheckpointDurability(t *testing.T) {
	for _, tc := range []struct {
		c    *Container
		want bool
	}{
		{&Container{ID: "a", State: StateLaunching}, false},
		{&Container{ID: "a", State: StateRunning}, false},
		{&Container{ID: "a", State: StateExited, Exit: &ExitStatus{Code: 3}}, true},
	} {
		if got := durable(tc.c); got != tc.want {
			t.Errorf("durable(%s) = %v, want %v", tc.c.State, got, tc.want)
		}
	}
}
