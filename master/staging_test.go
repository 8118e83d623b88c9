package master

import (
	"context"
	"testing"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
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
	reg := &pb.Register{Hostname: "h", Resources: "cpus:4;mem:4096"}
	agent, _, err := m.registerAgent(registrationFromPB(reg), "", newOutbox[toAgent](cancel, agentQueue))
	if err != nil {
		t.Fatal(err)
	}
	fwOut := newOutbox[toFramework](cancel, frameworkQueue)
	fw, offer := subscribeAndOffer(t, m, fwOut)
	if err := m.accept(acceptRequestFromPB(&pb.AcceptRequest{FrameworkId: fw, OfferIds: []string{offer}, Filters: &pb.Filters{RefuseSeconds: 0},
		Operations: []*pb.Operation{{Op: &pb.Operation_Launch_{Launch: &pb.Operation_Launch{Tasks: []*pb.TaskInfo{
			{TaskId: "t1", Resources: "cpus:3;mem:64", Command: []string{"true"}}}}}}}})); err != nil {
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
	reg.AgentId = agent
	if _, _, err := m.registerAgent(registrationFromPB(reg), "", newOutbox[toAgent](cancel, agentQueue)); err != nil {
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
	var lost *taskStatus
	for _, ev := range fwOut.take() {
		if st, ok := ev.(*taskStatus); ok && st.taskID == "t1" {
			lost = st
		}
	}
	if lost == nil || lost.state != taskLost || lost.reason != ReasonUnknownOnAgent {
		t.Fatalf("framework got %+v, want LOST %s", lost, ReasonUnknownOnAgent)
	}
	// Its cpus are free again: the next cycle offers all 4.
	m.allocate()
	var offered resources.Value
	for _, ev := range fwOut.take() {
		if made, ok := ev.(*offersMade); ok {
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
func subscribeAndOffer(t *testing.T, m *Master, c *outbox[toFramework]) (fw, offer string) {
	t.Helper()
	fw, err := m.subscribe(subscriptionFromPB(&pb.SubscribeRequest{Framework: &pb.FrameworkInfo{Name: "f"}}), c)
	if err != nil {
		t.Fatal(err)
	}
	m.allocate()
	for _, ev := range c.take() {
		if made, ok := ev.(*offersMade); ok && offer == "" {
			offer = made.offers[0].id
		}
	}
	if offer == "" {
		t.Fatal("no offer")
	}
	return fw, offer
}
