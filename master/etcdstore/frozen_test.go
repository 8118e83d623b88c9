package etcdstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/brimnode/brim/client"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/scheduler"
)

// TestFrozenLeaderLosesItsClients: the leader of three master processes
// is stopped (SIGSTOP: its process frozen, its sockets still accepting —
// the kernel completes their handshakes) with an agent and a framework
// connected to it. A standby is elected once the frozen leader's lease
// runs out; the agent and the framework must reach it then, while the
// old leader is still frozen, as after a kill — not when it resumes (it
// is resumed 8 s after the election, the agent's and the framework's
// keepalives set to a minute so that only the election can move them;
// BRIM_HA_TTL=N sets the TTL to N s).
// The framework's offer callback waits on its context meanwhile, as a
// call to the frozen master would: it must end with the subscription.
// Before, the framework stayed with the frozen master until it resumed,
// the agent until its keepalive (10 s + 5 s) gave up on it.
func TestFrozenLeaderLosesItsClients(t *testing.T) {
	etcd, _ := startEtcdProcs(t, 1)
	ttl := 4 * time.Second
	if n := envInt(t, "BRIM_HA_TTL", "whole seconds"); n > 0 { // a measurement's (docs/ha.md)
		ttl = time.Duration(n) * time.Second
	}
	margs := roleArgs{Endpoints: etcd, Prefix: "/brim-frozen", TTL: ttl, Heartbeat: time.Second}
	ms := []*masterProc{startMasterProc(t, "master-1", margs)}
	ms[0].waitLeading(t, 30*time.Second)
	ms = append(ms, startMasterProc(t, "master-2", margs), startMasterProc(t, "master-3", margs))
	var addrs []string
	for _, m := range ms {
		addrs = append(addrs, m.addr)
	}
	list := strings.Join(addrs, ",")

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	d := patientClients(ctx, t, &wg, list, "frozen")
	// The framework's callback for its first offer waits as a call to
	// the master would (a Launch, a Decline) until its context ends:
	// the frozen leader never answers it, and the framework must leave
	// all the same.
	offered := make(chan struct{}, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = d.Run(ctx, scheduler.Callbacks{Offers: func(ctx context.Context, _ []*pb.Offer) {
			select {
			case offered <- struct{}{}:
			default:
			}
			<-ctx.Done()
		}})
	}()
	both := func(st *master.State) bool {
		return len(st.Agents) == 1 && st.Agents[0].Connected && len(st.Frameworks) == 1 && st.Frameworks[0].Connected
	}
	waitRemoteState(t, ms[0].addr, 30*time.Second, "agent and framework at the first leader", both)
	select {
	case <-offered:
	case <-time.After(30 * time.Second):
		t.Fatal("no offer to the framework from the first leader")
	}

	frozen := ms[0]
	stop := time.Now()
	resume := freeze(t, frozen)
	var next *masterProc
	select {
	case <-ms[1].elected:
		next = ms[1]
	case <-ms[2].elected:
		next = ms[2]
	case <-time.After(3*ttl + 10*time.Second):
		t.Fatalf("no standby elected within %v of the leader's freeze (TTL %v)", 3*ttl+10*time.Second, ttl)
	}
	elected := time.Unix(0, next.leading.Load())
	const grace = 8 * time.Second // the freeze lasts this long after the election
	var agentAt, fwAt time.Duration
	deadline := elected.Add(grace)
	for agentAt == 0 || fwAt == 0 {
		if time.Now().After(deadline) {
			resume()
			t.Fatalf("%v after the election of %s (%v after the freeze, TTL %v), the old leader still frozen: agent there %v, framework there %v",
				grace, next.addr, elected.Sub(stop).Round(time.Millisecond), ttl, agentAt != 0, fwAt != 0)
		}
		st, err := remoteState(next.addr)
		if err == nil {
			if agentAt == 0 && len(st.Agents) == 1 && st.Agents[0].Connected {
				agentAt = time.Since(stop)
			}
			if fwAt == 0 && len(st.Frameworks) == 1 && st.Frameworks[0].Connected {
				fwAt = time.Since(stop)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	resume()
	t.Logf("after the leader's freeze (TTL %v): new leader %v, agent there %v, framework there %v",
		ttl, elected.Sub(stop).Round(time.Millisecond), agentAt.Round(time.Millisecond), fwAt.Round(time.Millisecond))
}

// patientClients starts an in-memory agent (haRunner, 4 cpus) and
// returns a framework's driver (not run), both of masters and with
// keepalives of a minute: only the masters' answers or the election
// move them, never their own links' checks. The agent runs until ctx
// ends (wg waits for it); the driver is closed at the test's end.
func patientClients(ctx context.Context, t *testing.T, wg *sync.WaitGroup, masters, name string) *scheduler.Driver {
	t.Helper()
	runner := &haRunner{tasks: map[string]*masterlink.TaskSnapshot{}}
	agent, err := masterlink.New(masterlink.Options{Master: masters, StateDir: t.TempDir(), Hostname: "h1", Runner: runner,
		Resources: mustParse(t, "cpus:4;mem:4096"), ReconnectMin: 100 * time.Millisecond, ReconnectMax: time.Second,
		KeepaliveTime: time.Minute, KeepaliveTimeout: time.Minute, Log: testutil.FailureLog(t, "agent")})
	if err != nil {
		t.Fatal(err)
	}
	runner.client = agent
	wg.Add(1)
	go func() { defer wg.Done(); _ = agent.Run(ctx) }()
	d, err := scheduler.New(scheduler.Options{Master: masters, Name: name, FailoverTimeout: time.Minute,
		DialOptions: []grpc.DialOption{grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: time.Minute, Timeout: time.Minute})},
		Log:         testutil.FailureLog(t, "framework")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// freeze stops master p (SIGSTOP) and returns what continues it
// (SIGCONT), once, also at the test's end.
func freeze(t *testing.T, p *masterProc) (resume func()) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume = func() { once.Do(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }) }
	t.Cleanup(resume) // before the role's own cleanup kills it
	return resume
}

// remoteState reads the /state of the master at addr.
func remoteState(addr string) (*master.State, error) {
	c, err := client.New(client.Config{Master: addr, Timeout: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.State(ctx)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// waitRemoteState polls the /state of the master at addr until ok.
func waitRemoteState(t *testing.T, addr string, within time.Duration, what string, ok func(*master.State) bool) *master.State {
	t.Helper()
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		st, err := remoteState(addr)
		if err == nil && ok(st) {
			return st
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v (last error %v)", what, within, last)
	return nil
}

// TestThawedLeaderKeepsItsAgents: the leader (heartbeats every 200 ms,
// an agent unreachable after 5 missed: 1 s) is stopped (SIGSTOP) for
// 2 s with an agent and a framework whose task runs — longer than the
// agent timeout, shorter than the term's TTL·3/4 (3 s): nobody else is
// elected, and its links stay open (their keepalives are a minute).
// When it runs again the heartbeats it could not read are there: it must
// keep the agent and its task. Before, it declared the agent unreachable
// the moment it ran (silent 2 s) and told the framework its task was
// LOST (AGENT_UNREACHABLE): its own pause taken for the agent's silence
// (issue 30, chaos master-stop).
func TestThawedLeaderKeepsItsAgents(t *testing.T) {
	etcd, _ := startEtcdProcs(t, 1)
	margs := roleArgs{Endpoints: etcd, Prefix: "/brim-thawed", TTL: 4 * time.Second, Heartbeat: 200 * time.Millisecond}
	leader := startMasterProc(t, "master-1", margs)
	leader.waitLeading(t, 30*time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	d := patientClients(ctx, t, &wg, leader.addr, "thawed")
	var mu sync.Mutex
	var updates []string
	var launched sync.Once
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = d.Run(ctx, scheduler.Callbacks{
			Offers: func(ctx context.Context, offers []*pb.Offer) {
				launched.Do(func() {
					if err := d.Launch(ctx, []string{offers[0].Id}, []*pb.TaskInfo{{TaskId: "t1", Resources: "cpus:1;mem:64",
						Command: []string{"sleep", "600"}}}, 0); err != nil {
						t.Errorf("launch: %v", err)
					}
				})
			},
			Update: func(_ context.Context, st *pb.TaskStatus) {
				mu.Lock()
				defer mu.Unlock()
				updates = append(updates, fmt.Sprintf("%s %s %s", st.TaskId, st.State, st.Reason))
			},
		})
	}()
	running := func(st *master.State) bool {
		return len(st.Tasks) == 1 && st.Tasks[0].State == "RUNNING" && len(st.Agents) == 1 && st.Agents[0].Connected
	}
	waitRemoteState(t, leader.addr, 30*time.Second, "task t1 running", running)

	resume := freeze(t, leader)
	time.Sleep(2 * time.Second)
	resume()
	// The agent timeout twice over: a master that blames its agents for
	// its own pause does so at its first check.
	time.Sleep(2 * time.Second)
	st := waitRemoteState(t, leader.addr, 10*time.Second, "the thawed leader's state", func(*master.State) bool { return true })
	if !running(st) || st.Agents[0].Unreachable {
		t.Errorf("after its 2 s freeze the leader has tasks %+v, agents %+v: want t1 RUNNING on its connected agent", st.Tasks, st.Agents)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, u := range updates {
		if strings.Contains(u, "LOST") {
			t.Errorf("the framework was told %q after the leader's 2 s freeze (all updates: %q)", u, updates)
		}
	}
}
