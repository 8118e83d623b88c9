package master_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/scheduler"
)

// strictAt is a strict demand of cpus:2;mem:1024 for framework fw,
// starting at at (a 5-minute window) for 30 minutes.
func strictAt(id, fw string, at time.Time) string {
	return `{"DemandID": "` + id + `", "FrameworkID": "` + fw + `", "Resources": "cpus:2;mem:1024",
	  "Start": {"Time": ["` + at.Format(time.RFC3339) + `", "+5m"], "Strategy": "strict"},
	  "Duration": {"Time": [null, "+30m"], "Strategy": "strict"}}`
}

// nextUpdateOf waits for an update of task id, skipping others.
func nextUpdateOf(t *testing.T, f *framework, id string) *pb.TaskStatus {
	t.Helper()
	for {
		if st := f.nextUpdate(t); st.TaskId == id {
			return st
		}
	}
}

// TestDemandPreemptsAtStrictStart: a DRF task still holding a strict
// demand's booked capacity ReclaimAhead before its start is preempted
// (its framework told KILLED, CONTAINER_PREEMPTED, naming the demand),
// and the demand is handed its capacity at the start. Before, the demand
// failed "not allocatable in time" and the task ran on.
func TestDemandPreemptsAtStrictStart(t *testing.T) {
	start := time.Now().UTC().Truncate(time.Second).Add(time.Hour)
	clock := &testClock{t: start.Add(-10 * time.Minute)}
	c := newCluster(t, master.Options{Demands: master.DemandOptions{Lead: time.Minute, PickUp: time.Hour,
		ReclaimAhead: 15 * time.Second, Clock: clock.Now}})
	c.startAgent(t.TempDir(), newFakeRunner())
	waitAgents(t, c.m, 1)
	batch := c.startFramework("batch")
	launch(t, batch, batch.nextOffers(t)[0], "b1", "cpus:4;mem:4096")
	batch.expectStates(t, "b1", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING)
	f := c.startDemandFramework("planned", false)
	if code, body := postDemands(t, httpHandler(c.api, nil), strictAt("s", f.d.FrameworkID(), start)); code != http.StatusOK || !strings.Contains(body, `"ACCEPTED"`) {
		t.Fatalf("POST /demands: %d %s", code, body)
	}
	clock.Set(start.Add(-time.Minute))
	waitDemand(t, c.m, "s", demand.Allocating)
	clock.Set(start.Add(-15 * time.Second))
	st := nextUpdateOf(t, batch, "b1")
	if st.State != pb.TaskState_TASK_KILLED || st.Reason != pb.ReasonContainerPreempted || !strings.Contains(st.Message, "demand s") {
		t.Fatalf("b1: %s %s %q, want KILLED, CONTAINER_PREEMPTED naming demand s", st.State, st.Reason, st.Message)
	}
	clock.Set(start)
	if o := f.nextDemandOffer(t, "s"); resourcesCPUs(o.Resources) != 2 {
		t.Fatalf("demand offer %s, want cpus:2", o.Resources)
	}
}

// TestDemandNoPreempt: with preemption off the same task runs on and the
// demand misses its start, as before.
func TestDemandNoPreempt(t *testing.T) {
	start := time.Now().UTC().Truncate(time.Second).Add(time.Hour)
	clock := &testClock{t: start.Add(-10 * time.Minute)}
	c := newCluster(t, master.Options{Demands: master.DemandOptions{Lead: time.Minute, PickUp: time.Hour,
		ReclaimAhead: 15 * time.Second, NoPreempt: true, Clock: clock.Now}})
	c.startAgent(t.TempDir(), newFakeRunner())
	waitAgents(t, c.m, 1)
	batch := c.startFramework("batch")
	launch(t, batch, batch.nextOffers(t)[0], "b1", "cpus:4;mem:4096")
	batch.expectStates(t, "b1", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING)
	f := c.startDemandFramework("planned", false)
	if code, body := postDemands(t, httpHandler(c.api, nil), strictAt("s", f.d.FrameworkID(), start)); code != http.StatusOK {
		t.Fatalf("POST /demands: %d %s", code, body)
	}
	clock.Set(start.Add(6 * time.Minute))
	waitDemand(t, c.m, "s", demand.Failed)
	select {
	case st := <-batch.updates:
		t.Fatalf("b1 touched without preemption: %s %s", st.State, st.Reason)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestDemandLendsHeldCapacity: capacity held ahead of a strict start is
// offered as revocable to a framework that takes revocable resources;
// a revocable task launched on it reaches the agent marked lent
// (admitted against its own resources, not its oversubscription), is
// preempted ReclaimAhead before the start (naming the demand), and the demand is handed the capacity at
// its start.
func TestDemandLendsHeldCapacity(t *testing.T) {
	start := time.Now().UTC().Truncate(time.Second).Add(time.Hour)
	clock := &testClock{t: start.Add(-10 * time.Minute)}
	c := newCluster(t, master.Options{Demands: master.DemandOptions{Lead: 5 * time.Minute, PickUp: time.Hour,
		ReclaimAhead: 15 * time.Second, Clock: clock.Now}})
	runner := newFakeRunner()
	c.startAgent(t.TempDir(), runner)
	waitAgents(t, c.m, 1)
	f := c.startDemandFramework("planned", false)
	if code, body := postDemands(t, httpHandler(c.api, nil), strictAt("s", f.d.FrameworkID(), start)); code != http.StatusOK {
		t.Fatalf("POST /demands: %d %s", code, body)
	}
	rev := c.startFrameworkWith(scheduler.Options{Name: "rev", Revocable: true, FailoverTimeout: time.Minute})
	clock.Set(start.Add(-5 * time.Minute))
	waitDemand(t, c.m, "s", demand.Allocating)
	var lent *pb.Offer
	for lent == nil {
		for _, o := range rev.nextOffers(t) {
			if strings.Contains(o.Resources, "{REV}") {
				lent = o
				continue
			}
			_ = rev.d.Decline(context.Background(), []string{o.Id}, 0)
		}
	}
	if !strings.Contains(lent.Resources, "cpus{REV}:2") {
		t.Fatalf("lent offer %s, want the held cpus:2 as revocable", lent.Resources)
	}
	launch(t, rev, lent, "r1", "cpus{REV}:2;mem{REV}:1024")
	rev.expectStates(t, "r1", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING)
	runner.mu.Lock()
	lentRun := runner.tasks["r1"] != nil && runner.tasks["r1"].Task.Lent
	runner.mu.Unlock()
	if !lentRun {
		t.Fatal("r1 reached the agent without RunTask.lent: it would be admitted against the agent's oversubscription pool")
	}
	clock.Set(start.Add(-15 * time.Second))
	st := nextUpdateOf(t, rev, "r1")
	if st.State != pb.TaskState_TASK_KILLED || st.Reason != pb.ReasonContainerPreempted || !strings.Contains(st.Message, "demand s") {
		t.Fatalf("r1: %s %s %q, want KILLED, CONTAINER_PREEMPTED naming demand s", st.State, st.Reason, st.Message)
	}
	clock.Set(start)
	if o := f.nextDemandOffer(t, "s"); resourcesCPUs(o.Resources) != 2 || strings.Contains(o.Resources, "{REV}") {
		t.Fatalf("demand offer %s, want cpus:2, not revocable", o.Resources)
	}
}

func putDemand(t *testing.T, h http.Handler, id, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/demands/"+id, strings.NewReader(body)))
	return rec.Code, rec.Body.String()
}

// TestDemandUpdateAndResubmit: the same document posted again is 200
// with the stored demand (it was 409); another document under its ID is
// 409; PUT /demands/ID moves its window (planned again), refuses a
// DemandID other than the path's, an unknown demand (404) and a demand
// handed over already (409).
func TestDemandUpdateAndResubmit(t *testing.T) {
	start := time.Now().UTC().Truncate(time.Second).Add(time.Hour)
	clock := &testClock{t: start.Add(-10 * time.Minute)}
	c := newCluster(t, master.Options{Store: storeOpener(t)(), Demands: master.DemandOptions{Lead: time.Minute, PickUp: time.Hour, Clock: clock.Now}})
	c.startAgent(t.TempDir(), newFakeRunner())
	waitAgents(t, c.m, 1)
	f := c.startDemandFramework("planned", false)
	h := httpHandler(c.api, nil)
	fw := f.d.FrameworkID()
	doc := strictAt("u", fw, start)
	if code, body := postDemands(t, h, doc); code != http.StatusOK {
		t.Fatalf("POST: %d %s", code, body)
	}
	if code, body := postDemands(t, h, doc); code != http.StatusOK || !strings.Contains(body, `"id": "u"`) {
		t.Fatalf("POST again: %d %s, want 200 with the stored demand", code, body)
	}
	if code, body := postDemands(t, h, strictAt("u", fw, start.Add(time.Minute))); code != http.StatusConflict {
		t.Fatalf("POST another document: %d %s, want 409", code, body)
	}
	later := start.Add(20 * time.Minute)
	code, body := putDemand(t, h, "u", strictAt("u", fw, later))
	if code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if d := getDemands(t, h)["u"]; !d.Start.Equal(later) || d.State != demand.Accepted {
		t.Fatalf("after PUT: %s start %s, want ACCEPTED at %s", d.State, d.Start, later)
	}
	if code, body := putDemand(t, h, "u", strictAt("v", fw, later)); code != http.StatusBadRequest || !strings.Contains(body, "DemandID") {
		t.Fatalf("PUT another ID: %d %s", code, body)
	}
	if code, body := putDemand(t, h, "ghost", `{"Resources": "cpus:1"}`); code != http.StatusNotFound {
		t.Fatalf("PUT unknown: %d %s", code, body)
	}
	clock.Set(later)
	f.nextDemandOffer(t, "u")
	if code, body := putDemand(t, h, "u", strictAt("u", fw, later.Add(time.Hour))); code != http.StatusConflict || !strings.Contains(body, "handed over") {
		t.Fatalf("PUT handed over: %d %s", code, body)
	}
}
