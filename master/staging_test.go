package master

import (
	"context"
	"testing"
	"time"

	"github.com/brimnode/brim/resources"
)

// TestUnseenStagingGoesLost: a task still STAGING that its agent
// re-registers without (the RunTask went down with the old stream, or
// the agent died before checkpointing the launch) stays STAGING for two
// heartbeats — a launch in flight may still report — then goes LOST with
// its resources back in the allocator. Before, it stayed STAGING forever
// (found by the chaos harness).
func TestUnseenStagingGoesLost(t *testing.T) {
	m, err := New(Options{HeartbeatInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	reg := &Registration{Hostname: "h", Resources: "cpus:4;mem:4096"}
	agent, _, err := m.registerAgent(reg, "", NewOutbox[ToAgent](cancel, AgentQueue))
	if err != nil {
		t.Fatal(err)
	}
	fwOut := NewOutbox[ToFramework](cancel, FrameworkQueue)
	fw, offer := subscribeAndOffer(t, m, fwOut)
	if err := m.Accept(AcceptRequest{FrameworkID: fw, OfferIDs: []string{offer}, Refuse: refusing(0),
		Operations: []Operation{launchOf(task("t1", "cpus:3;mem:64"))}}); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		for _, ts := range m.State().Tasks {
			if ts.ID == "t1" {
				return ts.State
			}
		}
		return "gone"
	}
	if got := state(); got != "STAGING" {
		t.Fatalf("after launch: %s", got)
	}
	// The agent comes back on a new stream without the task.
	reg.AgentID = agent
	if _, _, err := m.registerAgent(reg, "", NewOutbox[ToAgent](cancel, AgentQueue)); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	m.checkTimeouts(now)
	if got := state(); got != "STAGING" {
		t.Fatalf("at re-registration: %s, want STAGING within the grace", got)
	}
	// Checked every half heartbeat, as Run does: a longer gap would be
	// the master's own stall, which does not count (health.go).
	for d := 500 * time.Millisecond; d <= 3*time.Second; d += 500 * time.Millisecond {
		m.checkTimeouts(now.Add(d))
	}
	if got := state(); got != "gone" {
		t.Fatalf("after the grace: %s, want forgotten", got)
	}
	var lost *TaskStatus
	for _, ev := range fwOut.Take() {
		if st, ok := ev.(*TaskStatus); ok && st.TaskID == "t1" {
			lost = st
		}
	}
	if lost == nil || lost.State != TaskLost || lost.Reason != ReasonUnknownOnAgent {
		t.Fatalf("framework got %+v, want LOST %s", lost, ReasonUnknownOnAgent)
	}
	// Its cpus are free again: the next cycle offers all 4.
	m.allocate()
	var offered resources.Value
	for _, ev := range fwOut.Take() {
		if made, ok := ev.(*OffersMade); ok {
			for _, o := range made.offers {
				offered += o.res.Scalar(resources.CPUs)
			}
		}
	}
	if offered != resources.FromInt(4) {
		t.Fatalf("offered %v cpus after the LOST, want 4", offered)
	}
}

// subscribeAndOffer subscribes a framework "f" with outbox c, runs an
// allocation cycle and returns the framework's ID and its first offer.
func subscribeAndOffer(t *testing.T, m *Master, c *Outbox[ToFramework]) (fw, offer string) {
	t.Helper()
	fw, err := m.Subscribe(&Subscription{Info: &FrameworkInfo{Name: "f"}}, c)
	if err != nil {
		t.Fatal(err)
	}
	m.allocate()
	for _, ev := range c.Take() {
		if made, ok := ev.(*OffersMade); ok && offer == "" {
			offer = made.offers[0].id
		}
	}
	if offer == "" {
		t.Fatal("no offer")
	}
	return fw, offer
}
