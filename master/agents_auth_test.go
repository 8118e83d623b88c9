package master_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/boltstore"
	"github.com/brimnode/brim/master/transport"
	"github.com/brimnode/brim/masterlink"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recordingStore is a bbolt Store that counts agent writes.
type recordingStore struct {
	*boltstore.Store
	mu     sync.Mutex
	agents map[string]master.PersistedAgent
}

func (s *recordingStore) PutAgent(id string, a master.PersistedAgent) error {
	s.mu.Lock()
	s.agents[id] = a
	s.mu.Unlock()
	return s.Store.PutAgent(id, a)
}

func (s *recordingStore) written() map[string]master.PersistedAgent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]master.PersistedAgent{}
	for k, v := range s.agents {
		out[k] = v
	}
	return out
}

// agentAuthCluster is a master authenticating agents: principals agent1
// and agent2 may register agents, ops (a framework principal) may not.
func agentAuthCluster(t *testing.T, store master.Store, addr string) *cluster {
	t.Helper()
	c := newClusterServing(t, master.Options{Store: store}, transport.Options{AuthenticateAgents: true}, addr)
	dir := t.TempDir()
	auth, err := transport.LoadAuth(
		writeFile(t, dir, "creds.json", `[{"principal":"agent1","secret":"a1"},{"principal":"agent2","secret":"a2"},{"principal":"ops","secret":"s3cret"}]`),
		writeFile(t, dir, "acls.json", `{"permissive":true,"rules":[{"principals":["agent1","agent2"],"action":"register_agent"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c.api.SetAuthorizer(auth)
	return c
}

// runAgentAs runs a masterlink client for the agent state in dir with the
// given credentials until the test ends; the returned channel gets Run's
// result.
func runAgentAs(t *testing.T, addr, dir, principal, secret string) (*masterlink.Client, <-chan error) {
	t.Helper()
	cl, done, _ := runStoppableAgentAs(t, addr, dir, principal, secret)
	return cl, done
}

// runStoppableAgentAs is runAgentAs that also returns a stop function,
// which ends the agent's Run and waits for it.
func runStoppableAgentAs(t *testing.T, addr, dir, principal, secret string) (*masterlink.Client, <-chan error, func()) {
	t.Helper()
	cl, err := masterlink.New(masterlink.Options{Master: addr, StateDir: dir, Resources: resources.MustParse("cpus:2;mem:1024"),
		Runner: newFakeRunner(), Principal: principal, Secret: masterlink.NewSecret(secret),
		ReconnectMin: 50 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() { defer close(finished); done <- cl.Run(ctx) }()
	stop := func() { cancel(); <-finished }
	t.Cleanup(stop)
	return cl, done, stop
}

// refusedAgent waits for Run to give up on its first registration and
// checks the code and the message.
func refusedAgent(t *testing.T, done <-chan error, code codes.Code, msgParts ...string) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, masterlink.ErrRejected) || status.Code(err) != code {
			t.Fatalf("run: %v, want %s wrapping ErrRejected", err, code)
		}
		for _, p := range msgParts {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("run: %q does not say %q", err, p)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent was not refused")
	}
}

// waitAgentRegistered waits until the client is registered and returns its
// ID.
func waitAgentRegistered(t *testing.T, cl *masterlink.Client, done <-chan error) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !cl.Connected() {
		select {
		case err := <-done:
			t.Fatalf("run: %v", err)
		case <-deadline:
			t.Fatal("agent not registered")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return cl.AgentID()
}

func TestAgentAuthenticationRefusesWithoutSideEffects(t *testing.T) {
	store := &recordingStore{Store: storeOpener(t)(), agents: map[string]master.PersistedAgent{}}
	t.Cleanup(func() { store.Close() })
	c := agentAuthCluster(t, store, "127.0.0.1:0")
	fw := startSession(t, scheduler.Options{Master: c.addr, Name: "fw", Principal: "ops", Secret: "s3cret"})
	fw.waitSubscribed(t)

	for _, tc := range []struct {
		name, principal, secret string
		code                    codes.Code
		msg                     []string
	}{
		{"no credentials", "", "", codes.Unauthenticated, []string{"agent authentication required", "no credentials", "--principal"}},
		{"unknown principal", "nobody", "x", codes.Unauthenticated, []string{`"nobody"`, "unknown principal"}},
		{"wrong secret", "agent1", "nope", codes.Unauthenticated, []string{`"agent1"`, "wrong secret"}},
		{"acl", "ops", "s3cret", codes.PermissionDenied, []string{`"ops"`, "register_agent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, done := runAgentAs(t, c.addr, t.TempDir(), tc.principal, tc.secret)
			refusedAgent(t, done, tc.code, tc.msg...)
		})
	}
	if st := c.m.State(); len(st.Agents) != 0 {
		t.Fatalf("refused agents recorded: %+v", st.Agents)
	}
	if w := store.written(); len(w) != 0 {
		t.Fatalf("refused agents persisted: %+v", w)
	}

	// The allocator never saw the refused agents: the first offer comes
	// from the agent that authenticates, and only from it.
	cl, done := runAgentAs(t, c.addr, t.TempDir(), "agent1", "a1")
	id := waitAgentRegistered(t, cl, done)
	select {
	case offers := <-fw.offers:
		for _, o := range offers {
			if o.AgentId != id {
				t.Fatalf("offer on agent %s, want only %s", o.AgentId, id)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no offers")
	}
	st := c.m.State()
	if len(st.Agents) != 1 || st.Agents[0].ID != id || st.Agents[0].Principal != "agent1" {
		t.Fatalf("agents: %+v, want %s with principal agent1", st.Agents, id)
	}
	if w := store.written(); len(w) != 1 || w[id].Principal != "agent1" {
		t.Fatalf("persisted agents: %+v", w)
	}
}

// TestAgentIDKeepsItsPrincipal: an agent ID registered by one principal
// cannot be registered by another, live or after a master restart.
func TestAgentIDKeepsItsPrincipal(t *testing.T) {
	open := storeOpener(t)
	store := open()
	c := agentAuthCluster(t, store, "127.0.0.1:0")
	addr := c.addr
	dir := t.TempDir()
	cl, done, stopOwner := runStoppableAgentAs(t, addr, dir, "agent1", "a1")
	id := waitAgentRegistered(t, cl, done)

	// Live: another principal with the same agent ID.
	_, thief := runAgentAs(t, addr, dir, "agent2", "a2")
	refusedAgent(t, thief, codes.PermissionDenied, `"agent2"`, id, `"agent1"`)
	if st := c.m.State(); len(st.Agents) != 1 || st.Agents[0].Principal != "agent1" || !st.Agents[0].Connected {
		t.Fatalf("agents after the refused takeover: %+v", st.Agents)
	}

	// After a restart the persisted principal decides. The owner is
	// stopped first: running on, it would re-register with the new master
	// before the check that the thief left nothing behind.
	stopOwner()
	c.stop()
	store.Close()
	c2 := agentAuthCluster(t, &recordingStore{Store: open(), agents: map[string]master.PersistedAgent{}}, addr)
	_, thief = runAgentAs(t, addr, dir, "agent2", "a2")
	refusedAgent(t, thief, codes.PermissionDenied, `"agent2"`, id, `"agent1"`)
	if st := c2.m.State(); len(st.Agents) != 0 {
		t.Fatalf("refused agent recorded after restart: %+v", st.Agents)
	}
	cl, done = runAgentAs(t, addr, dir, "agent1", "a1")
	if got := waitAgentRegistered(t, cl, done); got != id {
		t.Fatalf("owner re-registered as %s, want %s", got, id)
	}
	if st := c2.m.State(); len(st.Agents) != 1 || st.Agents[0].Principal != "agent1" {
		t.Fatalf("agents: %+v", st.Agents)
	}
}

// TestAgentAuthenticationWithoutAuthorizerRefusesAll: the master fails
// closed when agent authentication is on but it has no credentials.
func TestAgentAuthenticationWithoutAuthorizerRefusesAll(t *testing.T) {
	c := newClusterServing(t, master.Options{}, transport.Options{AuthenticateAgents: true}, "127.0.0.1:0")
	_, done := runAgentAs(t, c.addr, t.TempDir(), "agent1", "a1")
	refusedAgent(t, done, codes.Unauthenticated, "no credentials")
	if st := c.m.State(); len(st.Agents) != 0 {
		t.Fatalf("agents: %+v", st.Agents)
	}
}

// TestAgentAuthenticationOff: without AuthenticateAgents agents register
// as before, credentials or not, and no principal is recorded.
func TestAgentAuthenticationOff(t *testing.T) {
	c := authCluster(t) // frameworks authenticate, agents do not
	cl, done := runAgentAs(t, c.addr, t.TempDir(), "", "")
	waitAgentRegistered(t, cl, done)
	cl, done = runAgentAs(t, c.addr, t.TempDir(), "nobody", "x")
	waitAgentRegistered(t, cl, done)
	st := c.m.State()
	if len(st.Agents) != 2 {
		t.Fatalf("agents: %+v", st.Agents)
	}
	for _, a := range st.Agents {
		if a.Principal != "" {
			t.Fatalf("agent %s has principal %q without agent authentication", a.ID, a.Principal)
		}
	}
}
