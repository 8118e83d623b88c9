package etcdstore_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/master/discovery"
	"github.com/brimnode/brim/master/etcdstore"
	"github.com/brimnode/brim/resources"
)

func mustParse(t *testing.T, s string) resources.Resources {
	t.Helper()
	r, err := resources.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestTermFencing: a leader writes the whole registry; cut from etcd it
// loses its term (Done) and a standby is elected within the session TTL
// and a little; the new leader loads the registry intact, and the
// deposed leader's writes are refused with ErrNotLeader even once it
// reaches etcd again.
func TestTermFencing(t *testing.T) {
	c := startEtcd(t, 3)
	const ttl = 2 * time.Second
	pa := newProxies(t, c)
	a := open(t, pa.addrs(), "/brim-test", ttl)
	b := open(t, c.clients, "/brim-test", ttl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	ta, err := a.Campaign(ctx, "10.0.0.1:5050")
	if err != nil {
		t.Fatal(err)
	}
	s := ta.Store()
	q := allocator.Quota{Guarantee: mustParse(t, "cpus:2"), Limit: mustParse(t, "cpus:4;mem:1024")}
	for _, err := range []error{
		s.PutAgent("agent-1", master.PersistedAgent{Hostname: "h1", Principal: "agents"}),
		s.PutAgent("agent-2", master.PersistedAgent{Hostname: "h2"}),
		s.PutFramework("fw-1", master.PersistedFramework{Roles: []string{"ads"}, Principal: "ops"}),
		s.PutFramework("fw-gone", master.PersistedFramework{Roles: []string{"web"}}),
		s.DeleteFramework("fw-gone"),
		s.PutReservations("agent-1", mustParse(t, "cpus(ads,ops):1;mem(ads,ops):512")),
		s.PutQuota("ads", q),
		s.PutWeights(map[string]float64{"ads": 2, "web": 0.5}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	want, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Agents) != 2 || want.Frameworks["fw-1"].Principal != "ops" || len(want.Frameworks) != 1 ||
		want.Weights["ads"] != 2 || want.Quota["ads"].Limit.String() != q.Limit.String() || want.Reservations["agent-1"].IsEmpty() {
		t.Fatalf("registry as loaded: %+v", want)
	}

	elected, leaders := campaignBehind(ctx, t, b, "10.0.0.2:5050", "10.0.0.1:5050")

	cut := time.Now()
	pa.Cut()
	lost := waitDone(t, ta.Done(), 3*ttl, "the cut leader's term ends")
	var tb master.Term
	select {
	case tb = <-elected:
	case <-time.After(3 * ttl):
		t.Fatalf("no new leader within %v of the cut", 3*ttl)
	}
	t.Logf("cut leader saw its term end after %v; new leader elected %v after the cut (session TTL %v)",
		lost.Round(time.Millisecond), time.Since(cut).Round(time.Millisecond), ttl)
	for l := range leaders {
		if l == "10.0.0.2:5050" {
			break
		}
	}

	got, err := tb.Store().Load()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(registryText(got), registryText(want)) {
		t.Fatalf("the new leader loads\n%v\nwant\n%v", registryText(got), registryText(want))
	}

	pa.Restore()
	// Until its client reconnects a write fails otherwise; never succeeds.
	for deadline := time.Now().Add(20 * time.Second); ; {
		err := s.PutAgent("agent-3", master.PersistedAgent{Hostname: "h3"})
		if errors.Is(err, master.ErrNotLeader) {
			break
		}
		if err == nil || time.Now().After(deadline) {
			t.Fatalf("deposed leader's first write: %v, want ErrNotLeader", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for name, err := range map[string]error{
		"PutAgent":        s.PutAgent("agent-3", master.PersistedAgent{Hostname: "h3"}),
		"PutWeights":      s.PutWeights(map[string]float64{"ads": 9}),
		"DeleteFramework": s.DeleteFramework("fw-1"),
		"PutQuota":        s.PutQuota("ads", allocator.Quota{}),
	} {
		if !errors.Is(err, master.ErrNotLeader) {
			t.Errorf("deposed leader's %s: %v, want ErrNotLeader", name, err)
		}
	}
	if _, err := s.Load(); !errors.Is(err, master.ErrNotLeader) {
		t.Errorf("deposed leader's Load: %v, want ErrNotLeader", err)
	}
	after, err := tb.Store().Load()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(registryText(after), registryText(want)) {
		t.Fatalf("after the deposed leader's writes the registry is\n%v\nwant\n%v", registryText(after), registryText(want))
	}
	if err := tb.Store().PutAgent("agent-3", master.PersistedAgent{Hostname: "h3"}); err != nil {
		t.Fatalf("the new leader's write: %v", err)
	}
}

// campaignBehind has b campaign as addr, behind the leader it must
// observe first; the term comes on elected once b leads. Its leaders
// go on with every change until ctx ends.
func campaignBehind(ctx context.Context, t *testing.T, b *etcdstore.Client, addr, leader string) (elected <-chan master.Term, leaders <-chan string) {
	t.Helper()
	ch := make(chan master.Term, 1)
	go func() { // ends with ctx
		tb, err := b.Campaign(ctx, addr)
		if err != nil {
			t.Error(err)
		}
		ch <- tb
	}()
	leaders = b.Observe(ctx)
	if l := <-leaders; l != leader {
		t.Fatalf("observed leader %q, want %s", l, leader)
	}
	return ch, leaders
}

// registryText is a Persisted in comparable text.
func registryText(p *master.Persisted) map[string]string {
	out := map[string]string{}
	for id, a := range p.Agents {
		out["agent/"+id] = a.Hostname + "|" + a.Principal
	}
	for id, f := range p.Frameworks {
		out["fw/"+id] = f.Principal + "|" + joinRoles(f.Roles)
	}
	for id, r := range p.Reservations {
		out["res/"+id] = r.String()
	}
	for role, q := range p.Quota {
		out["quota/"+role] = q.Guarantee.String() + "|" + q.Limit.String()
	}
	for role, w := range p.Weights {
		out["weight/"+role] = strconv.FormatFloat(w, 'g', -1, 64)
	}
	return out
}

func joinRoles(r []string) string {
	s := ""
	for _, x := range r {
		s += x + ","
	}
	return s
}

// TestDiscover: the campaigning masters' addresses, the leader first.
func TestDiscover(t *testing.T) {
	c := startEtcd(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := discovery.Config{Endpoints: c.clients, Prefix: "/brim-discover"}
	if _, err := discovery.Discover(ctx, cfg); !errors.Is(err, discovery.ErrNoMasters) {
		t.Fatalf("Discover with no master: %v, want ErrNoMasters", err)
	}
	a := open(t, c.clients, "/brim-discover", 2*time.Second)
	b := open(t, c.clients, "/brim-discover", 2*time.Second)
	if _, err := a.Campaign(ctx, "10.0.0.1:5050"); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = b.Campaign(ctx, "10.0.0.2:5050") }() // waits behind a until ctx ends
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := discovery.Discover(ctx, cfg)
		if err == nil && len(got) == 2 {
			if got[0] != "10.0.0.1:5050" || got[1] != "10.0.0.2:5050" {
				t.Fatalf("Discover = %v, want the leader first", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Discover = %v, %v", got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEndLeader: a standby ends the session of the leader at an address
// (a master whose process it found gone): only that leader's, the next
// master is elected at once — long before the session TTL —, and the
// ended leader, still running here, steps down at its next refresh,
// every write of its refused.
func TestEndLeader(t *testing.T) {
	c := startEtcd(t, 3)
	const ttl = 30 * time.Second // nothing here may wait it out
	a := open(t, c.clients, "/brim-end", ttl)
	b := open(t, c.clients, "/brim-end", ttl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ta, err := a.Campaign(ctx, "10.0.0.1:5050")
	if err != nil {
		t.Fatal(err)
	}
	elected, _ := campaignBehind(ctx, t, b, "10.0.0.2:5050", "10.0.0.1:5050")
	for _, addr := range []string{"10.0.0.9:5050", "10.0.0.2:5050"} {
		if ended, err := b.EndLeader(ctx, addr); err != nil || ended {
			t.Fatalf("EndLeader(%s), not the leader: %v, %v; want false, nil", addr, ended, err)
		}
	}
	select {
	case <-ta.Done():
		t.Fatal("the leader's term ended though no call named it")
	case <-time.After(500 * time.Millisecond):
	}

	start := time.Now()
	if ended, err := b.EndLeader(ctx, "10.0.0.1:5050"); err != nil || !ended {
		t.Fatalf("EndLeader of the leader: %v, %v; want true, nil", ended, err)
	}
	var tb master.Term
	select {
	case tb = <-elected:
	case <-time.After(ttl / 3):
		t.Fatalf("no new leader within %v of the leader's session ended (TTL %v)", ttl/3, ttl)
	}
	lost := waitDone(t, ta.Done(), ttl/3, "the ended leader's term ends")
	t.Logf("new leader %v after EndLeader; the ended leader stepped down after %v (TTL %v)",
		time.Since(start).Round(time.Millisecond), lost.Round(time.Millisecond), ttl)
	if err := ta.Store().PutWeights(map[string]float64{"ads": 9}); !errors.Is(err, master.ErrNotLeader) {
		t.Errorf("the ended leader's write: %v, want ErrNotLeader", err)
	}
	if err := tb.Store().PutWeights(map[string]float64{"ads": 2}); err != nil {
		t.Errorf("the new leader's write: %v", err)
	}
	if ended, err := b.EndLeader(ctx, "10.0.0.1:5050"); err != nil || ended {
		t.Errorf("EndLeader of a leader already ended: %v, %v; want false, nil", ended, err)
	}
}

// TestDiscoverLiveFirst: two masters campaign, and the first, the
// leader, is cut from etcd as if its process had died: its key stays
// (first in line: still the election's leader for etcd) until its lease
// runs out. Once it has missed its refreshes Discover must list the
// live master first, before that key expires. Before, the dead leader
// came first until then, and a client tried it first.
func TestDiscoverLiveFirst(t *testing.T) {
	c := startEtcd(t, 1)
	const ttl = 4 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := discovery.Config{Endpoints: c.clients, Prefix: "/brim-live"}
	ps := newProxies(t, c)
	dead := open(t, ps.addrs(), "/brim-live", ttl)
	live := open(t, c.clients, "/brim-live", ttl)
	if _, err := dead.Campaign(ctx, "10.0.0.1:5050"); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = live.Campaign(ctx, "10.0.0.2:5050") }() // waits behind the first until ctx ends
	discover := func() []string {
		t.Helper()
		got, err := discovery.Discover(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for deadline := time.Now().Add(10 * time.Second); len(discover()) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second master never showed in Discover")
		}
	}
	ps.Cut()
	cut := time.Now()
	for {
		got := discover()
		if len(got) < 2 {
			t.Fatalf("%v after the first master was cut (TTL %v) its key expired, and Discover never listed the live one first", time.Since(cut).Round(time.Millisecond), ttl)
		}
		if got[0] == "10.0.0.2:5050" && got[1] == "10.0.0.1:5050" {
			t.Logf("the live master listed first %v after the leader was cut (TTL %v)", time.Since(cut).Round(time.Millisecond), ttl)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
