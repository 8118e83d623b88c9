package main

import (
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/agent"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/qos"
)

func TestTerminalPreempted(t *testing.T) {
	r := &taskRunner{killed: map[string]bool{}}
	c := &agent.Container{ID: "c1", Name: "t1", Labels: map[string]string{labelTask: "t1"},
		Exit: &agent.ExitStatus{Code: 137, Signal: 9, Reason: qos.ReasonPreempted, Message: "preempted"}}
	st := r.terminal(c)
	if st.State != pb.TaskState_TASK_KILLED || st.Reason != "CONTAINER_PREEMPTED" || st.Message != "preempted" || st.ExitCode == nil {
		t.Fatalf("preempted container: %+v", st)
	}
	// A kill the framework asked for stays KILLED_BY_FRAMEWORK.
	r.killed["t1"] = true
	if st := r.terminal(c); st.Reason != reasonKilled {
		t.Fatalf("framework kill: %+v", st)
	}
}

func TestCorrectionsOf(t *testing.T) {
	at := time.Unix(100, 0)
	throttle := qos.Correction{Type: qos.Throttle, ContainerID: "c1", CPUQuota: 200, Reason: "r",
		Trigger: qos.Trigger{Signal: "cpu-throttling", Victim: "lc", Value: 0.5, Baseline: 0.1, Threshold: 0.3}}
	kill := qos.Correction{Type: qos.Kill, ContainerID: "c2", Trigger: qos.Trigger{Signal: "load", Value: 3, Threshold: 1}}
	failed := qos.Correction{Type: qos.Kill, ContainerID: "c3"}
	st := agent.Oversubscription{
		Active: []qos.Correction{throttle},
		Recent: []qos.Applied{{Correction: throttle, At: at}, {Correction: kill, At: at.Add(time.Second)}, {Correction: failed, At: at, Err: qos.ErrInvalidOption}},
	}
	cs := []*agent.Container{{ID: "c1", Name: "t1", Labels: map[string]string{labelTask: "t1"}}, {ID: "c9", Name: "own"}}
	got := correctionsOf(st, cs)
	if len(got) != 2 {
		t.Fatalf("corrections: %v, want the throttle and the successful kill", got)
	}
	th, k := got[0], got[1]
	if th.Type != "THROTTLE" || th.ContainerId != "c1" || th.TaskId != "t1" || th.CpuQuotaMilli != 200 || !th.Active ||
		th.Signal != "cpu-throttling" || th.Victim != "lc" || th.Baseline != 0.1 || th.AppliedUnixNano != at.UnixNano() {
		t.Errorf("throttle: %v", th)
	}
	if k.Type != "KILL" || k.ContainerId != "c2" || k.TaskId != "" || k.Active || k.Signal != "load" || k.AppliedUnixNano != at.Add(time.Second).UnixNano() {
		t.Errorf("kill: %v", k)
	}
	if d := describeCorrection(kill); !strings.Contains(d, "trigger load 3 (threshold 1)") {
		t.Errorf("describe kill: %q", d)
	}
	if d := describeCorrection(throttle); !strings.Contains(d, "cpu-throttling of lc 0.5 (baseline 0.1, threshold 0.3): r") {
		t.Errorf("describe throttle: %q", d)
	}
}
