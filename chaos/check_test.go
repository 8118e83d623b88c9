package chaos

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseStatus(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Status
		ok   bool
	}{
		{"task x: RUNNING on agent ag1", Status{Task: "x", State: "RUNNING", Agent: "ag1"}, true},
		{"task x: LOST on agent ag1 (AGENT_UNREACHABLE): gone", Status{Task: "x", State: "LOST", Agent: "ag1", Reason: "AGENT_UNREACHABLE", Message: "gone"}, true},
		{"task x: FAILED on agent a (EXITED): exited with code 3", Status{Task: "x", State: "FAILED", Agent: "a", Reason: "EXITED", Message: "exited with code 3"}, true},
		{"task x: STAGING", Status{Task: "x", State: "STAGING"}, true},
		{"subscribed as framework f", Status{}, false},
		{"task x: waiting", Status{}, false},
	} {
		got, ok := ParseStatus(tc.line)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParseStatus(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCheckSequence(t *testing.T) {
	st := func(states ...string) []Status {
		var out []Status
		for _, s := range states {
			state, reason, _ := strings.Cut(s, "/")
			out = append(out, Status{Task: "t", State: state, Reason: reason})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		states []string
		bad    int
	}{
		{"in order", []string{"STAGING", "STARTING", "RUNNING", "FINISHED"}, 0},
		{"reconciled repeat", []string{"STAGING", "RUNNING", "RUNNING", "LOST"}, 0},
		{"back", []string{"STAGING", "RUNNING", "STARTING", "FINISHED"}, 1},
		{"terminal twice", []string{"RUNNING", "LOST", "FINISHED"}, 1},
		{"after terminal", []string{"RUNNING", "FAILED", "RUNNING"}, 1},
		{"the agent's own end after a reconciliation's", []string{"RUNNING", "FINISHED/RECONCILIATION", "FINISHED/COMMAND_EXITED"}, 0},
		{"another end after a reconciliation's", []string{"RUNNING", "FINISHED/RECONCILIATION", "FAILED/COMMAND_EXITED"}, 1},
		{"anything after a reconciliation's LOST", []string{"RUNNING", "LOST/RECONCILIATION", "LOST/AGENT_UNREACHABLE"}, 1},
		{"the same end twice from the agent", []string{"RUNNING", "FINISHED/COMMAND_EXITED", "FINISHED/COMMAND_EXITED"}, 1},
	} {
		if got := CheckSequence(st(tc.states...)); len(got) != tc.bad {
			t.Errorf("%s: %v, want %d violations", tc.name, got, tc.bad)
		}
	}
}

func TestCheckAllocation(t *testing.T) {
	parse := func(s string) MasterState {
		var st MasterState
		if err := json.Unmarshal([]byte(s), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	agents := `"agents":[{"id":"A","resources":"cpus:2;mem:1024","revocable":"cpus(*){REV}:1;mem(*){REV}:256","connected":true}]`
	for _, tc := range []struct {
		name, state string
		bad         string // a substring of the one violation; "" for none
	}{
		{"consistent", `{` + agents + `,
			"tasks":[{"id":"t1","frameworkId":"F","agentId":"A","state":"RUNNING","resources":"cpus:0.5;mem:64"},
			         {"id":"t2","frameworkId":"F","agentId":"A","state":"FINISHED","resources":"cpus:1;mem:64"}],
			"offers":[{"id":"o","frameworkId":"F","agentId":"A","role":"*","resources":"cpus:1;mem:512"}],
			"roles":[{"role":"*","allocated":"cpus:1.5;mem:576"}],
			"frameworkShares":[{"frameworkId":"F","role":"*","allocated":"cpus:1.5;mem:576"}]}`, ""},
		{"terminal task still allocated", `{` + agents + `,
			"tasks":[{"id":"t2","frameworkId":"F","agentId":"A","state":"LOST","resources":"cpus:1;mem:64"}],
			"roles":[{"role":"*","allocated":"cpus:1;mem:64"}],
			"frameworkShares":[{"frameworkId":"F","role":"*","allocated":"cpus:1;mem:64"}]}`, "framework F: allocation"},
		{"offer of resources not free", `{` + agents + `,
			"tasks":[{"id":"t1","frameworkId":"F","agentId":"A","state":"RUNNING","resources":"cpus:2;mem:64"}],
			"offers":[{"id":"o","frameworkId":"G","agentId":"A","role":"*","resources":"cpus:1.5;mem:64"}],
			"roles":[{"role":"*","allocated":"cpus:3.5;mem:128"}],
			"frameworkShares":[{"frameworkId":"F","role":"*","allocated":"cpus:2;mem:64"},{"frameworkId":"G","role":"*","allocated":"cpus:1.5;mem:64"}]}`, "exceed its resources"},
		{"revocable folded into the allocator's totals", `{` + agents + `,
			"tasks":[{"id":"t1","frameworkId":"F","agentId":"A","state":"RUNNING","resources":"cpus{REV}:0.5;mem{REV}:64"}],
			"roles":[{"role":"*","allocated":"cpus:0.5;mem:64"}],
			"frameworkShares":[{"frameworkId":"F","role":"*","allocated":"cpus:0.5;mem:64"}]}`, ""},
		{"revocable task beyond the estimate (the estimate leaves tasks out)", `{` + agents + `,
			"tasks":[{"id":"t1","frameworkId":"F","agentId":"A","state":"RUNNING","resources":"cpus{REV}:1.5;mem{REV}:64"}],
			"roles":[{"role":"*","allocated":"cpus:1.5;mem:64"}],
			"frameworkShares":[{"frameworkId":"F","role":"*","allocated":"cpus:1.5;mem:64"}]}`, ""},
		{"revocable offer beyond the estimate", `{` + agents + `,
			"offers":[{"id":"o","frameworkId":"F","agentId":"A","role":"*","resources":"cpus{REV}:1.5;mem{REV}:64"}],
			"roles":[{"role":"*","allocated":"cpus:1.5;mem:64"}],
			"frameworkShares":[{"frameworkId":"F","role":"*","allocated":"cpus:1.5;mem:64"}]}`, "revocable estimate"},
		{"revocable offer of a task's share that ended since the estimate", `{"agents":[{"id":"A","resources":"cpus:2;mem:1024","revocable":"cpus(*){REV}:1;mem(*){REV}:256","revocableInUse":"cpus{REV}:0.5;mem{REV}:64","connected":true}],
			"offers":[{"id":"o","frameworkId":"F","agentId":"A","role":"*","resources":"cpus{REV}:1.5;mem{REV}:64"}],
			"roles":[{"role":"*","allocated":"cpus:1.5;mem:64"}],
			"frameworkShares":[{"frameworkId":"F","role":"*","allocated":"cpus:1.5;mem:64"}]}`, ""},
		{"revocable offer beyond the estimate and the ended tasks", `{"agents":[{"id":"A","resources":"cpus:2;mem:1024","revocable":"cpus(*){REV}:1;mem(*){REV}:256","revocableInUse":"cpus{REV}:0.5;mem{REV}:64","connected":true}],
			"tasks":[{"id":"t1","frameworkId":"F","agentId":"A","state":"RUNNING","resources":"cpus{REV}:0.5;mem{REV}:64"}],
			"offers":[{"id":"o","frameworkId":"F","agentId":"A","role":"*","resources":"cpus{REV}:1.5;mem{REV}:64"}],
			"roles":[{"role":"*","allocated":"cpus:2;mem:128"}],
			"frameworkShares":[{"frameworkId":"F","role":"*","allocated":"cpus:2;mem:128"}]}`, "revocable estimate"},
		{"framework not in the allocator (orphaned usage)", `{` + agents + `,
			"tasks":[{"id":"t1","frameworkId":"F","agentId":"A","state":"RUNNING","resources":"cpus:0.5;mem:64"}]}`, ""},
		{"allocation without task or offer", `{` + agents + `,
			"roles":[{"role":"*","allocated":"cpus:0.1;mem:32"}],
			"frameworkShares":[{"frameworkId":"F","role":"*","allocated":"cpus:0.1;mem:32"}]}`, "framework F"},
		{"reserved part of the totals", `{"agents":[{"id":"A","resources":"cpus:2;mem:1024","reserved":"cpus(r,p):0.5;mem(r,p):128","connected":true}],
			"offers":[{"id":"o","frameworkId":"F","agentId":"A","role":"*","resources":"cpus:1.5;mem:896"},
			          {"id":"p","frameworkId":"G","agentId":"A","role":"r","resources":"cpus(r,p):0.5;mem(r,p):128"}],
			"roles":[{"role":"*","allocated":"cpus:1.5;mem:896"},{"role":"r","allocated":"cpus:0.5;mem:128"}],
			"frameworkShares":[{"frameworkId":"F","role":"*","allocated":"cpus:1.5;mem:896"},{"frameworkId":"G","role":"r","allocated":"cpus:0.5;mem:128"}]}`, ""},
		{"unreserved beyond what reservations leave", `{"agents":[{"id":"A","resources":"cpus:2;mem:1024","reserved":"cpus(r,p):0.5;mem(r,p):128","connected":true}],
			"offers":[{"id":"o","frameworkId":"F","agentId":"A","role":"*","resources":"cpus:2;mem:896"}],
			"roles":[{"role":"*","allocated":"cpus:2;mem:896"}],
			"frameworkShares":[{"frameworkId":"F","role":"*","allocated":"cpus:2;mem:896"}]}`, "exceed its resources"},
		{"role sum", `{` + agents + `,
			"tasks":[{"id":"t1","frameworkId":"F","agentId":"A","state":"RUNNING","resources":"cpus:1;mem:64"}],
			"roles":[{"role":"*","allocated":"cpus:2;mem:64"}],
			"frameworkShares":[{"frameworkId":"F","role":"*","allocated":"cpus:1;mem:64"}]}`, "role *"},
	} {
		got := CheckAllocation(parse(tc.state))
		switch {
		case tc.bad == "" && len(got) != 0:
			t.Errorf("%s: %v, want none", tc.name, got)
		case tc.bad != "" && (len(got) != 1 || !strings.Contains(got[0], tc.bad)):
			t.Errorf("%s: %v, want one naming %q", tc.name, got, tc.bad)
		}
	}
}

func TestJudge(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	out := func(state string, code int) Outcome {
		return Outcome{Task: "t", Want: 3, Code: code, Agent: "a0", Final: Status{Task: "t", State: state}, Start: at(0), End: at(10)}
	}
	for _, tc := range []struct {
		name   string
		o      Outcome
		faults []Fault
		ok     bool
	}{
		{"expected exit", out("FAILED", 3), nil, true},
		{"wrong code", out("FAILED", 4), nil, false},
		{"lost without fault", out("LOST", 1), nil, false},
		{"lost after agent kill", out("LOST", 1), []Fault{{Kind: AgentKill, Agent: "a0", Start: at(2), End: at(4)}}, true},
		{"lost after another agent's kill", out("LOST", 1), []Fault{{Kind: AgentKill, Agent: "a1", Start: at(2), End: at(4)}}, false},
		{"lost after a fault before it ran", out("LOST", 1), []Fault{{Kind: LinkReset, Agent: "a0", Start: at(-5), End: at(-1)}}, false},
		{"lost after master kill", out("LOST", 1), []Fault{{Kind: MasterKill, Start: at(2), End: at(4)}}, false},
		{"failed after own shim kill", out("FAILED", 1), []Fault{{Kind: ShimKill, Agent: "a0", Task: "t", Start: at(2), End: at(2)}}, true},
		{"failed after other shim kill", out("FAILED", 1), []Fault{{Kind: ShimKill, Agent: "a0", Task: "u", Start: at(2), End: at(2)}}, false},
		{"lost after own checkpoint corrupted", out("LOST", 1), []Fault{{Kind: CheckpointCorrupt, Agent: "a0", Task: "t", Start: at(2), End: at(4)}}, true},
		{"lost after a neighbour's checkpoint corrupted", out("LOST", 1), []Fault{{Kind: CheckpointCorrupt, Agent: "a0", Task: "u", Start: at(2), End: at(4)}}, true},
		{"exit 0 for a failing task", out("FINISHED", 0), nil, false},
		{"never exited", Outcome{Task: "t", Code: -1}, nil, false},
		{"no terminal state", Outcome{Task: "t", Code: 1}, nil, false},
	} {
		why := Judge(tc.o, tc.faults)
		if (why == "") != tc.ok {
			t.Errorf("%s: Judge = %q, want ok=%v", tc.name, why, tc.ok)
		}
	}
}

// TestJudgeNewFaults: the outcomes the fault kinds of HA mode and the
// node faults allow, and those they do not.
func TestJudgeNewFaults(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	out := func(state string, code int) Outcome {
		return Outcome{Task: "t", Framework: "F", Want: 3, Code: code, Agent: "a0", Final: Status{Task: "t", State: state},
			Start: at(0), End: at(10), Recover: 6 * time.Second}
	}
	unlaunched := func(o Outcome) Outcome { o.Agent = ""; return o }
	started := func(o Outcome) Outcome { o.Started = true; return o }
	seen := func(o Outcome) Outcome { o.SeenRunning = true; return o }
	noMasters := func(start int) Outcome {
		return Outcome{Task: "t", Want: 3, Code: 1, NoMasters: true, Start: at(start), End: at(start), Recover: 6 * time.Second}
	}
	leader := func(kind string) []Fault {
		return []Fault{{Kind: kind, Target: "m0", Leader: true, Start: at(2), End: at(4)}}
	}
	for _, tc := range []struct {
		name   string
		o      Outcome
		faults []Fault
		ok     bool
	}{
		{"lost launch after the leader froze", unlaunched(out("LOST", 1)), leader(MasterStop), true},
		{"lost launch after the leader was cut from etcd", unlaunched(out("LOST", 1)), leader(EtcdCut), true},
		{"lost launch after quorum loss", unlaunched(out("LOST", 1)), leader(EtcdQuorumLoss), true},
		{"lost launch after the leader's kill", unlaunched(out("LOST", 1)), leader(MasterKill), true},
		{"lost after it ran (the framework saw it)", started(out("LOST", 1)), leader(MasterStop), false},
		{"lost after it ran (the harness saw it)", seen(out("LOST", 1)), leader(EtcdCut), false},
		{"lost after a single master froze", unlaunched(out("LOST", 1)), []Fault{{Kind: MasterStop, Start: at(2), End: at(4)}}, false},
		{"lost after an etcd member's kill", unlaunched(out("LOST", 1)), []Fault{{Kind: EtcdMemberKill, Target: "e1", Start: at(2), End: at(4)}}, false},
		{"failed after a full disk the agent restarted on", out("FAILED", 1), []Fault{{Kind: DiskFullRecover, Agent: "a0", Start: at(2), End: at(4)}}, true},
		{"lost after a full disk the agent restarted on", out("LOST", 1), []Fault{{Kind: DiskFullRecover, Agent: "a0", Start: at(2), End: at(4)}}, true},
		{"failed after another agent's full disk", out("FAILED", 1), []Fault{{Kind: DiskFullRecover, Agent: "a1", Start: at(2), End: at(4)}}, false},
		{"failed beside a flooding container", out("FAILED", 1), []Fault{{Kind: LogFlood, Agent: "a0", Task: "u", Start: at(2), End: at(4)}}, false},
		{"finished 0 after a reused task ID's kill", out("FINISHED", 0), []Fault{{Kind: FrameworkKill, Task: "t", Framework: "E", Start: at(-5), End: at(1)}}, false},
		{"failed after the shim kill of another framework's task of that ID", out("FAILED", 1), []Fault{{Kind: ShimKill, Task: "t", Framework: "E", Start: at(2), End: at(2)}}, false},
		{"failed after its own shim kill", out("FAILED", 1), []Fault{{Kind: ShimKill, Task: "t", Framework: "F", Start: at(2), End: at(2)}}, true},
		{"no master found during quorum loss", noMasters(3), leader(EtcdQuorumLoss), true},
		{"no master found just after quorum returned", noMasters(9), leader(EtcdQuorumLoss), true},
		{"no master found long after quorum returned", noMasters(11), leader(EtcdQuorumLoss), false},
		{"no master found without a quorum loss", noMasters(3), leader(MasterStop), false},
	} {
		why := Judge(tc.o, tc.faults)
		if (why == "") != tc.ok {
			t.Errorf("%s: Judge = %q, want ok=%v", tc.name, why, tc.ok)
		}
	}
}

func TestCheckForeign(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	end := func(ms int, state, msg string) []TimedStatus {
		return []TimedStatus{{Status: Status{Task: "t", State: state, Message: msg}, At: at(ms)}}
	}
	view := func(ends []TimedStatus, lastRunning int) TaskView {
		v := TaskView{Task: "t", Framework: "F", Start: at(0), Sleep: 8 * time.Second, Ends: ends}
		if lastRunning >= 0 {
			v.LastSeenRunning = at(lastRunning)
		}
		return v
	}
	for _, tc := range []struct {
		name string
		v    TaskView
		bad  string // a substring of the one violation; "" for none
	}{
		{"its own end", view(end(8300, "FINISHED", "command exited with code 0"), 7000), ""},
		{"its own end, listed running a moment after", view(end(8300, "FAILED", "command exited with code 3"), 9500), ""},
		{"an exit sooner than its command can", view(end(5900, "FINISHED", "command exited with code 0"), 5000), "its command sleeps 8s"},
		{"an exit while its container still ran", view(end(9000, "FINISHED", "command exited with code 0"), 14000), "still ran 5s later"},
		{"a kill before the sleep ends (not the command's exit)", view(end(2000, "FAILED", "command killed by signal 9"), 1000), ""},
		{"a launch failure", view(end(300, "FAILED", "run: launch x: no space left on device"), -1), ""},
		{"a LOST while it still ran (the agent was cut)", view(end(3000, "LOST", "agent missed 10 heartbeats"), 6000), ""},
	} {
		got := CheckForeign(tc.v)
		switch {
		case tc.bad == "" && len(got) != 0:
			t.Errorf("%s: %v, want none", tc.name, got)
		case tc.bad != "" && (len(got) != 1 || !strings.Contains(got[0], tc.bad)):
			t.Errorf("%s: %v, want one naming %q", tc.name, got, tc.bad)
		}
	}
}

func TestCheckReach(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	e := Election{At: at(0), Leader: "127.0.0.1:1", Key: "k"}
	const bound = 6 * time.Second
	fw := func(reached int) Reach {
		r := Reach{Name: "framework of task t"}
		if reached >= 0 {
			r.Reached = at(reached)
		}
		return r
	}
	agent := func(reached int) Reach {
		r := Reach{Name: "agent a0", Agent: "a0"}
		if reached >= 0 {
			r.Reached = at(reached)
		}
		return r
	}
	left := func(r Reach, ms int) Reach { r.Left = at(ms); return r }
	for _, tc := range []struct {
		name    string
		next    time.Time
		faults  []Fault
		clients []Reach
		bad     []string // substrings, one per violation
	}{
		{"all in time", time.Time{}, nil, []Reach{fw(2000), agent(5900)}, nil},
		{"a late framework", time.Time{}, nil, []Reach{fw(7000), agent(100)}, []string{"framework of task t reached the leader m1 7s after"}},
		{"a framework that never came", time.Time{}, nil, []Reach{fw(-1)}, []string{"never reached"}},
		{"a framework that left first", time.Time{}, nil, []Reach{left(fw(-1), 3000)}, nil},
		{"a framework that left after the bound", time.Time{}, nil, []Reach{left(fw(-1), 9000)}, []string{"never reached"}},
		{"the next election within the bound", at(4000), nil, []Reach{fw(-1)}, nil},
		{"the next election after the bound", at(7000), nil, []Reach{fw(-1)}, []string{"never reached"}},
		{"the new leader frozen within the bound", time.Time{}, []Fault{{Kind: MasterStop, Start: at(3000), End: at(9000)}}, []Reach{fw(-1)}, nil},
		{"the fault that caused the election", time.Time{}, []Fault{{Kind: MasterStop, Start: at(-4000), End: at(9000)}}, []Reach{fw(-1)}, []string{"never reached"}},
		{"an agent cut off then", time.Time{}, []Fault{{Kind: LinkBlackHole, Agent: "a0", Start: at(-2000), End: at(1000)}}, []Reach{agent(-1)}, nil},
		{"an agent cut off long before", time.Time{}, []Fault{{Kind: LinkBlackHole, Agent: "a0", Start: at(-9000), End: at(-6000)}}, []Reach{agent(-1)}, []string{"agent a0 never"}},
		{"an agent whose process was down", time.Time{}, nil, []Reach{{Name: "agent a0", Agent: "a0", Down: true}}, nil},
		{"another agent cut off", time.Time{}, []Fault{{Kind: AgentKill, Agent: "a1", Start: at(1000), End: at(2000)}}, []Reach{agent(8000)}, []string{"agent a0 reached"}},
	} {
		got := CheckReach(e, "m1", tc.next, bound, tc.faults, tc.clients)
		if len(got) != len(tc.bad) {
			t.Errorf("%s: %v, want %d violations", tc.name, got, len(tc.bad))
			continue
		}
		for i, b := range tc.bad {
			if !strings.Contains(got[i], b) {
				t.Errorf("%s: %q, want it to name %q", tc.name, got[i], b)
			}
		}
	}
}

func TestCheckLogCap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes map[string]int64
		bad   bool
	}{
		{"none yet", nil, false},
		{"under the cap across rotated files", map[string]int64{"stdout": 900, "stdout.1": 1000, "stderr": 50}, false},
		{"exactly the cap", map[string]int64{"stdout": 2000, "stdout.1": 1000}, false},
		{"one file over it", map[string]int64{"stdout": 3001}, true},
		{"rotated files over it", map[string]int64{"stdout": 1000, "stdout.1": 1000, "stdout.2": 1000, "stdout.3": 1}, true},
	} {
		if why := CheckLogCap(tc.sizes, 3000); (why != "") != tc.bad {
			t.Errorf("%s: %q, want a violation %v", tc.name, why, tc.bad)
		}
	}
}

func TestApplicable(t *testing.T) {
	one := Applicable(1)
	for _, k := range HAFaults {
		if slices.Contains(one, k) {
			t.Errorf("%s applies to one master", k)
		}
	}
	if len(one)+len(HAFaults) != len(AllFaults) || !slices.Equal(Applicable(3), AllFaults) {
		t.Errorf("Applicable(1) = %v, Applicable(3) = %v; want all but %v, and all", one, Applicable(3), HAFaults)
	}
}

func TestCheckFailovers(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	el := func(ms ...int) []Election {
		var out []Election
		for _, m := range ms {
			out = append(out, Election{At: at(m), Leader: "127.0.0.1:1", Key: fmt.Sprint(m)})
		}
		return out
	}
	quorum := Fault{Kind: EtcdQuorumLoss, Leader: true, Start: at(0), End: at(10000)}
	stop := Fault{Kind: MasterStop, Target: "m0", Leader: true, Start: at(0), End: at(20000)}
	const bound = 6 * time.Second
	for _, tc := range []struct {
		name   string
		faults []Fault
		els    []Election
		bad    string // a substring of the one violation; "" none
		delays map[string][]time.Duration
	}{
		{"a leader soon after quorum returned", []Fault{quorum}, el(-5000, 14500), "", map[string][]time.Duration{EtcdQuorumLoss: {4500 * time.Millisecond}}},
		{"a leader late after quorum returned", []Fault{quorum}, el(17000), "elected 7s after the quorum returned", map[string][]time.Duration{EtcdQuorumLoss: {7 * time.Second}}},
		{"no leader after quorum returned", []Fault{quorum}, append(el(-5000), Election{At: at(10500), Key: ""}), "no leader was elected", map[string][]time.Duration{}},
		{"the leader kept its term (its key unchanged)", []Fault{quorum}, el(-5000), "", map[string][]time.Duration{}},
		{"another leader fault first", []Fault{quorum, {Kind: MasterKill, Leader: true, Start: at(12000), End: at(13000)}}, el(30000), "",
			map[string][]time.Duration{MasterKill: {18 * time.Second}}},
		{"a frozen leader replaced (a figure, no bound)", []Fault{stop}, el(4300), "", map[string][]time.Duration{MasterStop: {4300 * time.Millisecond}}},
		{"a single master's freeze (no election)", []Fault{{Kind: MasterStop, Start: at(0), End: at(5000)}}, nil, "", map[string][]time.Duration{}},
	} {
		bad, delays := CheckFailovers(tc.faults, tc.els, bound)
		switch {
		case tc.bad == "" && len(bad) != 0:
			t.Errorf("%s: %v, want none", tc.name, bad)
		case tc.bad != "" && (len(bad) != 1 || !strings.Contains(bad[0], tc.bad)):
			t.Errorf("%s: %v, want one naming %q", tc.name, bad, tc.bad)
		}
		if fmt.Sprint(delays) != fmt.Sprint(tc.delays) {
			t.Errorf("%s: delays %v, want %v", tc.name, delays, tc.delays)
		}
	}
}
