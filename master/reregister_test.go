package master_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/boltstore"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// waitAgent polls the master's state until ok holds for its one agent.
func waitAgent(t *testing.T, m *master.Master, what string, ok func(master.AgentState) bool) master.AgentState {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := m.State()
		if len(st.Agents) == 1 && ok(st.Agents[0]) {
			return st.Agents[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent never %s: %+v", what, st.Agents)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReregisterManyLargeTasks: an agent running 100 tasks with 90 KB
// commands (9 MB of specs, past gRPC's 4 MiB default that this master
// keeps) registers with a master that does not know them (it adopts them)
// and re-registers after a restart without losing one. Before paging its
// Register was refused for its size and every task went LOST.
func TestReregisterManyLargeTasks(t *testing.T) {
	// The agent must stay known while it restarts: re-sending 9 MB of
	// specs takes seconds on a loaded host, and an agent declared
	// unreachable (heartbeat × missed) would come back under a new ID.
	c := newCluster(t, master.Options{MaxMissedHeartbeats: 1000})
	r := newFakeRunner()
	pad := strings.Repeat("x", 90_000)
	for i := range 100 {
		id := fmt.Sprintf("t%03d", i)
		r.tasks[id] = &masterlink.TaskSnapshot{State: pb.TaskState_TASK_RUNNING, Task: masterlink.Task{ID: id, FrameworkID: "fw",
			Resources: resources.MustParse("cpus:0.01;mem:1"), Command: []string{"sleep", "600", pad}}}
	}
	dir := t.TempDir()
	stop := c.startAgent(dir, r)
	first := waitAgent(t, c.m, "registered with its 100 tasks", func(a master.AgentState) bool { return a.Connected && a.Tasks == 100 })
	// The agent saves its ID just after the master answers: stopped
	// before that, it would come back as a new agent.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(dir, "masterlink", "agent-id"))
		if err == nil && strings.TrimSpace(string(b)) == first.ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not save its ID %s: %q, %v", first.ID, b, err)
		}
	}
	stop()
	waitAgent(t, c.m, "disconnected", func(a master.AgentState) bool { return !a.Connected })
	c.startAgent(dir, r)
	a := waitAgent(t, c.m, "re-registered", func(a master.AgentState) bool { return a.Connected })
	if a.Tasks != 100 || a.ID != first.ID {
		t.Fatalf("re-registered as %s with %d tasks, want %s with 100", a.ID, a.Tasks, first.ID)
	}
}

// TestRegisterPagesOnlyThenRegistered: between a Register announcing more
// tasks and the last page, anything else is refused.
func TestRegisterPagesOnlyThenRegistered(t *testing.T) {
	c := newCluster(t, master.Options{})
	cc, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := pb.NewAgentLinkClient(cc).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reg := &pb.Register{Hostname: "h", Resources: "cpus:1;mem:64", MoreTasks: true}
	for _, m := range []*pb.AgentMessage{
		{Msg: &pb.AgentMessage_Register{Register: reg}},
		{Msg: &pb.AgentMessage_ReregisterTasks{ReregisterTasks: &pb.ReregisterTasks{}}},
		{Msg: &pb.AgentMessage_Heartbeat{Heartbeat: &pb.Heartbeat{}}},
	} {
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "before the last page of tasks") {
		t.Fatalf("heartbeat before the last page: %v, want InvalidArgument", err)
	}
	if st := c.m.State(); len(st.Agents) != 0 {
		t.Fatalf("a refused registration left agents %+v", st.Agents)
	}
}

// TestReconcileAnsweredWhenWindowCloses: a master that starts (or is
// elected) with a registry naming an agent that never comes back does
// not call a task it does not know LOST during the re-registration
// window (it may be on that agent), but answers the question LOST once
// the window closes. Before, the question was dropped and never
// answered: a framework that reconciled right after a failover waited
// forever for a task of a dead agent.
func TestReconcileAnsweredWhenWindowCloses(t *testing.T) {
	st, err := boltstore.Open(t.TempDir() + "/master.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutAgent("gone", master.PersistedAgent{Hostname: "h"}); err != nil {
		t.Fatal(err)
	}
	const window = 1500 * time.Millisecond
	start := time.Now() // the window runs from the master's start
	c := newCluster(t, master.Options{Store: st, ReregistrationTimeout: window, MaxMissedHeartbeats: 1000})
	f := c.startFramework("recon")
	<-f.subscribed
	if err := f.d.Reconcile(context.Background(), "ghost"); err != nil {
		t.Fatal(err)
	}
	select {
	case u := <-f.updates:
		if time.Since(start) < window {
			t.Fatalf("answered %s within the window (%v after)", u.State, time.Since(start))
		}
		if u.TaskId != "ghost" || u.State != pb.TaskState_TASK_LOST || u.Reason != master.ReasonReconciliation {
			t.Fatalf("answer %s %s %s", u.TaskId, u.State, u.Reason)
		}
	case <-time.After(window + 10*time.Second):
		t.Fatal("the reconciliation was never answered")
	}
}

// TestAnsweredLostStaysLost: once the master told a framework that a task
// it does not know is LOST, an agent that turns up later with that task
// (it missed the re-registration window) gets it killed, and the
// framework hears nothing more of it. Before, the master adopted it and
// forwarded its later updates: FAILED or FINISHED after a terminal LOST
// (chaos seed 2611).
func TestAnsweredLostStaysLost(t *testing.T) {
	c := newCluster(t, master.Options{MaxMissedHeartbeats: 1000})
	f := c.startFramework("late")
	<-f.subscribed
	if err := f.d.Reconcile(context.Background(), "late-1"); err != nil {
		t.Fatal(err)
	}
	var fw string
	select {
	case u := <-f.updates:
		if u.TaskId != "late-1" || u.State != pb.TaskState_TASK_LOST {
			t.Fatalf("answer %s %s", u.TaskId, u.State)
		}
		fw = u.FrameworkId
	case <-time.After(30 * time.Second):
		t.Fatal("the reconciliation was never answered")
	}
	if fw == "" {
		t.Fatal("the LOST answer names no framework")
	}
	lateAgentKilled(t, c, f, fw, "")
	for _, a := range c.m.State().Agents {
		if a.Tasks != 0 {
			t.Errorf("agent %s holds %d tasks, want the late one not adopted", a.ID, a.Tasks)
		}
	}
}

// TestAnsweredLostSurvivesRestart: the master's answer "LOST" to a task
// it did not know is final across a master restart (or an HA failover,
// which starts the new leader from the same registry): an agent that
// turns up afterwards with that task gets it killed, and the framework
// hears nothing more of it. Before, the answers lived in the master's
// memory only, and the restarted master adopted the task: RUNNING after
// a terminal LOST.
func TestAnsweredLostSurvivesRestart(t *testing.T) {
	open := storeOpener(t)
	store := open()
	c := newClusterAt(t, master.Options{Store: store, MaxMissedHeartbeats: 1000}, "127.0.0.1:0")
	addr := c.addr
	f := c.startFramework("late")
	<-f.subscribed
	if err := f.d.Reconcile(context.Background(), "late-1"); err != nil {
		t.Fatal(err)
	}
	u := f.nextUpdate(t)
	if u.TaskId != "late-1" || u.State != pb.TaskState_TASK_LOST {
		t.Fatalf("answer %s %s", u.TaskId, u.State)
	}
	fw := u.FrameworkId
	c.stop()
	store.Close()

	c2 := newClusterAt(t, master.Options{Store: open(), MaxMissedHeartbeats: 1000}, addr)
	// The framework re-subscribes to the restarted master first: its
	// subscription must not forget the answers either.
	waitState(t, c2.m, "the framework back", func(st master.State) bool {
		return len(st.Frameworks) == 1 && st.Frameworks[0].Connected
	})
	lateAgentKilled(t, c2, f, fw, " after the restart")
	if n := len(c2.m.State().Tasks); n != 0 {
		t.Errorf("/state lists %d tasks, want the late one not adopted", n)
	}
}

// TestClientsRediscoverMasters: an agent and a framework whose listed
// masters are all gone (here: a port nobody listens on) ask their
// discovery (etcd:// in production) for the masters again and reach the
// one it names. Before, the list read at start was final: a client
// outlived by every master it knew never found the new ones.
func TestClientsRediscoverMasters(t *testing.T) {
	c := newCluster(t, master.Options{MaxMissedHeartbeats: 1000})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := l.Addr().String()
	l.Close() // a master that was there when the client started
	var asked atomic.Int32
	discover := func(context.Context) ([]string, error) { asked.Add(1); return []string{c.addr}, nil }

	cl, err := masterlink.New(masterlink.Options{Master: gone, Discover: discover, StateDir: t.TempDir(),
		Resources: resources.MustParse("cpus:1;mem:256"), Runner: newFakeRunner(),
		ReconnectMin: 50 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = cl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitAgent(t, c.m, "registered through the discovery", func(a master.AgentState) bool { return a.Connected })

	d, err := scheduler.New(scheduler.Options{Master: gone, Discover: discover, Name: "rediscover", FailoverTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	subscribed := make(chan struct{})
	var once sync.Once
	go func() {
		_ = d.Run(ctx, scheduler.Callbacks{Subscribed: func(context.Context, string) { once.Do(func() { close(subscribed) }) }})
	}()
	t.Cleanup(func() { _ = d.Close() })
	select {
	case <-subscribed:
	case <-time.After(30 * time.Second):
		t.Fatal("the framework never subscribed through the discovery")
	}
	if asked.Load() < 2 {
		t.Errorf("discovery asked %d times, want once by each client", asked.Load())
	}
}

// lateAgentKilled starts an agent on c that reports task late-1 of
// framework fw RUNNING, after fw was answered that late-1 is LOST: the
// task must be killed and f must hear nothing more of it.
func lateAgentKilled(t *testing.T, c *cluster, f *framework, fw, when string) {
	t.Helper()
	r := newFakeRunner()
	r.tasks["late-1"] = &masterlink.TaskSnapshot{State: pb.TaskState_TASK_RUNNING, Task: masterlink.Task{ID: "late-1", FrameworkID: fw,
		Resources: resources.MustParse("cpus:0.1;mem:16"), Command: []string{"sleep", "600"}}}
	c.startAgent(t.TempDir(), r)
	waitAgent(t, c.m, "registered", func(a master.AgentState) bool { return a.Connected })
	r.waitKilled(t, "late-1", 30*time.Second, "(the late task)"+when)
	select {
	case u := <-f.updates:
		t.Fatalf("update after the LOST answer: %s %s (%s)", u.TaskId, u.State, u.Reason)
	case <-time.After(time.Second):
	}
}
