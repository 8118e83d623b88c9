package master_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/transport"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeRunner is an in-memory TaskRunner: tasks "run" until the test
// finishes or kills them. It stands in for the agent so these tests cover
// the protocol; integration/ covers real containers.
type fakeRunner struct {
	mu     sync.Mutex
	client *masterlink.Client
	tasks  map[string]*masterlink.TaskSnapshot
	// autoExit, when set, finishes every task right after RUNNING.
	autoExit *int
	// Resource updates (update_test.go): holdUpdates delays them until
	// closed, failUpdates fails them, updates records the applied ones.
	holdUpdates chan struct{}
	failUpdates bool
	updates     []string
}

func newFakeRunner() *fakeRunner { return &fakeRunner{tasks: map[string]*masterlink.TaskSnapshot{}} }

func (r *fakeRunner) LaunchTask(_ context.Context, t masterlink.Task) error {
	r.mu.Lock()
	r.tasks[t.ID] = &masterlink.TaskSnapshot{Task: t, State: pb.TaskState_TASK_RUNNING}
	c, exit := r.client, r.autoExit
	r.mu.Unlock()
	if err := c.Update(masterlink.Status{TaskID: t.ID, FrameworkID: t.FrameworkID, State: pb.TaskState_TASK_STARTING}); err != nil {
		return err
	}
	if err := c.Update(masterlink.Status{TaskID: t.ID, FrameworkID: t.FrameworkID, State: pb.TaskState_TASK_RUNNING}); err != nil {
		return err
	}
	if exit != nil {
		return r.finish(t.ID, *exit)
	}
	return nil
}

func (r *fakeRunner) finish(id string, code int) error {
	r.mu.Lock()
	st := pb.TaskState_TASK_FINISHED
	if code != 0 {
		st = pb.TaskState_TASK_FAILED
	}
	snap := r.tasks[id]
	msg := fmt.Sprintf("command exited with code %d", code)
	snap.State, snap.Reason, snap.Message, snap.ExitCode = st, "COMMAND_EXITED", msg, &code
	c, fw := r.client, snap.Task.FrameworkID
	r.mu.Unlock()
	return c.Update(masterlink.Status{TaskID: id, FrameworkID: fw, State: st, ExitCode: &code, Reason: "COMMAND_EXITED", Message: msg})
}

// waitKilled waits up to within for task id to be killed, what naming
// the moment in the failure.
func (r *fakeRunner) waitKilled(t *testing.T, id string, within time.Duration, what string) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		r.mu.Lock()
		st := r.tasks[id].State
		r.mu.Unlock()
		if st == pb.TaskState_TASK_KILLED {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s %s, want KILLED", id, st, what)
		}
	}
}

func (r *fakeRunner) KillTask(_ context.Context, framework, id string) error {
	r.mu.Lock()
	t := r.tasks[id]
	if t != nil && framework != "" && t.Task.FrameworkID != framework {
		t = nil // another framework's task of that ID (the agent's runner never kills it)
	}
	fw := ""
	if t != nil {
		t.State, fw = pb.TaskState_TASK_KILLED, t.Task.FrameworkID
	}
	c := r.client
	r.mu.Unlock()
	if t == nil {
		return nil
	}
	return c.Update(masterlink.Status{TaskID: id, FrameworkID: fw, State: pb.TaskState_TASK_KILLED, Reason: "KILLED_BY_FRAMEWORK"})
}

// agentID is the ID the agent kept from its registration ("" before).
func (r *fakeRunner) agentID() string {
	r.mu.Lock()
	c := r.client
	r.mu.Unlock()
	if c == nil {
		return ""
	}
	return c.AgentID()
}

func (r *fakeRunner) Tasks(context.Context) ([]masterlink.TaskSnapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []masterlink.TaskSnapshot
	for _, t := range r.tasks {
		out = append(out, *t)
	}
	return out, nil
}

// cluster is a master served over gRPC by its transport (master and
// transport together: the domain's behaviour as agents and frameworks
// see it).
type cluster struct {
	t      *testing.T
	m      *master.Master
	api    *transport.API
	addr   string
	cancel context.CancelFunc
	stop   func()
}

func newCluster(t *testing.T, opts master.Options) *cluster {
	t.Helper()
	return newClusterAt(t, opts, "127.0.0.1:0")
}

// newClusterAt starts a master listening on addr; stop ends it (also at
// cleanup).
func newClusterAt(t *testing.T, opts master.Options, addr string) *cluster {
	t.Helper()
	return newClusterServing(t, opts, transport.Options{}, addr)
}

// httpHandler is the operator API of a, authenticating with auth when
// not nil (which then authenticates frameworks too, as one credentials
// file does).
func httpHandler(a *transport.API, auth transport.Authorizer) http.Handler {
	if auth != nil {
		a.SetAuthorizer(auth)
	}
	return a.Handler()
}

// newClusterServing is newClusterAt with the transport's options.
func newClusterServing(t *testing.T, opts master.Options, topts transport.Options, addr string) *cluster {
	t.Helper()
	if opts.AllocationInterval == 0 {
		opts.AllocationInterval = 50 * time.Millisecond
	}
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = 100 * time.Millisecond
	}
	m, err := master.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	api := transport.New(m, topts)
	srv := grpc.NewServer()
	api.RegisterGRPC(srv)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = srv.Serve(l) }()
	go func() { defer wg.Done(); _ = m.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); srv.Stop(); wg.Wait() }) }
	t.Cleanup(stop)
	return &cluster{t: t, m: m, api: api, addr: l.Addr().String(), cancel: cancel, stop: stop}
}

// startAgent runs a masterlink client with a fake runner until stopped.
func (c *cluster) startAgent(dir string, r *fakeRunner) (stop func()) {
	c.t.Helper()
	return c.startAgentWith(dir, r, resources.MustParse("cpus:4;mem:4096"))
}

// startAgentWith is startAgent for an agent offering res.
func (c *cluster) startAgentWith(dir string, r *fakeRunner, res resources.Resources) (stop func()) {
	c.t.Helper()
	return c.startAgentRetrying(dir, r, res, 100*time.Millisecond, time.Second)
}

// startAgentRetrying is startAgentWith retrying unacknowledged status
// updates from retryMin to retryMax.
func (c *cluster) startAgentRetrying(dir string, r *fakeRunner, res resources.Resources, retryMin, retryMax time.Duration) (stop func()) {
	c.t.Helper()
	cl, err := masterlink.New(masterlink.Options{Master: c.addr, StateDir: dir, Resources: res,
		Runner: r, RetryMin: retryMin, RetryMax: retryMax, ReconnectMin: 50 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
	if err != nil {
		c.t.Fatal(err)
	}
	r.mu.Lock()
	r.client = cl
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = cl.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	c.t.Cleanup(stop)
	return stop
}

// framework is a test framework that launches the tasks it is told to on
// the first offers and records every update it sees.
type framework struct {
	d        *scheduler.Driver
	offers   chan []*pb.Offer
	updates  chan *pb.TaskStatus
	rescinds chan string
	// subscribed is closed on the first subscription.
	subscribed chan struct{}
}

func (c *cluster) startFramework(name string, roles ...string) *framework {
	c.t.Helper()
	return c.startFrameworkFailover(name, time.Minute, roles...)
}

// startFrameworkFailover is startFramework with the framework's failover
// timeout.
func (c *cluster) startFrameworkFailover(name string, failover time.Duration, roles ...string) *framework {
	c.t.Helper()
	return c.startFrameworkWith(scheduler.Options{Name: name, Roles: roles, FailoverTimeout: failover})
}

// startFrameworkWith starts a framework of opts (Master: the cluster's).
func (c *cluster) startFrameworkWith(opts scheduler.Options) *framework {
	c.t.Helper()
	opts.Master = c.addr
	d, err := scheduler.New(opts)
	if err != nil {
		c.t.Fatal(err)
	}
	f := &framework{d: d, offers: make(chan []*pb.Offer, 100), updates: make(chan *pb.TaskStatus, 100), rescinds: make(chan string, 100), subscribed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(ctx, scheduler.Callbacks{
			Subscribed: func(context.Context, string) {
				select {
				case <-f.subscribed:
				default:
					close(f.subscribed)
				}
			},
			Offers:  func(_ context.Context, os []*pb.Offer) { f.offers <- os },
			Rescind: func(_ context.Context, id string) { f.rescinds <- id },
			Update:  func(_ context.Context, st *pb.TaskStatus) { f.updates <- st },
		})
	}()
	c.t.Cleanup(func() { cancel(); <-done; d.Close() })
	return f
}

func (f *framework) nextOffers(t *testing.T) []*pb.Offer {
	t.Helper()
	select {
	case os := <-f.offers:
		return os
	case <-time.After(30 * time.Second):
		t.Fatal("no offers")
		return nil
	}
}

func (f *framework) nextUpdate(t *testing.T) *pb.TaskStatus {
	t.Helper()
	select {
	case st := <-f.updates:
		return st
	case <-time.After(30 * time.Second):
		t.Fatal("no update")
		return nil
	}
}

func (f *framework) expectStates(t *testing.T, task string, want ...pb.TaskState) *pb.TaskStatus {
	t.Helper()
	var last *pb.TaskStatus
	for _, w := range want {
		st := f.nextUpdate(t)
		if st.TaskId != task || st.State != w {
			t.Fatalf("update %s %s (%s), want %s %s", st.TaskId, st.State, st.Message, task, w)
		}
		last = st
	}
	return last
}

func launch(t *testing.T, f *framework, o *pb.Offer, id, res string) {
	t.Helper()
	err := f.d.Launch(context.Background(), []string{o.Id}, []*pb.TaskInfo{{TaskId: id, Resources: res, Command: []string{"true"}}}, 0)
	if err != nil {
		t.Fatalf("launch %s: %v", id, err)
	}
}

func TestTaskLifecycle(t *testing.T) {
	c := newCluster(t, master.Options{})
	r := newFakeRunner()
	code := 3
	r.autoExit = &code
	c.startAgent(t.TempDir(), r)
	f := c.startFramework("fw")
	os := f.nextOffers(t)
	if got := resources.MustParse(os[0].Resources); !got.Equal(resources.MustParse("cpus:4;mem:4096")) {
		t.Fatalf("offer %s, want the whole agent", os[0].Resources)
	}
	launch(t, f, os[0], "t1", "cpus:1;mem:128")
	last := f.expectStates(t, "t1", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING, pb.TaskState_TASK_FAILED)
	if !last.HasExitCode || last.ExitCode != 3 {
		t.Fatalf("exit code %v %d, want 3", last.HasExitCode, last.ExitCode)
	}
}

func TestKill(t *testing.T) {
	c := newCluster(t, master.Options{})
	r := newFakeRunner()
	c.startAgent(t.TempDir(), r)
	f := c.startFramework("fw")
	launch(t, f, f.nextOffers(t)[0], "t1", "cpus:1;mem:128")
	f.expectStates(t, "t1", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING)
	if err := f.d.Kill(context.Background(), "t1"); err != nil {
		t.Fatal(err)
	}
	f.expectStates(t, "t1", pb.TaskState_TASK_KILLED)
}

func TestStaleAndForgedOffers(t *testing.T) {
	c := newCluster(t, master.Options{})
	c.startAgent(t.TempDir(), newFakeRunner())
	f := c.startFramework("fw")
	o := f.nextOffers(t)[0]
	ctx := context.Background()
	task := []*pb.TaskInfo{{TaskId: "t1", Resources: "cpus:1;mem:128", Command: []string{"true"}}}
	cases := []struct {
		name   string
		offers []string
		tasks  []*pb.TaskInfo
		code   codes.Code
	}{
		{"forged offer", []string{"forged"}, task, codes.FailedPrecondition},
		{"more than offered", []string{o.Id}, []*pb.TaskInfo{{TaskId: "t1", Resources: "cpus:5;mem:128", Command: []string{"true"}}}, codes.ResourceExhausted},
		{"mixed revocable", []string{o.Id}, []*pb.TaskInfo{{TaskId: "t1", Resources: "cpus:1;cpus{REV}:1", Command: []string{"true"}}}, codes.InvalidArgument},
		{"bad task id", []string{o.Id}, []*pb.TaskInfo{{TaskId: "../x", Resources: "cpus:1", Command: []string{"true"}}}, codes.InvalidArgument},
		{"malformed resources", []string{o.Id}, []*pb.TaskInfo{{TaskId: "t1", Resources: "cpus:lots", Command: []string{"true"}}}, codes.InvalidArgument},
		{"duplicate task", []string{o.Id}, append(task, task...), codes.InvalidArgument},
		{"offer twice", []string{o.Id, o.Id}, task, codes.FailedPrecondition},
	}
	for _, tc := range cases {
		err := f.d.Launch(ctx, tc.offers, tc.tasks, 0)
		if status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	// No side effects: the offer is still valid and whole.
	launch(t, f, o, "t1", "cpus:4;mem:4096")
	if err := f.d.Launch(ctx, []string{o.Id}, task, 0); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("reused offer: %v, want FailedPrecondition", err)
	}
}

func TestLinkCutDeliversEveryUpdateOnce(t *testing.T) {
	c := newCluster(t, master.Options{MaxMissedHeartbeats: 1000})
	dir := t.TempDir()
	r := newFakeRunner()
	stop := c.startAgent(dir, r)
	f := c.startFramework("fw")
	os := f.nextOffers(t)
	launch(t, f, os[0], "a", "cpus:1;mem:128")
	f.expectStates(t, "a", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING)
	for _, id := range []string{"b", "c"} {
		o := f.nextOffers(t)
		launch(t, f, o[0], id, "cpus:1;mem:128")
		f.expectStates(t, id, pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING)
	}
	stop() // the link is cut (the agent's client is gone; its checkpoint stays)
	for i, id := range []string{"a", "b", "c"} {
		if err := r.finish(id, i); err != nil {
			t.Fatal(err)
		}
	}
	c.startAgent(dir, r) // same state dir: same agent ID, pending updates
	seen := map[string]int{}
	for len(seen) < 3 {
		st := f.nextUpdate(t)
		if !masterTerminal(st.State) {
			t.Fatalf("unexpected update %s %s", st.TaskId, st.State)
		}
		seen[st.TaskId]++
		if seen[st.TaskId] > 1 {
			t.Fatalf("update of %s delivered twice", st.TaskId)
		}
	}
	// The duplicates the agent may resend are dropped by the driver: a
	// reconcile afterwards reports nothing unexpected.
	select {
	case st := <-f.updates:
		t.Fatalf("extra update %s %s", st.TaskId, st.State)
	case <-time.After(500 * time.Millisecond):
	}
}

func masterTerminal(s pb.TaskState) bool {
	return s == pb.TaskState_TASK_FINISHED || s == pb.TaskState_TASK_FAILED || s == pb.TaskState_TASK_KILLED
}

func TestUnreachableAgentTasksLost(t *testing.T) {
	c := newCluster(t, master.Options{HeartbeatInterval: 50 * time.Millisecond, MaxMissedHeartbeats: 3})
	r := newFakeRunner()
	stop := c.startAgent(t.TempDir(), r)
	f := c.startFramework("fw")
	launch(t, f, f.nextOffers(t)[0], "t1", "cpus:1;mem:128")
	f.expectStates(t, "t1", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING)
	stop()
	st := f.expectStates(t, "t1", pb.TaskState_TASK_LOST)
	if st.Reason != master.ReasonAgentUnreachable {
		t.Fatalf("reason %q, want %q", st.Reason, master.ReasonAgentUnreachable)
	}
}

func TestAgentBackWithinTimeoutKeepsTasks(t *testing.T) {
	c := newCluster(t, master.Options{HeartbeatInterval: 100 * time.Millisecond, MaxMissedHeartbeats: 100})
	dir := t.TempDir()
	r := newFakeRunner()
	stop := c.startAgent(dir, r)
	f := c.startFramework("fw")
	launch(t, f, f.nextOffers(t)[0], "t1", "cpus:1;mem:128")
	f.expectStates(t, "t1", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING)
	stop()
	c.startAgent(dir, r)
	if err := f.d.Reconcile(context.Background(), "t1"); err != nil {
		t.Fatal(err)
	}
	for {
		st := f.nextUpdate(t)
		if st.TaskId == "t1" && st.Reason == master.ReasonReconciliation {
			if st.State != pb.TaskState_TASK_RUNNING {
				t.Fatalf("reconciled state %s, want RUNNING", st.State)
			}
			break
		}
	}
}

func TestDRFSharesTwoFrameworks(t *testing.T) {
	c := newCluster(t, master.Options{})
	// Seed 000's example: 9 cpus and 18 GB; A wants <1 cpu, 4 GB> per task,
	// B <3 cpus, 1 GB>. DRF gives A 3 tasks and B 2, dominant shares 2/3
	// each. Both frameworks are there before the agent, so that both want
	// resources from the start.
	a := c.startFramework("a", "ra")
	b := c.startFramework("b", "rb")
	<-a.subscribed
	<-b.subscribed
	c.startAgentWith(t.TempDir(), newFakeRunner(), resources.MustParse("cpus:9;mem:18432"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	n := map[string]int{}
	var mu sync.Mutex
	// Both frameworks keep answering offers until neither has launched
	// anything for a while (the agent is full): a framework that stopped
	// early because its offers were slow on a loaded machine would leave
	// everything to the other and say nothing about DRF.
	var lastLaunch time.Time // zero until the first launch
	const quiet = 3 * time.Second
	quietNow := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !lastLaunch.IsZero() && time.Since(lastLaunch) > quiet
	}
	run := func(name string, f *framework, res resources.Resources) {
		defer wg.Done()
		for i := 0; ctx.Err() == nil && !quietNow(); {
			var os []*pb.Offer
			select {
			case os = <-f.offers:
			case <-time.After(200 * time.Millisecond):
				continue
			}
			for _, o := range os {
				// One task per offer, the rest back to the pool at once:
				// the allocator then applies DRF task by task, as the
				// seed's progressive filling does.
				var tasks []*pb.TaskInfo
				if resources.MustParse(o.Resources).Contains(res) {
					tasks = append(tasks, &pb.TaskInfo{TaskId: name + "-" + itoa(i), Resources: res.String(), Command: []string{"true"}})
					i++
				}
				_ = f.d.Launch(ctx, []string{o.Id}, tasks, 0)
				mu.Lock()
				n[name] += len(tasks)
				if len(tasks) > 0 {
					lastLaunch = time.Now()
				}
				mu.Unlock()
			}
		}
	}
	wg.Add(2)
	go run("a", a, resources.MustParse("cpus:1;mem:4096"))
	go run("b", b, resources.MustParse("cpus:3;mem:1024"))
	wg.Wait()
	if n["a"] != 3 || n["b"] != 2 {
		t.Fatalf("tasks %v, want DRF's a:3 b:2 (dominant shares 2/3 each)", n)
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
