package master_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/transport"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// testClock is the demands' clock, moved by the test.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// demandFramework is a framework that declines every DRF offer for an
// hour (so DRF never holds the agent) and passes on demand offers and
// demand events.
type demandFramework struct {
	d      *scheduler.Driver
	offers chan *pb.Offer
	events chan *pb.DemandEvent
	drf    chan *pb.Offer
	up     chan *pb.TaskStatus
}

func (c *cluster) startDemandFramework(name string, keepDRF bool) *demandFramework {
	c.t.Helper()
	d, err := scheduler.New(scheduler.Options{Master: c.addr, Name: name, FailoverTimeout: time.Hour})
	if err != nil {
		c.t.Fatal(err)
	}
	f := &demandFramework{d: d, offers: make(chan *pb.Offer, 100), events: make(chan *pb.DemandEvent, 100), drf: make(chan *pb.Offer, 100), up: make(chan *pb.TaskStatus, 100)}
	sub := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(ctx, scheduler.Callbacks{
			Subscribed: func(context.Context, string) { once.Do(func() { close(sub) }) },
			Offers: func(ctx context.Context, os []*pb.Offer) {
				for _, o := range os {
					switch {
					case o.DemandId != "":
						f.offers <- o
					case keepDRF:
						f.drf <- o
					default:
						_ = d.Decline(ctx, []string{o.Id}, 3600)
					}
				}
			},
			Demand: func(_ context.Context, ev *pb.DemandEvent) { f.events <- ev },
			Update: func(_ context.Context, st *pb.TaskStatus) { f.up <- st },
		})
	}()
	c.t.Cleanup(func() { cancel(); <-done; d.Close() })
	select {
	case <-sub:
	case <-time.After(30 * time.Second):
		c.t.Fatal("framework never subscribed")
	}
	return f
}

func (f *demandFramework) nextDemandOffer(t *testing.T, id string) *pb.Offer {
	t.Helper()
	for {
		select {
		case o := <-f.offers:
			if o.DemandId == id {
				return o
			}
			t.Fatalf("offer for demand %s while waiting for %s", o.DemandId, id)
		case <-time.After(30 * time.Second):
			t.Fatalf("no offer for demand %s", id)
		}
	}
}

// expectEvents waits for the demand events want ("ID STATE"), in order,
// skipping others.
func (f *demandFramework) expectEvents(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		for {
			select {
			case ev := <-f.events:
				if ev.DemandId+" "+ev.State == w {
					goto next
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no demand event %q", w)
			}
		}
	next:
	}
}

func postDemands(t *testing.T, h http.Handler, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/demands", strings.NewReader(body)))
	return rec.Code, rec.Body.String()
}

func getDemands(t *testing.T, h http.Handler) map[string]demand.Demand {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/demands", nil))
	var ds []demand.Demand
	if err := json.Unmarshal(rec.Body.Bytes(), &ds); err != nil {
		t.Fatalf("GET /demands: %v: %s", err, rec.Body)
	}
	out := map[string]demand.Demand{}
	for _, d := range ds {
		out[d.ID] = d
	}
	return out
}

// TestSeedExample: seed 003's example end to end through the master with
// a (fake) agent: demand 1234 is allocated only after 1200 finishes, and
// both finish; every transition reaches the framework.
func TestDemandSeedExample(t *testing.T) {
	c := newCluster(t, master.Options{Store: storeOpener(t)()})
	r := newFakeRunner()
	c.startAgent(t.TempDir(), r)
	waitAgents(t, c.m, 1)
	f := c.startDemandFramework("workflow", false)
	h := httpHandler(c.api, nil)
	fw := f.d.FrameworkID()
	code, body := postDemands(t, h, `[
	  {"DemandID": 1200, "FrameworkID": "`+fw+`", "Resources": "cpus:2;mem:512", "Duration": {"Time": [null, "+10m"]}},
	  {"DemandID": 1234, "FrameworkID": "`+fw+`", "OrderBy": 1200, "Resources": "cpus:2;mem:512",
	   "Duration": {"Time": [null, "+20m"], "Strategy": "loose"}}]`)
	if code != http.StatusOK {
		t.Fatalf("POST /demands: %d %s", code, body)
	}
	f.expectEvents(t, "1200 ACCEPTED", "1200 ALLOCATING", "1200 ALLOCATED")
	o := f.nextDemandOffer(t, "1200")
	if ds := getDemands(t, h); ds["1234"].State != demand.Accepted {
		t.Fatalf("1234 is %s before 1200 finished", ds["1234"].State)
	}
	if err := f.d.Launch(context.Background(), []string{o.Id}, []*pb.TaskInfo{{TaskId: "t1200", Resources: o.Resources, Command: []string{"true"}}}, 0); err != nil {
		t.Fatal(err)
	}
	f.expectEvents(t, "1200 MONITORING")
	select {
	case o := <-f.offers:
		t.Fatalf("offer for %s while 1200 runs", o.DemandId)
	case <-time.After(300 * time.Millisecond):
	}
	waitState(t, c.m, "t1200 running", func(st master.State) bool {
		return len(st.Tasks) == 1 && strings.HasSuffix(st.Tasks[0].State, "RUNNING")
	})
	finishTask(t, r, "t1200")
	f.expectEvents(t, "1200 FINISHED", "1234 ALLOCATING", "1234 ALLOCATED")
	o = f.nextDemandOffer(t, "1234")
	if err := f.d.Launch(context.Background(), []string{o.Id}, []*pb.TaskInfo{{TaskId: "t1234", Resources: o.Resources, Command: []string{"true"}}}, 0); err != nil {
		t.Fatal(err)
	}
	f.expectEvents(t, "1234 MONITORING")
	waitState(t, c.m, "t1234 running", func(st master.State) bool {
		return len(st.Tasks) == 1 && strings.HasSuffix(st.Tasks[0].State, "RUNNING")
	})
	finishTask(t, r, "t1234")
	f.expectEvents(t, "1234 FINISHED")
	ds := getDemands(t, h)
	if a, b := ds["1200"], ds["1234"]; !b.AllocatedAt.After(a.EndedAt) && !b.AllocatedAt.Equal(a.EndedAt) {
		t.Errorf("1234 allocated at %s, before 1200 ended at %s", b.AllocatedAt, a.EndedAt)
	}
	if st := c.m.State(); len(st.Demands) != 2 {
		t.Errorf("/state shows %d demands, want 2", len(st.Demands))
	}
}

// finishTask makes the fake agent's task finish (exit 0).
func finishTask(t *testing.T, r *fakeRunner, id string) {
	t.Helper()
	if err := r.finish(id, 0); err != nil {
		t.Fatal(err)
	}
}

// TestDemandBadInput: bad documents are a 400 naming the field, and
// nothing is stored.
func TestDemandBadInput(t *testing.T) {
	c := newCluster(t, master.Options{})
	c.startAgent(t.TempDir(), newFakeRunner())
	waitAgents(t, c.m, 1)
	f := c.startDemandFramework("fw", false)
	h := httpHandler(c.api, nil)
	fw := f.d.FrameworkID()
	for _, tc := range []struct{ body, want string }{
		{`{"DemandID": "a", "FrameworkID": "` + fw + `", "Resources": "cpus:1",`, "want a JSON object"},
		{`{"DemandID": "a", "FrameworkID": "` + fw + `", "Resources": "cpus:1", "Colour": 1}`, `unknown field "Colour"`},
		{`{"DemandID": "a", "FrameworkID": "` + fw + `", "Resources": "cpus:1", "Start": {"Time": ["2026-11-25 12:00:00", "2026-11-25 11:00:00"]}}`, "T2 is before T1"},
		{`{"DemandID": "a", "FrameworkID": "` + fw + `", "Resources": "cpus:1", "Start": {"Time": ["2020-01-01 00:00:00", "+1m"], "Strategy": "strict"}}`, "Start.Time"},
		{`{"DemandID": "a", "FrameworkID": "` + fw + `", "Resources": "cpus:1", "OrderBy": "ghost"}`, `OrderBy: "ghost": no such demand`},
		{`[{"DemandID": "a", "FrameworkID": "` + fw + `", "Resources": "cpus:1", "OrderBy": "b"}, {"DemandID": "b", "FrameworkID": "` + fw + `", "Resources": "cpus:1", "OrderBy": "a"}]`, "cycle"},
		{`{"DemandID": "a", "FrameworkID": "` + fw + `", "Resources": "cpus:64"}`, "Resources"},
		{`{"DemandID": "a", "Resources": "cpus:1"}`, "FrameworkID: missing"},
		{`{"DemandID": "a", "FrameworkID": "` + fw + `", "Role": "other", "Resources": "cpus:1"}`, "Role"},
		// Resources the plan does not hold, and a strict deadline the
		// duration cannot meet: accepted before (the first stayed
		// ALLOCATING for ever, the second failed 30 ms later).
		{`{"DemandID": "a", "FrameworkID": "` + fw + `", "Resources": "gpus:1;mem:32"}`, "gpus:1: demands plan cpus, mem, disk, net_bw only"},
		{`{"DemandID": "a", "FrameworkID": "` + fw + `", "Resources": "foo:1"}`, "foo:1"},
		{`{"DemandID": "a", "FrameworkID": "` + fw + `", "Resources": "cpus:1", "Duration": {"Time": [null, "+1h"]}, "Deadline": {"Time": [null, "+10m"], "Strategy": "strict"}}`, "Deadline.Time: a strict deadline"},
	} {
		code, body := postDemands(t, h, tc.body)
		var e map[string]string
		if json.Unmarshal([]byte(body), &e) != nil || e["error"] == "" {
			t.Errorf("%s: not a JSON error: %s", tc.body, body)
		}
		if code != http.StatusBadRequest || !strings.Contains(e["error"], tc.want) {
			t.Errorf("%s:\n  got %d %s\n want 400 naming %q", tc.body, code, body, tc.want)
		}
	}
	if ds := getDemands(t, h); len(ds) != 0 {
		t.Errorf("bad input stored demands: %v", ds)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, "/demands/none", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("DELETE unknown: %d %s", rec.Code, rec.Body)
	}
}

// TestDemandSurvivesRestart: a master restart in the middle of a plan
// keeps the demand, its state and its plan; after the restart the
// capacity is held from DRF at the lead and handed to the demand at its
// start.
func TestDemandSurvivesRestart(t *testing.T) {
	start := time.Now().UTC().Truncate(time.Second)
	clock := &testClock{t: start}
	open := storeOpener(t)
	store := open()
	opts := master.Options{Store: store, Demands: master.DemandOptions{Lead: time.Minute, PickUp: time.Hour, Clock: clock.Now}}
	c := newClusterAt(t, opts, "127.0.0.1:0")
	addr := c.addr
	agentDir := t.TempDir()
	runner := newFakeRunner()
	c.startAgent(agentDir, runner)
	waitAgents(t, c.m, 1)
	// The agent comes back as itself only once it kept the ID the master
	// gave it: the registry has it before the agent heard it.
	for deadline := time.Now().Add(10 * time.Second); runner.agentID() == ""; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the agent never heard its ID")
		}
	}
	f := c.startDemandFramework("planned", false)
	fw := f.d.FrameworkID()
	at := start.Add(time.Hour).Format(time.RFC3339)
	code, body := postDemands(t, httpHandler(c.api, nil), `{"DemandID": "night", "FrameworkID": "`+fw+`", "Resources": "cpus:3;mem:1024",
	  "Start": {"Time": ["`+at+`", "+5m"], "Strategy": "strict"}, "Duration": {"Time": [null, "+30m"], "Strategy": "strict"}}`)
	if code != http.StatusOK {
		t.Fatalf("POST /demands: %d %s", code, body)
	}
	before := getDemands(t, httpHandler(c.api, nil))["night"]
	if before.State != demand.Accepted || len(before.Placement) != 1 {
		t.Fatalf("before the restart: %+v", before)
	}
	c.stop()
	store.Close()

	opts.Store = open()
	c2 := newClusterAt(t, opts, addr)
	h := httpHandler(c2.api, nil)
	after := getDemands(t, h)["night"]
	if after.State != demand.Accepted || !after.Start.Equal(before.Start) || len(after.Placement) != 1 || after.Placement[0] != before.Placement[0] {
		t.Fatalf("after the restart: %+v, want %+v", after, before)
	}
	waitAgents(t, c2.m, 1)
	// The plan is intact: a second strict demand for the same hour does
	// not fit beside it.
	code, body = postDemands(t, h, `{"DemandID": "rival", "FrameworkID": "`+fw+`", "Resources": "cpus:2",
	  "Start": {"Time": ["`+at+`", "+5m"], "Strategy": "strict"}}`)
	if code != http.StatusOK || !strings.Contains(body, `"not allocatable in time"`) {
		t.Fatalf("rival: %d %s", code, body)
	}
	// A DRF framework takes what is free now; at the lead the capacity it
	// gives back is held, never offered again.
	drf := c2.startDemandFramework("drf", true)
	o := <-drf.drf
	clock.Set(start.Add(time.Hour - time.Minute))
	waitDemand(t, c2.m, "night", demand.Allocating)
	if err := drf.d.Decline(context.Background(), []string{o.Id}, 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(time.Second)
	for done := false; !done; {
		select {
		case o := <-drf.drf:
			if got := resourcesCPUs(o.Resources); got > 1 {
				t.Fatalf("DRF offered %s while the demand holds 3 cpus", o.Resources)
			}
			_ = drf.d.Decline(context.Background(), []string{o.Id}, 0)
		case <-deadline:
			done = true
		}
	}
	clock.Set(start.Add(time.Hour))
	o = f.nextDemandOffer(t, "night")
	if got := resourcesCPUs(o.Resources); got != 3 {
		t.Fatalf("demand offer %s, want cpus:3", o.Resources)
	}
}

func resourcesCPUs(s string) float64 {
	for _, part := range strings.Split(s, ";") {
		if v, ok := strings.CutPrefix(part, "cpus:"); ok {
			var f float64
			_ = json.Unmarshal([]byte(v), &f)
			return f
		}
	}
	return 0
}

func waitDemand(t *testing.T, m *master.Master, id string, want demand.State) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := m.Demand(id)
		if err == nil && d.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("demand %s is %s (%v), want %s", id, d.State, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// headerAuth authenticates the principal named in X-Principal and allows
// submit_demand to "etl-admin" for role "etl" only.
type headerAuth struct{}

func (headerAuth) Authenticate(r *http.Request) (string, error) {
	return r.Header.Get("X-Principal"), nil
}
func (headerAuth) AuthenticateSecret(string, string) error { return nil }
func (headerAuth) Authorize(p, action, role string) error {
	if action == transport.ActionSubmitDemand && (p != "etl-admin" || role != "etl") {
		return fmt.Errorf("principal %q may not %s for role %q: %w", p, action, role, master.ErrForbidden)
	}
	return nil
}

// TestDemandACL: submit_demand is checked per role for POST and DELETE;
// a refused submission stores nothing.
func TestDemandACL(t *testing.T) {
	store := storeOpener(t)()
	if err := store.PutFramework("fw1", master.PersistedFramework{Roles: []string{"etl", "web"}}); err != nil {
		t.Fatal(err)
	}
	m, err := master.New(master.Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	h := httpHandler(transport.New(m, transport.Options{}), headerAuth{})
	req := func(method, path, principal, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("X-Principal", principal)
		h.ServeHTTP(rec, r)
		return rec
	}
	doc := `{"DemandID": "nightly", "FrameworkID": "fw1", "Role": "%s", "Resources": "cpus:1"}`
	if rec := req("POST", "/demands", "ops", fmt.Sprintf(doc, "etl")); rec.Code != http.StatusForbidden {
		t.Fatalf("ops: %d %s", rec.Code, rec.Body)
	}
	if rec := req("POST", "/demands", "etl-admin", fmt.Sprintf(doc, "web")); rec.Code != http.StatusForbidden {
		t.Fatalf("etl-admin for web: %d %s", rec.Code, rec.Body)
	}
	if ds := getDemands(t, h); len(ds) != 0 {
		t.Fatalf("refused demands stored: %v", ds)
	}
	// No agent yet: the demand can never fit, a 400 naming Resources.
	if rec := req("POST", "/demands", "etl-admin", fmt.Sprintf(doc, "etl")); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "Resources") {
		t.Fatalf("etl-admin without agents: %d %s", rec.Code, rec.Body)
	}
}

// TestDemandSDKAndFrameworkRemoved: a framework submits a demand through
// the SDK (Driver.SubmitDemand; a bad one is InvalidArgument naming the
// field), receives its events, and when the framework is removed (its
// failover timeout passed) its demand fails, cancelled, and holds nothing.
func TestDemandSDKAndFrameworkRemoved(t *testing.T) {
	c := newCluster(t, master.Options{})
	c.startAgent(t.TempDir(), newFakeRunner())
	waitAgents(t, c.m, 1)
	d, err := scheduler.New(scheduler.Options{Master: c.addr, Name: "short", FailoverTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan *pb.DemandEvent, 10)
	sub := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(ctx, scheduler.Callbacks{
			Subscribed: func(context.Context, string) { once.Do(func() { close(sub) }) },
			Demand:     func(_ context.Context, ev *pb.DemandEvent) { events <- ev },
		})
	}()
	<-sub
	err = d.SubmitDemand(ctx, []byte(`{"DemandID": "later", "Resources": "cpus:1", "Tasks": 0}`))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "Tasks") {
		t.Fatalf("bad SubmitDemand: %v", err)
	}
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if err := d.SubmitDemand(ctx, []byte(`{"DemandID": "later", "Resources": "cpus:1", "Start": {"Time": ["`+at+`", null]}}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.DemandId != "later" || ev.State != "ACCEPTED" {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no demand event")
	}
	cancel() // the framework goes away and does not come back
	<-done
	d.Close()
	waitDemand(t, c.m, "later", demand.Failed)
	if got, _ := c.m.Demand("later"); got.Reason != demand.ReasonCancelled || !strings.Contains(got.Message, "removed") {
		t.Fatalf("demand after its framework left: %s %q", got.Reason, got.Message)
	}
}

// TestDemandMonitoringSurvivesRestart: a demand whose task runs across a
// master restart still finishes when the task does (the master keeps the
// link between the demand and its tasks in the store).
func TestDemandMonitoringSurvivesRestart(t *testing.T) {
	open := storeOpener(t)
	store := open()
	c := newClusterAt(t, master.Options{Store: store}, "127.0.0.1:0")
	addr := c.addr
	r := newFakeRunner()
	c.startAgent(t.TempDir(), r)
	waitAgents(t, c.m, 1)
	f := c.startDemandFramework("wf", false)
	code, body := postDemands(t, httpHandler(c.api, nil), `{"DemandID": "long", "FrameworkID": "`+f.d.FrameworkID()+`", "Resources": "cpus:1;mem:128"}`)
	if code != http.StatusOK {
		t.Fatalf("POST: %d %s", code, body)
	}
	o := f.nextDemandOffer(t, "long")
	if err := f.d.Launch(context.Background(), []string{o.Id}, []*pb.TaskInfo{{TaskId: "tl", Resources: o.Resources, Command: []string{"true"}}}, 0); err != nil {
		t.Fatal(err)
	}
	waitDemand(t, c.m, "long", demand.Monitoring)
	waitState(t, c.m, "tl running", func(st master.State) bool {
		return len(st.Tasks) == 1 && strings.HasSuffix(st.Tasks[0].State, "RUNNING")
	})
	c.stop()
	store.Close()

	c2 := newClusterAt(t, master.Options{Store: open()}, addr)
	waitAgents(t, c2.m, 1)
	waitDemand(t, c2.m, "long", demand.Monitoring)
	waitState(t, c2.m, "tl adopted", func(st master.State) bool { return len(st.Tasks) == 1 })
	finishTask(t, r, "tl")
	waitDemand(t, c2.m, "long", demand.Finished)
}

// TestDemandAdmissionSeesDRFLoad: a strict demand starting within the
// lead is admitted only where what DRF frameworks run now leaves room
// (their tasks may still run at the start); one further out is planned
// on the plan alone. Without preemption: with it, a task of a role
// above its guarantee is no obstacle (TestDemandPreemptsAtStrictStart).
func TestDemandAdmissionSeesDRFLoad(t *testing.T) {
	start := time.Now().UTC().Truncate(time.Second)
	clock := &testClock{t: start}
	c := newCluster(t, master.Options{Demands: master.DemandOptions{Lead: 10 * time.Minute, PickUp: time.Hour, NoPreempt: true, Clock: clock.Now}})
	c.startAgent(t.TempDir(), newFakeRunner())
	waitAgents(t, c.m, 1)
	f := c.startDemandFramework("planned", false)
	drf := c.startDemandFramework("drf", true)
	o := <-drf.drf
	if err := drf.d.Launch(context.Background(), []string{o.Id}, []*pb.TaskInfo{{TaskId: "busy", Resources: "cpus:3;mem:1024", Command: []string{"sleep"}}}, 0); err != nil {
		t.Fatal(err)
	}
	waitState(t, c.m, "busy running", func(st master.State) bool {
		return len(st.Tasks) == 1 && strings.HasSuffix(st.Tasks[0].State, "RUNNING")
	})
	h := httpHandler(c.api, nil)
	submit := func(id string, in time.Duration) string {
		at := start.Add(in).Format(time.RFC3339)
		code, body := postDemands(t, h, `{"DemandID": "`+id+`", "FrameworkID": "`+f.d.FrameworkID()+`", "Resources": "cpus:2;mem:512",
		  "Start": {"Time": ["`+at+`", "+1m"], "Strategy": "strict"}, "Duration": {"Time": [null, "+10m"], "Strategy": "strict"}}`)
		if code != http.StatusOK {
			t.Fatalf("POST /demands %s: %d %s", id, code, body)
		}
		return body
	}
	if body := submit("soon", 5*time.Minute); !strings.Contains(body, `"not allocatable in time"`) {
		t.Fatalf("soon, with DRF's task on 3 of 4 cpus: %s", body)
	}
	if body := submit("later", time.Hour); strings.Contains(body, `"FAILED"`) {
		t.Fatalf("later, beyond the lead: %s", body)
	}
}

// TestDemandHandedTaskByTaskKeepsToItsSlots: a loose non-gang demand is
// handed over from its first task on, the rest as capacity frees. The
// rest must come from its slots not yet used: holding a used slot's
// tasks again on the same agent took capacity the plan had booked there
// for a strict demand, which then failed at its start with "start window
// passed with the capacity not held" (demandbench: 11 of 2,465 strict
// demands, seed 1).
func TestDemandHandedTaskByTaskKeepsToItsSlots(t *testing.T) {
	start := time.Now().UTC().Truncate(time.Second)
	clock := &testClock{t: start}
	c := newCluster(t, master.Options{Demands: master.DemandOptions{Lead: time.Minute, PickUp: time.Hour, Clock: clock.Now}})
	c.startAgentWith(t.TempDir(), newFakeRunner(), resources.MustParse("cpus:6;mem:6144"))
	c.startAgentWith(t.TempDir(), newFakeRunner(), resources.MustParse("cpus:3;mem:3072"))
	big, small := "", ""
	for _, a := range waitAgents(t, c.m, 2) {
		if resourcesCPUs(a.Resources) == 6 {
			big = a.ID
		} else {
			small = a.ID
		}
	}
	f := c.startDemandFramework("planned", false)
	// DRF keeps a task on the small agent (and is offered the rest of it
	// again): the loose demand's slot there cannot be held, so only its
	// slot on the big agent is handed over. DRF declines the big agent.
	drf := c.startDemandFramework("drf", true)
	for busy, declined := false, false; !busy || !declined; {
		select {
		case o := <-drf.drf:
			var err error
			switch {
			case o.AgentId == big:
				err, declined = drf.d.Decline(context.Background(), []string{o.Id}, 3600), true
			case !busy:
				err, busy = drf.d.Launch(context.Background(), []string{o.Id}, []*pb.TaskInfo{{TaskId: "busy", Resources: "cpus:1;mem:512", Command: []string{"sleep"}}}, 0), true
			}
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no DRF offers for both agents")
		}
	}
	waitState(t, c.m, "busy running", func(st master.State) bool {
		return len(st.Tasks) == 1 && strings.HasSuffix(st.Tasks[0].State, "RUNNING")
	})
	h := httpHandler(c.api, nil)
	at := func(d time.Duration) string { return start.Add(d).Format(time.RFC3339) }
	fw := f.d.FrameworkID()
	code, body := postDemands(t, h, `[
	  {"DemandID": "loose", "FrameworkID": "`+fw+`", "Resources": "cpus:3;mem:512", "Tasks": 2,
	   "Start": {"Time": ["`+at(2*time.Minute)+`", "+10m"], "Strategy": "loose"}, "Duration": {"Time": [null, "+30m"], "Strategy": "loose"}},
	  {"DemandID": "strict", "FrameworkID": "`+fw+`", "Resources": "cpus:3;mem:512",
	   "Start": {"Time": ["`+at(20*time.Minute)+`", "+1m"], "Strategy": "strict"}, "Duration": {"Time": [null, "+5m"], "Strategy": "strict"}}]`)
	if code != http.StatusOK {
		t.Fatalf("POST /demands: %d %s", code, body)
	}
	ds := getDemands(t, h)
	// The plan: one task of "loose" on each agent; "strict" in the rest
	// of the big agent, while "loose" still runs there.
	if got, want := fmt.Sprint(ds["loose"].Placement), fmt.Sprint(sortedSlots(demand.Slot{Agent: big, Tasks: 1}, demand.Slot{Agent: small, Tasks: 1})); got != want {
		t.Fatalf("loose placed on %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(ds["strict"].Placement), fmt.Sprint([]demand.Slot{{Agent: big, Tasks: 1}}); got != want {
		t.Fatalf("strict placed on %s, want %s", got, want)
	}

	clock.Set(start.Add(time.Minute)) // loose's lead
	waitDemand(t, c.m, "loose", demand.Allocating)
	clock.Set(start.Add(2 * time.Minute)) // loose's start: one task held
	launched := 0
	launch := func(o *pb.Offer) {
		launched++
		if err := f.d.Launch(context.Background(), []string{o.Id}, []*pb.TaskInfo{{TaskId: fmt.Sprintf("loose-%d", launched), Resources: o.Resources, Command: []string{"sleep"}}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	launch(f.nextDemandOffer(t, "loose"))
	waitDemand(t, c.m, "loose", demand.Monitoring)
	// A framework takes whatever its demand is offered.
	for quiet := time.After(time.Second); ; {
		select {
		case o := <-f.offers:
			if o.DemandId == "loose" {
				launch(o)
			}
			continue
		case <-quiet:
		}
		break
	}

	clock.Set(start.Add(19 * time.Minute)) // strict's lead
	waitDemand(t, c.m, "strict", demand.Allocating)
	clock.Set(start.Add(20 * time.Minute)) // its start
	settled := func(within time.Duration) demand.Demand {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			d, err := c.m.Demand("strict")
			if err != nil {
				t.Fatal(err)
			}
			if d.State != demand.Allocating || time.Now().After(deadline) {
				return d
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	d := settled(5 * time.Second)
	if d.State == demand.Allocating {
		clock.Set(start.Add(22 * time.Minute)) // its window has passed
		d = settled(30 * time.Second)
	}
	if d.State != demand.Allocated {
		t.Fatalf("strict is %s (%s: %s), want ALLOCATED; loose was handed %d tasks on the big agent, its slot there holds 1", d.State, d.Reason, d.Message, launched)
	}
	if launched != 1 {
		t.Errorf("loose was handed %d tasks on the big agent, its slot there holds 1", launched)
	}
}

func sortedSlots(s ...demand.Slot) []demand.Slot {
	slices.SortFunc(s, func(a, b demand.Slot) int { return strings.Compare(a.Agent, b.Agent) })
	return s
}

// gangCluster is a master with three agents of two cpus each (one task of
// the gangs below per agent) and a demand framework, the demands' clock
// in the test's hands.
type gangCluster struct {
	c      *cluster
	clock  *testClock
	start  time.Time
	f      *demandFramework
	h      http.Handler
	stop   map[string]func()      // agent ID → stops its link
	runner map[string]*fakeRunner // agent ID → its runner
}

func newGangCluster(t *testing.T) *gangCluster {
	g := &gangCluster{start: time.Now().UTC().Truncate(time.Second), stop: map[string]func(){}, runner: map[string]*fakeRunner{}}
	g.clock = &testClock{t: g.start}
	g.c = newCluster(t, master.Options{Demands: master.DemandOptions{Lead: time.Minute, PickUp: time.Hour, Clock: g.clock.Now}})
	for i := range 3 {
		r := newFakeRunner()
		stop := g.c.startAgentWith(t.TempDir(), r, resources.MustParse("cpus:2;mem:2048"))
		for _, a := range waitAgents(t, g.c.m, i+1) {
			if _, ok := g.stop[a.ID]; !ok {
				g.stop[a.ID], g.runner[a.ID] = stop, r
			}
		}
	}
	g.f = g.c.startDemandFramework("gangs", false)
	g.h = httpHandler(g.c.api, nil)
	return g
}

func (g *gangCluster) at(d time.Duration) string { return g.start.Add(d).Format(time.RFC3339) }

// TestDemandGangAgentLeftBeforeStart: an agent of a strict gang's
// placement disconnects just before the start: the gang is planned again
// onto the idle agent and handed over whole there. Before, the hold on
// the disconnected agent counted, the gang was handed over onto it, 1 of
// 2 tasks ran and the demand stayed MONITORING with its booking.
func TestDemandGangAgentLeftBeforeStart(t *testing.T) {
	g := newGangCluster(t)
	code, body := postDemands(t, g.h, `{"DemandID": "g", "FrameworkID": "`+g.f.d.FrameworkID()+`", "Resources": "cpus:2;mem:1024", "Tasks": 2, "Gang": true,
	  "Start": {"Time": ["`+g.at(2*time.Minute)+`", "+1m"], "Strategy": "strict"}}`)
	if code != http.StatusOK {
		t.Fatalf("POST /demands: %d %s", code, body)
	}
	g.clock.Set(g.start.Add(time.Minute + 30*time.Second)) // its lead
	waitDemand(t, g.c.m, "g", demand.Allocating)
	planned := getDemands(t, g.h)["g"].Placement
	left := planned[1].Agent
	g.stop[left]() // disconnected; unreachable only after 5 heartbeats
	waitState(t, g.c.m, "agent "+left+" disconnected", func(st master.State) bool {
		return slices.ContainsFunc(st.Agents, func(a master.AgentState) bool { return a.ID == left && !a.Connected })
	})
	g.clock.Set(g.start.Add(2 * time.Minute)) // the start
	for i := range 2 {
		o := g.f.nextDemandOffer(t, "g")
		if o.AgentId == left {
			t.Fatalf("the gang was handed over onto agent %s, disconnected", left)
		}
		if err := g.f.d.Launch(context.Background(), []string{o.Id}, []*pb.TaskInfo{{TaskId: fmt.Sprintf("g-%d", i), Resources: o.Resources, Command: []string{"sleep"}}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	waitDemand(t, g.c.m, "g", demand.Monitoring)
	d := getDemands(t, g.h)["g"]
	if slices.ContainsFunc(d.Placement, func(s demand.Slot) bool { return s.Agent == left }) || d.Launched != 2 {
		t.Fatalf("gang placed on %v with %d tasks launched, want the two connected agents, 2 tasks", d.Placement, d.Launched)
	}
	// MONITORING once the master launched them; each agent has its task
	// once its RunTask arrived.
	for _, s := range d.Placement {
		r := g.runner[s.Agent]
		var ids []string
		for deadline := time.Now().Add(30 * time.Second); len(ids) == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("agent %s never got its task of the gang", s.Agent)
			}
			r.mu.Lock()
			ids = slices.Collect(maps.Keys(r.tasks))
			r.mu.Unlock()
		}
		for _, id := range ids {
			finishTask(t, r, id)
		}
	}
	waitDemand(t, g.c.m, "g", demand.Finished)
	if d := getDemands(t, g.h)["g"]; d.Message != "all 2 tasks finished" {
		t.Errorf("gang ended %q", d.Message)
	}
}

// TestDemandGangAgentLeftAfterHandOver: a strict gang is handed over on
// two agents, its framework launches on one, and the other disconnects
// before the launch there: the gang can no longer run whole. It fails
// (hand-over failed, naming the agent), its launched task is killed and
// its open-ended booking released: a strict demand the idle agents can
// serve is accepted. Before, the demand stayed MONITORING for ever, and
// its booking made the plan refuse that demand.
func TestDemandGangAgentLeftAfterHandOver(t *testing.T) {
	g := newGangCluster(t)
	fw := g.f.d.FrameworkID()
	code, body := postDemands(t, g.h, `{"DemandID": "g", "FrameworkID": "`+fw+`", "Resources": "cpus:2;mem:1024", "Tasks": 2, "Gang": true,
	  "Start": {"Time": ["`+g.at(2*time.Minute)+`", "+1m"], "Strategy": "strict"}}`)
	if code != http.StatusOK {
		t.Fatalf("POST /demands: %d %s", code, body)
	}
	g.clock.Set(g.start.Add(time.Minute + 30*time.Second))
	waitDemand(t, g.c.m, "g", demand.Allocating)
	g.clock.Set(g.start.Add(2 * time.Minute))
	first, second := g.f.nextDemandOffer(t, "g"), g.f.nextDemandOffer(t, "g")
	if err := g.f.d.Launch(context.Background(), []string{first.Id}, []*pb.TaskInfo{{TaskId: "g-0", Resources: first.Resources, Command: []string{"sleep"}}}, 0); err != nil {
		t.Fatal(err)
	}
	waitDemand(t, g.c.m, "g", demand.Monitoring)
	waitState(t, g.c.m, "g-0 running", func(st master.State) bool {
		return len(st.Tasks) == 1 && st.Tasks[0].State == "RUNNING"
	})
	g.stop[second.AgentId]()
	waitDemand(t, g.c.m, "g", demand.Failed)
	d := getDemands(t, g.h)["g"]
	if d.Reason != demand.ReasonHandOverFailed || !strings.Contains(d.Message, second.AgentId) || !strings.Contains(d.Message, "1 of 2 tasks launched") {
		t.Errorf("gang failed [%s] %q, want hand-over failed naming agent %s and 1 of 2 tasks launched", d.Reason, d.Message, second.AgentId)
	}
	g.runner[first.AgentId].waitKilled(t, "g-0", 30*time.Second, "after its gang failed")
	// Its booking is gone: the two agents still connected take a strict
	// gang at once.
	code, body = postDemands(t, g.h, `{"DemandID": "s", "FrameworkID": "`+fw+`", "Resources": "cpus:2;mem:1024", "Tasks": 2,
	  "Start": {"Time": ["`+g.at(10*time.Minute)+`", "+1m"], "Strategy": "strict"}}`)
	if code != http.StatusOK || !strings.Contains(body, `"ACCEPTED"`) {
		t.Fatalf("a strict demand after the gang failed: %d %s, want ACCEPTED", code, body)
	}
}

// TestDemandGangRanPart: a gang handed over whole whose framework
// launched 1 of its 2 tasks does not end "all 2 tasks finished": it
// fails (hand-over failed), saying what ran.
func TestDemandGangRanPart(t *testing.T) {
	start := time.Now().UTC().Truncate(time.Second)
	clock := &testClock{t: start}
	c := newCluster(t, master.Options{Demands: master.DemandOptions{Lead: time.Minute, PickUp: time.Hour, Clock: clock.Now}})
	r := newFakeRunner()
	c.startAgentWith(t.TempDir(), r, resources.MustParse("cpus:4;mem:4096"))
	waitAgents(t, c.m, 1)
	f := c.startDemandFramework("gang", false)
	h := httpHandler(c.api, nil)
	code, body := postDemands(t, h, `{"DemandID": "g", "FrameworkID": "`+f.d.FrameworkID()+`", "Resources": "cpus:2;mem:1024", "Tasks": 2, "Gang": true}`)
	if code != http.StatusOK {
		t.Fatalf("POST /demands: %d %s", code, body)
	}
	o := f.nextDemandOffer(t, "g") // both tasks' worth on the one agent
	if err := f.d.Launch(context.Background(), []string{o.Id}, []*pb.TaskInfo{{TaskId: "g-0", Resources: "cpus:2;mem:1024", Command: []string{"sleep"}}}, 0); err != nil {
		t.Fatal(err)
	}
	waitDemand(t, c.m, "g", demand.Monitoring)
	waitState(t, c.m, "g-0 running", func(st master.State) bool { return len(st.Tasks) == 1 && st.Tasks[0].State == "RUNNING" })
	finishTask(t, r, "g-0")
	waitDemand(t, c.m, "g", demand.Failed)
	d := getDemands(t, h)["g"]
	if d.Reason != demand.ReasonHandOverFailed || !strings.Contains(d.Message, "1 of its 2 tasks") || strings.Contains(d.Message, "all 2") {
		t.Errorf("gang ended [%s] %q, want hand-over failed saying it ran 1 of 2", d.Reason, d.Message)
	}
}
