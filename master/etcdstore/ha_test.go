package etcdstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/brimnode/brim/client"
	"github.com/brimnode/brim/internal/masteraddr"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/etcdstore"
	"github.com/brimnode/brim/master/server"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
)

// recordingElector keeps the terms it won, so that the test can try a
// deposed leader's store.
type recordingElector struct {
	*etcdstore.Client
	mu    sync.Mutex
	terms []master.Term
}

func (e *recordingElector) Campaign(ctx context.Context, addr string) (master.Term, error) {
	t, err := e.Client.Campaign(ctx, addr)
	if err == nil {
		e.mu.Lock()
		e.terms = append(e.terms, t)
		e.mu.Unlock()
	}
	return t, err
}

// haMaster is one master of the test cluster, with its own path to etcd.
type haMaster struct {
	r       *server.Running
	elector *recordingElector
	etcd    proxies
	cancel  context.CancelFunc
	stopped chan struct{} // closed when Wait returned, with err
	err     error
}

func (h *haMaster) addr() string { return h.r.Addr.String() }

func startHAMaster(t *testing.T, c *etcdCluster, ttl time.Duration, listen string) *haMaster {
	t.Helper()
	return startHAMasterWith(t, c, ttl, listen, master.Options{AllocationInterval: 50 * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond, MaxMissedHeartbeats: 25, FailoverTimeout: time.Minute,
		Log: testutil.FailureLog(t, "master "+listen)})
}

func startHAMasterWith(t testing.TB, c *etcdCluster, ttl time.Duration, listen string, opts master.Options) *haMaster {
	t.Helper()
	return startHAMasterTimeout(t, c, ttl, 2*time.Second, listen, opts)
}

// startHAMasterTimeout is startHAMasterWith whose etcd requests each
// get requestTimeout.
func startHAMasterTimeout(t testing.TB, c *etcdCluster, ttl, requestTimeout time.Duration, listen string, opts master.Options) *haMaster {
	t.Helper()
	ps := newProxies(t, c)
	e := &recordingElector{Client: openLogged(t, ps.addrs(), "/brim-ha", ttl, requestTimeout, opts.Log)}
	ctx, cancel := context.WithCancel(context.Background())
	r, err := server.Start(ctx, server.Config{
		Options: opts,
		Listen:  listen,
		Elector: e,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h := &haMaster{r: r, elector: e, etcd: ps, cancel: cancel, stopped: make(chan struct{})}
	go func() { h.err = r.Wait(); close(h.stopped) }() // owned by the test: cleanup waits
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.stopped:
		case <-time.After(15 * time.Second):
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Errorf("master %s did not stop; goroutines:\n%s", h.addr(), buf[:n])
		}
	})
	return h
}

// leaderOf waits for exactly one of ms to lead and returns it.
func leaderOf(t *testing.T, ms []*haMaster, within time.Duration) *haMaster {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var leading []*haMaster
		for _, m := range ms {
			if m.r.Leading() != nil {
				leading = append(leading, m)
			}
		}
		if len(leading) > 1 {
			t.Fatalf("%d masters lead at once", len(leading))
		}
		if len(leading) == 1 {
			return leading[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no leader within %v", within)
	return nil
}

// haRunner is an in-memory agent: tasks run until killed.
type haRunner struct {
	mu     sync.Mutex
	client *masterlink.Client
	tasks  map[string]*masterlink.TaskSnapshot
}

func (r *haRunner) LaunchTask(_ context.Context, t masterlink.Task) error {
	r.mu.Lock()
	r.tasks[t.ID] = &masterlink.TaskSnapshot{Task: t, State: pb.TaskState_TASK_RUNNING}
	c := r.client
	r.mu.Unlock()
	if err := c.Update(masterlink.Status{TaskID: t.ID, State: pb.TaskState_TASK_STARTING}); err != nil {
		return err
	}
	return c.Update(masterlink.Status{TaskID: t.ID, State: pb.TaskState_TASK_RUNNING})
}

func (r *haRunner) KillTask(_ context.Context, _, id string) error {
	r.mu.Lock()
	t := r.tasks[id]
	if t != nil {
		t.State = pb.TaskState_TASK_KILLED
	}
	c := r.client
	r.mu.Unlock()
	if t == nil {
		return nil
	}
	return c.Update(masterlink.Status{TaskID: id, State: pb.TaskState_TASK_KILLED, Reason: "KILLED_BY_FRAMEWORK"})
}

func (r *haRunner) Tasks(context.Context) ([]masterlink.TaskSnapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []masterlink.TaskSnapshot
	for _, t := range r.tasks {
		out = append(out, *t)
	}
	return out, nil
}

// waitState polls m's State until ok.
func waitState(t *testing.T, m *master.Master, within time.Duration, what string, ok func(*master.State) bool) *master.State {
	t.Helper()
	deadline := time.Now().Add(within)
	var st *master.State
	for time.Now().Before(deadline) {
		s := m.State()
		st = &s
		if ok(st) {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := json.Marshal(st)
	t.Fatalf("%s: not within %v; state %s", what, within, b)
	return nil
}

func post(t *testing.T, client *http.Client, url, body string) *http.Response {
	t.Helper()
	resp, err := client.Post(url, "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// TestFailover: three masters on a 3-member etcd, an agent and a
// framework given the list of all three. Standbys answer /health 503
// naming the leader, redirect the operator API (307) and answer gRPC
// with the leader's address. The leader is cut from etcd (its process
// "killed" as far as etcd can tell): it stops serving, a new leader is
// elected within the session TTL and a little, the agent re-registers
// with its task and the framework re-subscribes there, the registry
// (weights, quota, reservations, the framework's principal) is intact,
// and the deposed leader's writes are refused.
func TestFailover(t *testing.T) {
	c := startEtcd(t, 3)
	const ttl = 2 * time.Second
	var ms []*haMaster
	for range 3 {
		ms = append(ms, startHAMaster(t, c, ttl, "127.0.0.1:0"))
	}
	leader := leaderOf(t, ms, 20*time.Second)
	var standbys []*haMaster
	for _, m := range ms {
		if m != leader {
			standbys = append(standbys, m)
		}
	}
	noFollow := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	// Standbys: /health, redirect, gRPC status (once they observed the leader).
	for _, s := range standbys {
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := noFollow.Get("http://" + s.addr() + "/health")
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]string
			_ = json.NewDecoder(resp.Body).Decode(&body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || body["status"] != "standby" {
				t.Fatalf("standby /health: %d %v", resp.StatusCode, body)
			}
			if body["leader"] == leader.addr() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("standby /health names leader %q, want %s", body["leader"], leader.addr())
			}
			time.Sleep(20 * time.Millisecond)
		}
		resp := post(t, noFollow, "http://"+s.addr()+"/weights?x=1", `[{"role":"ads","weight":3}]`)
		if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "http://"+leader.addr()+"/weights?x=1" {
			t.Fatalf("standby POST /weights: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		cc, err := grpc.NewClient(s.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = pb.NewSchedulerClient(cc).Revive(context.Background(), &pb.ReviveRequest{FrameworkId: "x"})
		_ = cc.Close()
		if l, ok := masteraddr.Leader(err); !ok || l != leader.addr() {
			t.Fatalf("standby gRPC answer %v: leader %q (%v), want %s", err, l, ok, leader.addr())
		}
	}

	// Through the redirect (the body is sent again): weights, quota.
	for _, req := range [][2]string{{"/weights", `[{"role":"ads","weight":3}]`}, {"/quota", `{"role":"ads","guarantee":"cpus:1"}`}} {
		if resp := post(t, http.DefaultClient, "http://"+standbys[0].addr()+req[0], req[1]); resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s through a standby: %d", req[0], resp.StatusCode)
		}
	}

	list := strings.Join([]string{ms[0].addr(), ms[1].addr(), ms[2].addr()}, ",")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runner := &haRunner{tasks: map[string]*masterlink.TaskSnapshot{}}
	agent, err := masterlink.New(masterlink.Options{Master: list, StateDir: t.TempDir(), Hostname: "h1", Runner: runner,
		Resources: mustParse(t, "cpus:4;mem:4096"), ReconnectMin: 50 * time.Millisecond, ReconnectMax: 500 * time.Millisecond,
		RetryMin: 100 * time.Millisecond, RetryMax: time.Second, Log: testutil.FailureLog(t, "agent")})
	if err != nil {
		t.Fatal(err)
	}
	runner.client = agent
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() { defer wg.Done(); _ = agent.Run(ctx) }()
	lm := leader.r.Leading()
	st := waitState(t, lm, 20*time.Second, "agent registered", func(s *master.State) bool { return len(s.Agents) == 1 && s.Agents[0].Connected })
	agentID := st.Agents[0].ID
	if resp := post(t, http.DefaultClient, "http://"+leader.addr()+"/reserve",
		fmt.Sprintf(`{"agentId":%q,"resources":"cpus(ads):1;mem(ads):256"}`, agentID)); resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /reserve: %d", resp.StatusCode)
	}

	d, err := scheduler.New(scheduler.Options{Master: list, Name: "ha", Roles: []string{"web"}, FailoverTimeout: time.Minute,
		Log: testutil.FailureLog(t, "framework")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	var launched sync.Once
	var updMu sync.Mutex
	updates := map[string]int{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = d.Run(ctx, scheduler.Callbacks{
			Offers: func(ctx context.Context, offers []*pb.Offer) {
				launched.Do(func() {
					err := d.Launch(ctx, []string{offers[0].Id},
						[]*pb.TaskInfo{{TaskId: "t1", Resources: "cpus:0.5;mem:64", Command: []string{"sleep", "600"}},
							{TaskId: "t2", Resources: "cpus:0.5;mem:64", Command: []string{"sleep", "600"}}}, 0)
					if err != nil {
						t.Errorf("launch: %v", err)
					}
				})
			},
			Update: func(_ context.Context, s *pb.TaskStatus) {
				updMu.Lock()
				updates[s.TaskId+" "+s.State.String()]++
				updMu.Unlock()
			},
		})
	}()
	st = waitState(t, lm, 20*time.Second, "tasks t1 and t2 running", func(s *master.State) bool {
		return len(s.Tasks) == 2 && s.Tasks[0].State == "RUNNING" && s.Tasks[1].State == "RUNNING"
	})
	fwID := st.Tasks[0].FrameworkID

	// "Kill" the leader: no more traffic between it and etcd.
	cut := time.Now()
	leader.etcd.Cut()
	// t2 ends while nobody leads: its checkpointed FINISHED must reach
	// the framework once, through the new leader.
	if err := agent.Update(masterlink.Status{TaskID: "t2", State: pb.TaskState_TASK_FINISHED, Reason: "COMMAND_EXITED"}); err != nil {
		t.Fatal(err)
	}
	runner.mu.Lock()
	runner.tasks["t2"].State = pb.TaskState_TASK_FINISHED
	runner.mu.Unlock()
	// Watch both at once: the cut leader stepping down, a standby
	// taking over.
	var stepped, elected time.Duration
	var next *haMaster
	for stepped == 0 || next == nil {
		if time.Since(cut) > 3*ttl {
			t.Fatalf("%v after the cut: the cut leader steps down after %v, new leader %v", 3*ttl, stepped, next != nil)
		}
		if stepped == 0 && leader.r.Leading() == nil {
			stepped = time.Since(cut)
		}
		for _, s := range standbys {
			if next == nil && s.r.Leading() != nil {
				next, elected = s, time.Since(cut)
				if stepped == 0 {
					t.Errorf("two leaders at once: the cut one still serves when %s is elected", s.addr())
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("the cut leader stopped serving %v after the cut", stepped.Round(time.Millisecond))
	select {
	case <-leader.stopped:
		if !errors.Is(leader.err, server.ErrLostLeadership) {
			t.Fatalf("the cut leader ended with %v, want ErrLostLeadership", leader.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cut leader's Start did not end")
	}
	nm := next.r.Leading()
	st = waitState(t, nm, 30*time.Second, "agent re-registered with t1, t2 done, framework re-subscribed", func(s *master.State) bool {
		return len(s.Agents) == 1 && s.Agents[0].Connected && len(s.Tasks) == 1 && s.Tasks[0].State == "RUNNING" &&
			len(s.Frameworks) == 1 && s.Frameworks[0].Connected && len(s.CompletedTasks) == 1 && s.CompletedTasks[0].ID == "t2"
	})
	t.Logf("new leader %s elected %v after the cut (session TTL %v); agent and framework back %v after the cut",
		next.addr(), elected.Round(time.Millisecond), ttl, time.Since(cut).Round(time.Millisecond))
	if st.Agents[0].ID != agentID || st.Tasks[0].ID != "t1" || st.Frameworks[0].ID != fwID {
		t.Fatalf("after the failover: agent %s task %s framework %s; want %s t1 %s", st.Agents[0].ID, st.Tasks[0].ID, st.Frameworks[0].ID, agentID, fwID)
	}
	if st.Weights["ads"] != 3 {
		t.Errorf("weights after the failover: %v", st.Weights)
	}
	if q, ok := st.Quota["ads"]; !ok || q.Guarantee != "cpus:1" {
		t.Errorf("quota after the failover: %+v", st.Quota)
	}
	if r, err := resources.Parse(st.Agents[0].Reserved); err != nil || r.String() != mustParse(t, "cpus(ads,anonymous):1;mem(ads,anonymous):256").String() {
		t.Errorf("reservations after the failover: %q (%v)", st.Agents[0].Reserved, err)
	}

	// The deposed leader's store refuses writes once it reaches etcd again.
	leader.etcd.Restore()
	time.Sleep(200 * time.Millisecond)
	leader.elector.mu.Lock()
	old := leader.elector.terms[0]
	leader.elector.mu.Unlock()
	// Until its client reconnects the write fails otherwise; never succeeds.
	for deadline := time.Now().Add(20 * time.Second); ; {
		err := old.Store().PutWeights(map[string]float64{"ads": 7})
		if errors.Is(err, master.ErrNotLeader) {
			break
		}
		if err == nil || time.Now().After(deadline) {
			t.Fatalf("deposed leader's write: %v, want ErrNotLeader", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if w := nm.State().Weights["ads"]; w != 3 {
		t.Fatalf("weight after the deposed leader's write: %v", w)
	}
	// The operator client with the dead master listed first, then a
	// standby: it moves on, follows the redirect, sends its change.
	var standby *haMaster
	for _, s := range standbys {
		if s != next {
			standby = s
		}
	}
	oc, err := client.New(client.Config{Master: strings.Join([]string{leader.addr(), standby.addr()}, ","), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := oc.SetWeights(context.Background(), []master.WeightRequest{{Role: "web", Weight: 4}}); err != nil {
		t.Fatalf("operator client through the dead master and a standby: %v", err)
	}
	if got, err := oc.State(context.Background()); err != nil || got.Weights["web"] != 4 || got.Weights["ads"] != 3 {
		t.Fatalf("operator client State: %v %v", got.Weights, err)
	}

	updMu.Lock()
	for _, u := range []string{"t1 TASK_RUNNING", "t2 TASK_RUNNING", "t2 TASK_FINISHED"} {
		if updates[u] != 1 {
			t.Errorf("the framework got %s %d times, want once: %v", u, updates[u], updates)
		}
	}
	updMu.Unlock()

	// A full restart of every master on the same addresses: the
	// registry is etcd's, the agent and the framework come back.
	for _, m := range ms {
		m.cancel()
		<-m.stopped
	}
	var again []*haMaster
	for _, m := range ms {
		again = append(again, startHAMaster(t, c, ttl, m.addr()))
	}
	lm = leaderOf(t, again, 20*time.Second).r.Leading()
	st = waitState(t, lm, 30*time.Second, "agent and framework back after a full restart", func(s *master.State) bool {
		return len(s.Agents) == 1 && s.Agents[0].Connected && len(s.Tasks) == 1 && s.Tasks[0].State == "RUNNING" &&
			len(s.Frameworks) == 1 && s.Frameworks[0].Connected
	})
	if st.Agents[0].ID != agentID || st.Frameworks[0].ID != fwID || st.Weights["ads"] != 3 || st.Weights["web"] != 4 ||
		st.Quota["ads"].Guarantee != "cpus:1" || st.Agents[0].Reserved == "" {
		b, _ := json.Marshal(st)
		t.Fatalf("after a full restart: %s", b)
	}
}
