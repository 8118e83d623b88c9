package chaos

import (
	"encoding/json"
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
			out = append(out, Status{Task: "t", State: s})
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
