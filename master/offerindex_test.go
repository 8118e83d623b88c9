package master

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// checkOfferIndex fails unless every agent's offers are exactly the
// master's offers on that agent, and each is its framework's.
func checkOfferIndex(t *testing.T, m *Master, when string) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, ag := range m.agents {
		var want []string
		for _, o := range m.offers {
			if o.agent == id {
				want = append(want, o.id)
			}
		}
		var got []string
		for _, o := range ag.offers {
			got = append(got, o.id)
			if m.offers[o.id] != o {
				t.Fatalf("%s: agent %s indexes offer %s the master does not hold", when, id, o.id)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: agent %s indexes offers %v, the master holds %v on it", when, id, got, want)
		}
	}
	for id, o := range m.offers {
		if f := m.frameworks[o.fw]; f == nil || f.offers[id] != o {
			t.Fatalf("%s: offer %s is not its framework's", when, id)
		}
	}
}

// TestOfferIndexFollowsOffers: the offers indexed by agent (which
// agentGone and the revocable pool read instead of scanning every
// offer) follow offers through allocation, accept, decline, rescind,
// a dropped agent and a re-registration.
func TestOfferIndexFollowsOffers(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var agents []string
	regs := map[string]*Registration{}
	for i := range 3 {
		reg := &Registration{Hostname: fmt.Sprintf("h%d", i), Resources: "cpus:4;mem:4096"}
		id, _, err := m.registerAgent(reg, "", NewOutbox[ToAgent](cancel, AgentQueue))
		if err != nil {
			t.Fatal(err)
		}
		reg.AgentID = id
		regs[id] = reg
		agents = append(agents, id)
	}
	fwOut := NewOutbox[ToFramework](cancel, FrameworkQueue)
	fw, err := m.Subscribe(&Subscription{Info: &FrameworkInfo{Name: "f"}}, fwOut)
	if err != nil {
		t.Fatal(err)
	}
	offers := func() []*offerEntry {
		var out []*offerEntry
		for _, ev := range fwOut.Take() {
			if made, ok := ev.(*OffersMade); ok {
				out = append(out, made.offers...)
			}
		}
		return out
	}
	m.allocate()
	got := offers()
	if len(got) != 3 {
		t.Fatalf("%d offers, want one per agent", len(got))
	}
	checkOfferIndex(t, m, "after allocation")
	zero := time.Duration(0)
	if err := m.Decline(fw, []string{got[0].id}, &zero); err != nil {
		t.Fatal(err)
	}
	checkOfferIndex(t, m, "after decline")
	if err := m.Accept(AcceptRequest{FrameworkID: fw, OfferIDs: []string{got[1].id}, Refuse: refusing(0),
		Operations: []Operation{launchOf(task("t1", "cpus:1;mem:64"))}}); err != nil {
		t.Fatal(err)
	}
	checkOfferIndex(t, m, "after accept")
	m.allocate()
	offers()
	checkOfferIndex(t, m, "after a second allocation")
	gone := got[2].agent
	m.AgentGone(gone, m.agents[gone].out)
	if n := len(m.agents[gone].offers); n != 0 {
		t.Fatalf("the disconnected agent keeps %d offers", n)
	}
	checkOfferIndex(t, m, "after an agent disconnected")
	m.allocate()
	offers()
	again := got[1].agent
	if _, _, err := m.registerAgent(regs[again], "", NewOutbox[ToAgent](cancel, AgentQueue)); err != nil {
		t.Fatal(err)
	}
	checkOfferIndex(t, m, "after a re-registration")
	m.mu.Lock()
	m.rescindAgentOffersLocked(agents[0])
	m.mu.Unlock()
	checkOfferIndex(t, m, "after rescinding an agent's offers")
}
