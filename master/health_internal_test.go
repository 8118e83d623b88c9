package master

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// healthCase is one scenario of agent health, in the master's own time
// from the start: the master checks every 100 ms (heartbeats 200 ms, 10
// missed: the chaos harness's 2 s) except while it is stalled; at each
// check it runs first, then every agent that is not silent is heard — a
// thawed master's first check comes before the heartbeats its agents
// sent meanwhile.
type healthCase struct {
	name              string
	stallAt, stallFor time.Duration // the master neither checks nor hears in (stallAt, stallAt+stallFor)
	silent            [2][2]time.Duration
	tenureLostAt      time.Duration // 0: the leadership holds throughout
	end               time.Duration
	wantLost          [2]time.Duration // when each agent's task goes LOST; 0: never
	wantRefusedAtEnd  bool             // a framework call at the end is refused ErrNotLeader
}

const never = time.Hour

// TestAgentHealthCountsOnlyListening: an agent's silence counts only
// while the master could listen. Before, a master that was stopped
// (SIGSTOP) or stalled for longer than the agent timeout declared every
// agent unreachable the moment it ran again and sent their tasks LOST:
// a 2.36 s freeze did it with a 2 s timeout, and after a 66 s freeze
// agents that were back within their reconnect backoff found their
// tasks LOST (issue 30, chaos master-stop); a leader stalled on a dying
// etcd member declared both agents unreachable in one millisecond
// (chaos etcd-member-kill, etcd-cut).
func TestAgentHealthCountsOnlyListening(t *testing.T) {
	for _, tc := range []healthCase{{
		name:    "a 2.36 s freeze: the heartbeats come after it",
		stallAt: time.Second, stallFor: 2360 * time.Millisecond,
		silent: [2][2]time.Duration{{never, never}, {never, never}},
		end:    8 * time.Second,
	}, {
		name:    "a 66 s freeze: one agent back after its reconnect backoff, one never",
		stallAt: time.Second, stallFor: 66 * time.Second,
		silent: [2][2]time.Duration{{time.Second, 71 * time.Second}, {time.Second, never}},
		end:    90 * time.Second,
		// 67 s + the re-registration window (10 s), first check after it
		wantLost: [2]time.Duration{0, 77100 * time.Millisecond},
	}, {
		name:    "a 0.6 s stall does not count against an agent that is silent",
		stallAt: 5 * time.Second, stallFor: 600 * time.Millisecond,
		silent: [2][2]time.Duration{{never, never}, {4 * time.Second, never}},
		end:    10 * time.Second,
		// last heard 3.9 s, 2 s of listening later: 3.9 + 0.5 (deaf) + 2 s
		wantLost: [2]time.Duration{0, 6500 * time.Millisecond},
	}, {
		name:   "one agent silent while the other is heard: unreachable after the timeout",
		silent: [2][2]time.Duration{{never, never}, {5 * time.Second, never}},
		end:    10 * time.Second,
		// last heard 4.9 s, first check more than 2 s later
		wantLost: [2]time.Duration{0, 7 * time.Second},
	}, {
		name:   "every agent silent at once: a grace first, then unreachable",
		silent: [2][2]time.Duration{{5 * time.Second, never}, {5 * time.Second, never}},
		end:    25 * time.Second,
		// due at 7 s, given the window (10 s), declared at the first check past it
		wantLost: [2]time.Duration{17100 * time.Millisecond, 17100 * time.Millisecond},
	}, {
		name:     "every agent silent at once, one back within the grace",
		silent:   [2][2]time.Duration{{5 * time.Second, 12 * time.Second}, {5 * time.Second, never}},
		end:      25 * time.Second,
		wantLost: [2]time.Duration{0, 17100 * time.Millisecond},
	}, {
		name:    "a leader thawed after its term: nothing declared, calls refused",
		stallAt: time.Second, stallFor: 8 * time.Second,
		silent:       [2][2]time.Duration{{time.Second, never}, {time.Second, never}},
		tenureLostAt: 4 * time.Second,
		end:          40 * time.Second, wantRefusedAtEnd: true,
	}} {
		t.Run(tc.name, func(t *testing.T) { runHealthCase(t, tc) })
	}
}

type fakeTenure struct{ lost atomic.Bool }

func (f *fakeTenure) Held() bool { return !f.lost.Load() }

func runHealthCase(t *testing.T, tc healthCase) {
	tenure := &fakeTenure{}
	m, err := New(Options{HeartbeatInterval: 200 * time.Millisecond, MaxMissedHeartbeats: 10, Tenure: tenure})
	if err != nil {
		t.Fatal(err)
	}
	_, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var agents [2]string
	for i := range agents {
		reg := &Registration{Hostname: fmt.Sprintf("h%d", i), Resources: "cpus:1;mem:256"}
		if agents[i], _, err = m.registerAgent(reg, "", NewOutbox[ToAgent](cancel, AgentQueue)); err != nil {
			t.Fatal(err)
		}
	}
	fwOut := NewOutbox[ToFramework](cancel, FrameworkQueue)
	fw, err := m.Subscribe(&Subscription{Info: &FrameworkInfo{Name: "f"}}, fwOut)
	if err != nil {
		t.Fatal(err)
	}
	m.allocate()
	offers := map[string]string{} // agent → offer
	for _, ev := range fwOut.Take() {
		if made, ok := ev.(*OffersMade); ok {
			for _, o := range made.offers {
				offers[o.agent] = o.id
			}
		}
	}
	task := func(i int) string { return fmt.Sprintf("t%d", i) }
	for i, ag := range agents {
		if offers[ag] == "" {
			t.Fatalf("no offer of agent %d", i)
		}
		if err := m.Accept(AcceptRequest{FrameworkID: fw, OfferIDs: []string{offers[ag]},
			Operations: []Operation{{Kind: OpLaunch, Tasks: []TaskSpec{
				{Info: TaskInfo{ID: task(i), Command: []string{"true"}}, Resources: "cpus:0.5;mem:64"}}}}}); err != nil {
			t.Fatal(err)
		}
		m.AgentMessage(ag, m.agents[ag].out, &TaskStatus{
			TaskID: task(i), AgentID: ag, FrameworkID: fw, State: TaskRunning, UUID: "u" + task(i)})
	}
	_ = fwOut.Take()

	t0 := time.Now()
	heard := func(i int, at time.Duration) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if ag := m.agents[agents[i]]; ag != nil && !ag.unreachable {
			ag.lastSeen = t0.Add(at)
		}
	}
	var lostAt [2]time.Duration
	const tick = 100 * time.Millisecond
	for at := time.Duration(0); at <= tc.end; at += tick {
		if tc.stallFor > 0 && at > tc.stallAt && at < tc.stallAt+tc.stallFor {
			at = tc.stallAt + tc.stallFor // the first check after the stall
		}
		if tc.tenureLostAt > 0 && at >= tc.tenureLostAt {
			tenure.lost.Store(true)
		}
		m.checkTimeouts(t0.Add(at))
		for _, ev := range fwOut.Take() {
			if st, ok := ev.(*TaskStatus); ok && st.State == TaskLost {
				for i := range lostAt {
					if st.TaskID == task(i) && lostAt[i] == 0 {
						lostAt[i] = at
					}
				}
			}
		}
		for i, s := range tc.silent {
			if at < s[0] || at >= s[1] {
				heard(i, at)
			}
		}
	}
	if lostAt != tc.wantLost {
		t.Errorf("tasks LOST at %v, want %v (0: never, within %v)", lostAt, tc.wantLost, tc.end)
	}
	err = m.Reconcile(fw, nil)
	if refused := errors.Is(err, ErrNotLeader); refused != tc.wantRefusedAtEnd {
		t.Errorf("a reconciliation at the end: %v, want refused %v", err, tc.wantRefusedAtEnd)
	}
}
