package etcdstore_test

import (
	"context"
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
	runner := &haRunner{tasks: map[string]*masterlink.TaskSnapshot{}}
	agent, err := masterlink.New(masterlink.Options{Master: list, StateDir: t.TempDir(), Hostname: "h1", Runner: runner,
		Resources: mustParse(t, "cpus:4;mem:4096"), ReconnectMin: 100 * time.Millisecond, ReconnectMax: time.Second,
		KeepaliveTime: time.Minute, KeepaliveTimeout: time.Minute, Log: testutil.FailureLog(t, "agent")})
	if err != nil {
		t.Fatal(err)
	}
	runner.client = agent
	wg.Add(1)
	go func() { defer wg.Done(); _ = agent.Run(ctx) }()
	d, err := scheduler.New(scheduler.Options{Master: list, Name: "frozen", FailoverTimeout: time.Minute,
		DialOptions: []grpc.DialOption{grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: time.Minute, Timeout: time.Minute})},
		Log:         testutil.FailureLog(t, "framework")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
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
	if err := frozen.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = frozen.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume) // before the role's own cleanup kills it
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
