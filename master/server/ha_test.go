package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/brimnode/brim/internal/masteraddr"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/boltstore"
	"github.com/brimnode/brim/master/server"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// fakeElector elects when the test says so and reports the leader the
// test names.
type fakeElector struct {
	terms   chan *fakeTerm
	leaders chan string
	ttl     time.Duration // SessionTTL
}

func (e *fakeElector) SessionTTL() time.Duration { return e.ttl }

func (e *fakeElector) Campaign(ctx context.Context, _ string) (master.Term, error) {
	select {
	case t := <-e.terms:
		return t, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (e *fakeElector) Observe(ctx context.Context) <-chan string {
	out := make(chan string)
	go func() { // ends with ctx
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case l := <-e.leaders:
				select {
				case out <- l:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

type fakeTerm struct {
	store master.Store
	done  chan struct{}
}

func (t *fakeTerm) Store() master.Store          { return t.store }
func (t *fakeTerm) Done() <-chan struct{}        { return t.done }
func (t *fakeTerm) Resign(context.Context) error { return nil }

func getJSON(t *testing.T, c *http.Client, url string) (int, map[string]string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// TestHAStandbyThenLeader: a master with an Elector serves as a standby
// (503 /health naming the leader, 307 for the operator API, NOT_LEADER
// for gRPC; 503 while no leader is known) until elected; then it serves
// with the term's store; when the term ends it stops serving at once
// and Wait returns ErrLostLeadership.
func TestHAStandbyThenLeader(t *testing.T) {
	// The leader etcd names: a loopback address nothing listens on, as a
	// killed master's (the standby tries it when a client says it could
	// not reach it).
	dead := testutil.FreeAddr(t)
	e := &fakeElector{terms: make(chan *fakeTerm), leaders: make(chan string), ttl: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := server.Start(ctx, server.Config{Listen: "127.0.0.1:0", Elector: e,
		Options: master.Options{AllocationInterval: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- r.Wait() }()
	base := "http://" + r.Addr.String()
	if r.Advertise != r.Addr.String() {
		t.Fatalf("advertise %q, want the listener's %s", r.Advertise, r.Addr)
	}
	noFollow := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	if code, body := getJSON(t, noFollow, base+"/health"); code != http.StatusServiceUnavailable || body["status"] != "standby" || body["leader"] != "" {
		t.Fatalf("/health with no leader: %d %v", code, body)
	}
	resp, err := noFollow.Post(base+"/weights", "application/json", bytes.NewBufferString(`[{"role":"a","weight":2}]`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("POST /weights with no leader: %d", resp.StatusCode)
	}

	// While no leader is known a standby holds a stream, and answers it
	// the moment it learns the leader.
	cc, err := grpc.NewClient(r.Addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	held := make(chan error, 1)
	// subscribe subscribes with ctx in the background; held gets its end.
	subscribe := func(ctx context.Context) {
		go func() {
			stream, err := pb.NewSchedulerClient(cc).Subscribe(ctx, &pb.SubscribeRequest{Framework: &pb.FrameworkInfo{Name: "f"}})
			if err == nil {
				_, err = stream.Recv()
			}
			held <- err
		}()
	}
	subscribe(ctx)
	select {
	case err := <-held:
		t.Fatalf("a standby with no leader answered at once: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	e.leaders <- dead
	select {
	case err := <-held:
		if l, ok := masteraddr.Leader(err); !ok || l != dead {
			t.Fatalf("held Subscribe answered %v (leader %q)", err, l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held Subscribe was not answered when the leader became known")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := getJSON(t, noFollow, base+"/health")
		if code == http.StatusServiceUnavailable && body["leader"] == dead {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health: %d %v", code, body)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A client that could not reach the leader named is held until
	// another is named (etcd keeps a dead leader's key until its lease
	// expires).
	subscribe(masteraddr.WithUnreachable(ctx, dead))
	select {
	case err := <-held:
		t.Fatalf("a client that could not reach the named leader was sent back to it: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	e.leaders <- "10.8.8.8:5050"
	select {
	case err := <-held:
		if l, ok := masteraddr.Leader(err); !ok || l != "10.8.8.8:5050" {
			t.Fatalf("held Subscribe answered %v (leader %q), want the new leader", err, l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held Subscribe was not answered when another leader was named")
	}
	// A leader the standby reaches itself (it answers: here it closes
	// the connection; one the kernel accepts for a frozen process is not
	// reached): the client's link broke, not the leader; it is named at
	// once.
	live, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	go func() { // ends when the listener closes
		for {
			c, err := live.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	e.leaders <- live.Addr().String()
	for {
		if _, body := getJSON(t, noFollow, base+"/health"); body["leader"] == live.Addr().String() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the standby did not learn the live leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
	subscribe(masteraddr.WithUnreachable(ctx, live.Addr().String()))
	select {
	case err := <-held:
		if l, ok := masteraddr.Leader(err); !ok || l != live.Addr().String() {
			t.Fatalf("a client that could not reach a live leader: %v (leader %q), want it named", err, l)
		}
	case <-time.After(e.ttl): // held, it is answered after e.ttl*3/2
		t.Fatal("a client that could not reach a leader the standby reaches was held")
	}
	e.leaders <- dead // applied asynchronously: poll
	for {
		code, body := getJSON(t, noFollow, base+"/metrics")
		if code != http.StatusServiceUnavailable {
			t.Fatalf("/metrics on a standby: %d %v", code, body)
		}
		if body["leader"] == dead {
			break
		}
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatalf("/metrics on a standby names %q", body["leader"])
		}
		time.Sleep(5 * time.Millisecond)
	}
	// ...but not past the session TTL and a half: a leader still named
	// then refreshes its lease, so it is alive (a master restarted at
	// its address) and the client goes to it. Before, such a client was
	// held 30 s: an agent's registration timed out at the standby.
	start := time.Now()
	subscribe(masteraddr.WithUnreachable(ctx, dead))
	select {
	case err := <-held:
		if l, ok := masteraddr.Leader(err); !ok || l != dead {
			t.Fatalf("held Subscribe answered %v (leader %q), want the leader named all along", err, l)
		}
		if d := time.Since(start); d < e.ttl*3/2 {
			t.Fatalf("answered %v after it came, before a dead leader's key could expire (%v)", d, e.ttl*3/2)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a client that could not reach a leader named all along was held past the session TTL and a half")
	}
	resp, err = noFollow.Get(base + "/state?x=1")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "http://"+dead+"/state?x=1" {
		t.Fatalf("GET /state on a standby: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	stream, err := pb.NewSchedulerClient(cc).Subscribe(ctx, &pb.SubscribeRequest{Framework: &pb.FrameworkInfo{Name: "f"}})
	if err == nil {
		_, err = stream.Recv()
	}
	if l, ok := masteraddr.Leader(err); !ok || l != dead {
		t.Fatalf("Subscribe on a standby: %v (leader %q)", err, l)
	}
	if r.Leading() != nil {
		t.Fatal("a standby has a Master")
	}

	st, err := boltstore.Open(filepath.Join(t.TempDir(), "master.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	term := &fakeTerm{store: st, done: make(chan struct{})}
	e.terms <- term
	e.leaders <- r.Advertise // etcd now names this master
	for r.Leading() == nil {
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatal("not leading after the election")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, body := getJSON(t, noFollow, base+"/health"); code != http.StatusOK {
		t.Fatalf("leader /health: %d %v", code, body)
	}
	resp, err = noFollow.Post(base+"/weights", "application/json", bytes.NewBufferString(`[{"role":"a","weight":2}]`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /weights on the leader: %d", resp.StatusCode)
	}
	if p, err := st.Load(); err != nil || p.Weights["a"] != 2 {
		t.Fatalf("the term's store holds %v (%v)", p, err)
	}

	close(term.done) // the session ended
	select {
	case err := <-waited:
		if !errors.Is(err, server.ErrLostLeadership) || !errors.Is(err, master.ErrNotLeader) {
			t.Fatalf("Wait: %v, want ErrLostLeadership", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running after the term ended")
	}
	if r.Leading() != nil {
		t.Fatal("a deposed master still has a Master")
	}
}

// TestHAAdvertise: a wildcard listener needs an advertised address.
func TestHAAdvertise(t *testing.T) {
	e := &fakeElector{terms: make(chan *fakeTerm), leaders: make(chan string)}
	_, err := server.Start(context.Background(), server.Config{Listen: "0.0.0.0:0", Elector: e})
	if err == nil {
		t.Fatal("a wildcard listener without Advertise started")
	}
	if _, err := server.Start(context.Background(), server.Config{Listen: "127.0.0.1:0", Elector: e, StateDir: t.TempDir()}); err == nil {
		t.Fatal("an Elector with a state dir started")
	}
}

// TestHAWatchdog: a highly available master feeds systemd's watchdog as a
// standby (its gate answers) and as the leader (its allocation cycles
// run); it used to send no WATCHDOG=1 at all, so WatchdogSec= in its unit
// restarted it every period.
func TestHAWatchdog(t *testing.T) {
	msgs := testutil.NotifySocket(t)
	t.Setenv("WATCHDOG_USEC", "200000")
	e := &fakeElector{terms: make(chan *fakeTerm), leaders: make(chan string)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := server.Start(ctx, server.Config{Listen: "127.0.0.1:0", Elector: e,
		Options: master.Options{AllocationInterval: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- r.Wait() }()
	await := func(prefix string) string {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case m := <-msgs:
				if strings.HasPrefix(m, prefix) {
					return m
				}
			case <-deadline:
				t.Fatalf("no %s from the master", prefix)
			}
		}
	}
	if m := await("READY=1"); !strings.Contains(m, "standby") {
		t.Fatalf("first READY: %q", m)
	}
	for range 3 {
		await("WATCHDOG=1")
	}
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "master.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e.terms <- &fakeTerm{store: st, done: make(chan struct{})}
	if m := await("READY=1"); !strings.Contains(m, "leader on") {
		t.Fatalf("READY after the election: %q", m)
	}
	for range 3 {
		await("WATCHDOG=1")
	}
	cancel()
	if err := <-waited; err != nil {
		t.Fatalf("Wait: %v", err)
	}
}
