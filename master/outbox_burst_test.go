package master

import (
	"context"
	"fmt"
	"testing"
)

// TestLaunchBurstKeepsAgentStream: one ACCEPT launching many small tasks
// on one agent queues a RunTask each before the stream's sender takes
// any. Before, the agent's queue held 256 messages and such a burst (or
// a slow agent's status acknowledgements piling up behind 30 large
// RunTasks, as integration TestManyLargeTasksReregister saw in CI) ended
// the agent's stream: every RunTask still queued was lost and its task
// went LOST two heartbeats after the agent re-registered.
func TestLaunchBurstKeepsAgentStream(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, endStream := context.WithCancel(context.Background())
	t.Cleanup(endStream)
	agOut := NewOutbox[ToAgent](endStream, AgentQueue) // nothing drains it
	if _, _, err := m.registerAgent((&Registration{Hostname: "h", Resources: "cpus:64;mem:65536"}), "", agOut); err != nil {
		t.Fatal(err)
	}
	fw, offer := subscribeAndOffer(t, m, NewOutbox[ToFramework](func() {}, FrameworkQueue))
	const n = 1000
	tasks := make([]TaskSpec, n)
	for i := range tasks {
		tasks[i] = task(fmt.Sprintf("t%04d", i), "cpus:0.01;mem:32")
	}
	if err := m.Accept(AcceptRequest{FrameworkID: fw, OfferIDs: []string{offer}, Operations: []Operation{launchOf(tasks...)}}); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the agent's stream was ended by a burst of %d RunTasks: %v", n, agOut.CloseCause())
	}
	runs := 0
	for _, msg := range agOut.Take() {
		if _, ok := msg.(*RunTask); ok {
			runs++
		}
	}
	if runs != n {
		t.Fatalf("%d RunTasks queued, want %d", runs, n)
	}
}
