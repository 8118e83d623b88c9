package master

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// apiRig is a master with two agents and two frameworks whose outboxes
// nobody drains but the rig itself, driven call by call through the
// handlers the gRPC layer calls (after authentication).
type apiRig struct {
	m        *Master
	agents   []string
	agOut    map[string]*Outbox[ToAgent]
	regs     map[string]*Registration
	fws      []string
	fwOut    map[string]*Outbox[ToFramework]
	offers   []string // every offer ID seen, outstanding or not
	uuids    []string // every status UUID sent
	noCancel func()   // the outboxes never end a stream here
}

func newAPIRig(t testing.TB) *apiRig {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &apiRig{m: m, agOut: map[string]*Outbox[ToAgent]{}, regs: map[string]*Registration{}, fwOut: map[string]*Outbox[ToFramework]{}, noCancel: func() {}}
	for i := range 2 {
		reg := &Registration{Hostname: fmt.Sprintf("h%d", i), Resources: "cpus:4;mem:4096;ports:[31000-31009]"}
		c := NewOutbox[ToAgent](r.noCancel, AgentQueue)
		id, _, err := m.registerAgent(reg, "", c)
		if err != nil {
			t.Fatal(err)
		}
		reg.AgentID = id
		r.agents, r.agOut[id], r.regs[id] = append(r.agents, id), c, reg
	}
	for i, roles := range [][]string{{"web"}, {"web", "batch"}} {
		c := NewOutbox[ToFramework](r.noCancel, FrameworkQueue)
		id, err := m.Subscribe(&Subscription{Info: &FrameworkInfo{Name: fmt.Sprintf("f%d", i), Roles: roles, Revocable: i == 1}}, c)
		if err != nil {
			t.Fatal(err)
		}
		r.fws, r.fwOut[id] = append(r.fws, id), c
	}
	return r
}

// drain takes what the master queued for its peers, keeping the offer
// IDs and status UUIDs for later calls.
func (r *apiRig) drain() {
	for _, c := range r.fwOut {
		for _, ev := range c.Take() {
			switch e := ev.(type) {
			case *OffersMade:
				for _, o := range e.offers {
					r.offers = append(r.offers, o.id)
				}
			case *TaskStatus:
				if e.UUID != "" {
					r.uuids = append(r.uuids, e.UUID)
				}
			}
		}
	}
	for _, c := range r.agOut {
		c.Take()
	}
}

// fuzzInput hands out the bytes of a fuzz input as small choices; past
// its end every choice is 0.
type fuzzInput struct {
	b []byte
	i int
}

func (in *fuzzInput) next() int {
	if in.i >= len(in.b) {
		return 0
	}
	in.i++
	return int(in.b[in.i-1])
}

func (in *fuzzInput) done() bool { return in.i >= len(in.b) }

// pick chooses among the known values, a duplicate-prone few and junk.
func pick(in *fuzzInput, known []string, junk ...string) string {
	all := append(slices.Clone(known), junk...)
	if len(all) == 0 {
		return ""
	}
	return all[in.next()%len(all)]
}

func pickN(in *fuzzInput, known []string, junk ...string) []string {
	n := in.next() % 4
	out := make([]string, n)
	for i := range out {
		out[i] = pick(in, known, junk...)
	}
	return out
}

var (
	fuzzResources = []string{"cpus:1;mem:64", "cpus:0.5;mem:32", "cpus(web):1;mem:64", "cpus{REV}:1;mem:64",
		"cpus:100;mem:1", "ports:[31000-31001];cpus:1;mem:1", "", "cpus:-1", "garbage", "mem:0"}
	fuzzTasks = []string{"t0", "t1", "t2", "t3"}
	fuzzRoles = []string{"web", "batch", "*", "", "other"}
)

// step runs one call chosen by in against the master.
func (r *apiRig) step(in *fuzzInput) {
	m := r.m
	fw := pick(in, r.fws, "no-such-framework")
	refuse := time.Duration(in.next()%3) * time.Second
	switch in.next() % 12 {
	case 0:
		m.allocate()
	case 1:
		var tasks []TaskSpec
		for range in.next() % 3 {
			tasks = append(tasks, task(pick(in, fuzzTasks, ""), pick(in, fuzzResources)))
		}
		ops := []Operation{launchOf(tasks...)}
		switch in.next() % 4 {
		case 1:
			ops = append(ops, Operation{Kind: OpReserve, Resources: pick(in, fuzzResources)})
		case 2:
			ops = append(ops, Operation{Kind: OpUnreserve, Resources: pick(in, fuzzResources)})
		}
		_ = m.Accept(AcceptRequest{FrameworkID: fw, OfferIDs: pickN(in, r.offers, "no-such-offer"),
			Operations: ops, Refuse: refusing(refuse)})
	case 2:
		_ = m.Decline(fw, pickN(in, r.offers, "no-such-offer"), &refuse)
	case 3:
		_ = m.Kill(fw, pick(in, fuzzTasks, ""))
	case 4:
		_ = m.Acknowledge(fw, pick(in, r.agents, "", "no-such-agent"), pick(in, fuzzTasks, ""), pick(in, r.uuids, "", "no-such-uuid"))
	case 5:
		_ = m.Reconcile(fw, pickN(in, fuzzTasks, ""))
	case 6:
		_ = m.UpdateTask(fw, pick(in, fuzzTasks, ""), pick(in, fuzzResources), pickN(in, r.offers, "no-such-offer"))
	case 7:
		_ = m.Revive(fw, pickN(in, fuzzRoles))
	case 8:
		_ = m.Suppress(fw, pickN(in, fuzzRoles))
	case 9: // the agent reports a task
		ag := pick(in, r.agents)
		states := []TaskState{TaskStarting, TaskRunning, TaskFinished,
			TaskFailed, TaskKilled, TaskLost}
		m.AgentMessage(ag, r.agOut[ag], (&TaskStatus{
			TaskID: pick(in, fuzzTasks, ""), AgentID: pick(in, r.agents, "no-such-agent"), FrameworkID: pick(in, r.fws, "no-such-framework"),
			State: states[in.next()%len(states)], UUID: fmt.Sprintf("u%d", in.next()), Resources: pick(in, fuzzResources)}))
	case 10: // the agent's stream breaks; it comes back on a new one
		ag := pick(in, r.agents)
		m.AgentGone(ag, r.agOut[ag])
		if in.next()%2 == 0 {
			c := NewOutbox[ToAgent](r.noCancel, AgentQueue)
			if _, _, err := m.registerAgent(r.regs[ag], "", c); err == nil {
				r.agOut[ag] = c
			}
		}
	case 11:
		now := time.Now().Add(time.Duration(in.next()) * time.Second)
		m.checkTimeouts(now)
	}
	r.drain()
}

// check fails unless the master's records agree with each other.
func (r *apiRig) check(t *testing.T, when string) {
	t.Helper()
	checkOfferIndex(t, r.m, when)
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, tk := range m.tasks {
		if ag := m.agents[tk.agent]; ag == nil || ag.tasks[id] != tk {
			t.Fatalf("%s: task %s is not its agent's", when, id)
		}
		if f := m.frameworks[tk.fw]; f == nil || f.tasks[id] != tk {
			t.Fatalf("%s: task %s is not its framework's", when, id)
		}
	}
}

// FuzzFrameworkAPI drives the master with hostile and confused calls —
// stale, foreign, repeated and unknown offer, task and agent IDs, bad
// resources, agents that drop and come back, status updates for tasks
// nobody launched — and checks that no call panics (a panic in a gRPC
// handler ends the master) and that offers and tasks stay recorded
// consistently. A DECLINE naming one offer twice panicked before.
func FuzzFrameworkAPI(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 2, 2, 0, 0})             // decline the same offer twice
	f.Add([]byte{0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 0, 0}) // launch, then report it
	for seed := range 32 {
		b := make([]byte, 256)
		x := uint32(seed*2654435761 + 1)
		for i := range b {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			b[i] = byte(x)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := newAPIRig(t)
		in := &fuzzInput{b: b}
		for step := 0; !in.done() && step < 500; step++ {
			r.step(in)
			r.check(t, fmt.Sprintf("step %d", step))
		}
	})
}
