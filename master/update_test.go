package master_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/master/api"
	"github.com/brimnode/brim/master/boltstore"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var _ masterlink.TaskUpdater = (*fakeRunner)(nil)

// UpdateTask makes the fake runner a TaskUpdater: it records the new
// resources (reported on re-registration), fails while failUpdates is set
// and waits for holdUpdates to be closed when it is set.
func (r *fakeRunner) UpdateTask(ctx context.Context, _, id string, res resources.Resources) error {
	r.mu.Lock()
	hold, fail := r.holdUpdates, r.failUpdates
	r.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tasks[id]
	switch {
	case t == nil:
		return errors.New("no such task")
	case fail:
		return errors.New("memory limit below usage")
	}
	t.Task.Resources = res
	r.updates = append(r.updates, res.String())
	return nil
}

// startWithTask starts a framework that launches task id on its first
// offer and waits for it to run; it returns the framework and its ID.
func startWithTask(t *testing.T, c *cluster, id, res string) (*framework, string) {
	t.Helper()
	f := c.startFramework("fw")
	launch(t, f, f.nextOffers(t)[0], id, res)
	f.expectStates(t, id, pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING)
	return f, f.d.FrameworkID()
}

// updateTask calls UpdateTask and returns the gRPC code.
func updateTask(f *framework, id, res string, offers ...string) (codes.Code, error) {
	err := f.d.UpdateTask(context.Background(), id, res, offers)
	return status.Code(err), err
}

// nextUpdateOf skips other tasks' updates.
func (f *framework) nextUpdateOf(t *testing.T, id string) *pb.TaskStatus {
	t.Helper()
	for {
		if st := f.nextUpdate(t); st.TaskId == id {
			return st
		}
	}
}

// offerOn waits for an offer of agent (any agent when ""); earlier offers
// stay outstanding.
func (f *framework) offerOn(t *testing.T, agent string) *pb.Offer {
	t.Helper()
	for {
		for _, o := range f.nextOffers(t) {
			if agent == "" || o.AgentId == agent {
				return o
			}
		}
	}
}

// taskOf is task id in State.
func taskOf(t *testing.T, st master.State, id string) api.TaskState {
	t.Helper()
	for _, ts := range st.Tasks {
		if ts.ID == id {
			return ts
		}
	}
	t.Fatalf("task %s not in state: %+v", id, st.Tasks)
	return api.TaskState{}
}

// checkAccounting checks, on one snapshot, that the allocator holds for
// the framework exactly its tasks' resources and its outstanding offers:
// nothing an update took or gave back is lost or counted twice.
func checkAccounting(t *testing.T, m *master.Master, fw string) master.State {
	t.Helper()
	st := m.State()
	var want resources.Resources
	for _, ts := range st.Tasks {
		if ts.FrameworkID == fw {
			want = want.Add(resources.MustParse(ts.Resources))
		}
	}
	for _, o := range st.Offers {
		if o.FrameworkID == fw {
			want = want.Add(resources.MustParse(o.Resources))
		}
	}
	var got resources.Resources
	for _, s := range st.Shares {
		if s.FrameworkID == fw {
			got = got.Add(resources.MustParse(s.Allocated))
		}
	}
	if !got.Equal(want) {
		t.Fatalf("allocator holds %s for %s, want tasks + offers = %s", got, fw, want)
	}
	return st
}

// waitFree waits until the framework's outstanding offers add up to free
// (it is the only framework, so it is offered everything not in use).
func waitFree(t *testing.T, m *master.Master, fw string, free resources.Resources) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var offered resources.Resources
		for _, o := range m.State().Offers {
			if o.FrameworkID == fw {
				offered = offered.Add(resources.MustParse(o.Resources))
			}
		}
		if offered.Equal(free) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("offers add up to %s, want %s free", offered, free)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestUpdateTaskGrowAndShrink(t *testing.T) {
	c := newCluster(t, master.Options{})
	r := newFakeRunner()
	c.startAgent(t.TempDir(), r)
	f, fw := startWithTask(t, c, "t1", "cpus:1;mem:128")
	total := resources.MustParse("cpus:4;mem:4096")
	waitFree(t, c.m, fw, total.Subtract(resources.MustParse("cpus:1;mem:128")))
	o := f.offerOn(t, "")

	// Grow cpus and mem from the offer; its rest goes back.
	if _, err := updateTask(f, "t1", "cpus:2;mem:256", o.Id); err != nil {
		t.Fatal(err)
	}
	st := f.nextUpdateOf(t, "t1")
	if st.State != pb.TaskState_TASK_RUNNING || st.Reason != pb.ReasonResourcesUpdated || !resources.MustParse(st.Resources).Equal(resources.MustParse("cpus:2;mem:256")) {
		t.Fatalf("after grow: %s %s %q (%s), want RUNNING %s cpus:2;mem:256", st.State, st.Reason, st.Resources, st.Message, pb.ReasonResourcesUpdated)
	}
	if got := taskOf(t, checkAccounting(t, c.m, fw), "t1").Resources; got != "cpus:2;mem:256" {
		t.Fatalf("master's view after grow: %s", got)
	}
	waitFree(t, c.m, fw, total.Subtract(resources.MustParse("cpus:2;mem:256")))

	// Shrink: no offer needed; the difference is offered again.
	if _, err := updateTask(f, "t1", "cpus:0.5;mem:64"); err != nil {
		t.Fatal(err)
	}
	st = f.nextUpdateOf(t, "t1")
	if st.Reason != pb.ReasonResourcesUpdated || st.Resources != "cpus:0.5;mem:64" {
		t.Fatalf("after shrink: %s %s %q", st.State, st.Reason, st.Resources)
	}
	if got := taskOf(t, checkAccounting(t, c.m, fw), "t1").Resources; got != "cpus:0.5;mem:64" {
		t.Fatalf("master's view after shrink: %s", got)
	}
	waitFree(t, c.m, fw, total.Subtract(resources.MustParse("cpus:0.5;mem:64")))
	r.mu.Lock()
	applied := strings.Join(r.updates, " ")
	r.mu.Unlock()
	if applied != "cpus:2;mem:256 cpus:0.5;mem:64" {
		t.Fatalf("agent applied %q", applied)
	}

	// The task's end gives back what it has now.
	if err := f.d.Kill(context.Background(), "t1"); err != nil {
		t.Fatal(err)
	}
	f.expectStates(t, "t1", pb.TaskState_TASK_KILLED)
	waitFree(t, c.m, fw, total)
}

func TestUpdateTaskRejectedWithoutSideEffects(t *testing.T) {
	c := newCluster(t, master.Options{})
	// t1 lands on either agent (the first of a map's offers): both
	// runners hold updates below.
	runners := []*fakeRunner{newFakeRunner(), newFakeRunner()}
	for _, r := range runners {
		c.startAgent(t.TempDir(), r)
	}
	waitAgents(t, c.m, 2) // so that each framework's first offers cover both
	ctx := context.Background()

	// Another framework's task first; it then leaves both agents alone.
	other := c.startFramework("other")
	o2 := other.nextOffers(t)
	if err := other.d.Launch(ctx, []string{o2[0].Id}, []*pb.TaskInfo{{TaskId: "theirs", Resources: "cpus:1;mem:128", Command: []string{"true"}}}, 3600); err != nil {
		t.Fatal(err)
	}
	if err := other.d.Suppress(ctx); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for _, o := range o2[1:] {
		rest = append(rest, o.Id)
	}
	if len(rest) > 0 {
		if err := other.d.Decline(ctx, rest, 3600); err != nil {
			t.Fatal(err)
		}
	}

	f := c.startFramework("fw")
	byAgent := map[string]*pb.Offer{}
	for len(byAgent) < 2 {
		for _, x := range f.nextOffers(t) {
			byAgent[x.AgentId] = x
		}
	}
	var first, away *pb.Offer
	for _, x := range byAgent {
		if first == nil {
			first = x
		} else {
			away = x
		}
	}
	launch(t, f, first, "t1", "cpus:1;mem:128")
	f.expectStates(t, "t1", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING)
	fw := f.d.FrameworkID()
	o := f.offerOn(t, first.AgentId) // what the launch left on the task's agent
	before := checkAccounting(t, c.m, fw)

	cases := []struct {
		name, task, res string
		offers          []string
		code            codes.Code
		says            string
	}{
		{"unknown task", "nope", "cpus:2;mem:128", []string{o.Id}, codes.NotFound, "unknown task"},
		{"other framework's task", "theirs", "cpus:2;mem:128", []string{o.Id}, codes.NotFound, "not a task of framework"},
		{"forged offer", "t1", "cpus:2;mem:128", []string{"forged"}, codes.FailedPrecondition, "forged"},
		{"offer named twice", "t1", "cpus:2;mem:128", []string{o.Id, o.Id}, codes.FailedPrecondition, "twice"},
		{"offer on another agent", "t1", "cpus:2;mem:128", []string{away.Id}, codes.InvalidArgument, "runs on agent"},
		{"mixing revocable", "t1", "cpus{REV}:2;mem:128", []string{o.Id}, codes.InvalidArgument, "revocability"},
		{"mixed in one name", "t1", "cpus:1;cpus{REV}:1;mem:128", []string{o.Id}, codes.InvalidArgument, "mixes revocable"},
		{"another role", "t1", "cpus(web):2;mem:128", []string{o.Id}, codes.InvalidArgument, "role"},
		{"shrink below zero", "t1", "cpus:-1;mem:128", nil, codes.InvalidArgument, "cpus"},
		{"shrink to nothing", "t1", "cpus:0;mem:128", nil, codes.InvalidArgument, "drop"},
		{"new resource", "t1", "cpus:1;mem:128;disk:10", []string{o.Id}, codes.InvalidArgument, "disk"},
		{"unchanged", "t1", "cpus:1;mem:128", []string{o.Id}, codes.InvalidArgument, "unchanged"},
		{"more than offered", "t1", "cpus:9;mem:128", []string{o.Id}, codes.ResourceExhausted, "not in the offers"},
		{"growth without offer", "t1", "cpus:2;mem:128", nil, codes.ResourceExhausted, "not in the offers"},
		{"malformed", "t1", "cpus:lots", []string{o.Id}, codes.InvalidArgument, "cpus"},
	}
	for _, tc := range cases {
		code, err := updateTask(f, tc.task, tc.res, tc.offers...)
		if code != tc.code || err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v (%s), want %s saying %q", tc.name, err, code, tc.code, tc.says)
		}
	}
	// No side effects: same task resources, offers outstanding and whole.
	after := checkAccounting(t, c.m, fw)
	if got := taskOf(t, after, "t1").Resources; got != "cpus:1;mem:128" {
		t.Fatalf("task resources after rejected updates: %s", got)
	}
	for _, want := range []*pb.Offer{o, away} {
		found := false
		for _, x := range after.Offers {
			found = found || (x.ID == want.Id && x.Resources == want.Resources)
		}
		if !found {
			t.Fatalf("offer %s (%s) gone after rejected updates: %+v (before %+v)", want.Id, want.Resources, after.Offers, before.Offers)
		}
	}

	// An update in flight blocks a second one; the offer it used is spent.
	hold := make(chan struct{})
	for _, r := range runners {
		r.mu.Lock()
		r.holdUpdates = hold
		r.mu.Unlock()
	}
	if _, err := updateTask(f, "t1", "cpus:2;mem:256", o.Id); err != nil {
		t.Fatal(err)
	}
	if code, err := updateTask(f, "t1", "cpus:0.5;mem:128"); code != codes.FailedPrecondition || !strings.Contains(err.Error(), "not answered yet") {
		t.Fatalf("second update in flight: %v", err)
	}
	if code, _ := updateTask(f, "t1", "cpus:3;mem:256", o.Id); code != codes.FailedPrecondition {
		t.Fatalf("used offer again: %s, want FailedPrecondition", code)
	}
	close(hold)
	if st := f.nextUpdateOf(t, "t1"); st.Reason != pb.ReasonResourcesUpdated {
		t.Fatalf("update: %s %s %s", st.State, st.Reason, st.Message)
	}
	checkAccounting(t, c.m, fw)
}

func TestUpdateTaskFailureGivesGrowthBack(t *testing.T) {
	c := newCluster(t, master.Options{})
	r := newFakeRunner()
	r.failUpdates = true
	c.startAgent(t.TempDir(), r)
	f, fw := startWithTask(t, c, "t1", "cpus:1;mem:128")
	total := resources.MustParse("cpus:4;mem:4096")
	o := f.offerOn(t, "")
	if _, err := updateTask(f, "t1", "cpus:3;mem:1024", o.Id); err != nil {
		t.Fatal(err)
	}
	st := f.nextUpdateOf(t, "t1")
	if st.State != pb.TaskState_TASK_RUNNING || st.Reason != pb.ReasonResourcesUpdateFailed || !strings.Contains(st.Message, "memory limit below usage") {
		t.Fatalf("failed update: %s %s %q", st.State, st.Reason, st.Message)
	}
	if got := taskOf(t, checkAccounting(t, c.m, fw), "t1").Resources; got != "cpus:1;mem:128" {
		t.Fatalf("task resources after a failed update: %s", got)
	}
	waitFree(t, c.m, fw, total.Subtract(resources.MustParse("cpus:1;mem:128")))
	// The task is still updatable.
	r.mu.Lock()
	r.failUpdates = false
	r.mu.Unlock()
	if _, err := updateTask(f, "t1", "cpus:0.5;mem:128"); err != nil {
		t.Fatal(err)
	}
	if st := f.nextUpdateOf(t, "t1"); st.Reason != pb.ReasonResourcesUpdated {
		t.Fatalf("update after a failed one: %s %s", st.Reason, st.Message)
	}
}

// TestUpdateTaskAcrossReregistration: an update sent while the agent's
// link breaks is settled when the agent re-registers: the agent reports
// the new resources and the master's accounting follows.
func TestUpdateTaskAcrossReregistration(t *testing.T) {
	c := newCluster(t, master.Options{MaxMissedHeartbeats: 1000})
	dir := t.TempDir()
	r := newFakeRunner()
	stop := c.startAgent(dir, r)
	f, fw := startWithTask(t, c, "t1", "cpus:1;mem:128")
	hold := make(chan struct{})
	r.mu.Lock()
	r.holdUpdates = hold
	r.mu.Unlock()
	if _, err := updateTask(f, "t1", "cpus:2;mem:512", f.offerOn(t, "").Id); err != nil {
		t.Fatal(err)
	}
	stop() // the update is lost with the link (the runner's wait ends)
	r.mu.Lock()
	r.holdUpdates = nil
	r.mu.Unlock()
	close(hold)
	c.startAgent(dir, r) // re-registers with the old resources: the master sends the update again
	st := f.nextUpdateOf(t, "t1")
	if st.Reason != pb.ReasonResourcesUpdated || st.Resources != "cpus:2;mem:512" {
		t.Fatalf("after re-registration: %s %s %q %s", st.State, st.Reason, st.Resources, st.Message)
	}
	if got := taskOf(t, checkAccounting(t, c.m, fw), "t1").Resources; got != "cpus:2;mem:512" {
		t.Fatalf("task resources: %s", got)
	}
}

// TestResubscribeAfterRestartChecksPrincipal: the principal that
// subscribed a framework is persisted; after a master restart another
// principal cannot take the framework over.
func TestResubscribeAfterRestartChecksPrincipal(t *testing.T) {
	open := storeOpener(t)
	store := open()
	c := authClusterWith(t, master.Options{Store: store}, "127.0.0.1:0")
	addr := c.addr
	opts := scheduler.Options{Master: addr, Name: "fw", Roles: []string{"ads"}, Principal: "ops", Secret: "s3cret", FailoverTimeout: time.Minute}
	s := startSession(t, opts)
	id := s.waitSubscribed(t)
	c.stop()
	store.Close()

	c2 := authClusterWith(t, master.Options{Store: open()}, addr)
	_ = c2
	thief := opts
	thief.Principal, thief.Secret, thief.FrameworkID = "dev", "pw", id
	startSession(t, thief).refused(t, codes.PermissionDenied, `"dev"`, id, `"ops"`)
	owner := opts
	owner.FrameworkID = id
	if got := startSession(t, owner).waitSubscribed(t); got != id {
		t.Fatalf("owner re-subscribed as %s, want %s", got, id)
	}
}

// storeOpener returns a function opening the same bbolt store each time
// (close it before opening it again).
func storeOpener(t *testing.T) func() *boltstore.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "master.db")
	return func() *boltstore.Store {
		s, err := boltstore.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}
