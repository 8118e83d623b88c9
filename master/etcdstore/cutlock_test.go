package etcdstore_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/scheduler"
)

// TestCutLeaderWithADomainWriteInFlight: as TestCutLeaderWithAWriteInFlight,
// with the write one the domain makes itself rather than an operator's:
// a framework subscribing (its record) or an ACCEPT reserving resources
// (the agent's reservations) reaches the leader 0.3 s after it was cut
// from etcd. The write hangs until the term ends; meanwhile the leader
// must answer /state and /metrics, and it must close its agent's and
// framework's streams before the next leader is elected. Before, both
// writes were made under the master's lock: /state and /metrics waited
// for the term's end to cancel the write (issue 30).
func TestCutLeaderWithADomainWriteInFlight(t *testing.T) {
	for _, write := range []string{"subscribe", "accept"} {
		t.Run(write, func(t *testing.T) { cutLeaderWithDomainWrite(t, write) })
	}
}

func cutLeaderWithDomainWrite(t *testing.T, write string) {
	c := startEtcd(t, 3)
	ttl, etcdTimeout := 8*time.Second, 30*time.Second
	opts := func(name string) master.Options {
		return master.Options{AllocationInterval: 50 * time.Millisecond, HeartbeatInterval: 200 * time.Millisecond,
			MaxMissedHeartbeats: 25, FailoverTimeout: time.Minute, Log: testutil.FailureLog(t, name)}
	}
	var ms []*haMaster
	for i := range 3 {
		ms = append(ms, startHAMasterTimeout(t, c, ttl, etcdTimeout, "127.0.0.1:0", opts("master "+string(rune('1'+i)))))
	}
	leader := leaderOf(t, ms, 20*time.Second)
	list := strings.Join([]string{ms[0].addr(), ms[1].addr(), ms[2].addr()}, ",")

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	runner := &haRunner{tasks: map[string]*masterlink.TaskSnapshot{}}
	agent, err := masterlink.New(masterlink.Options{Master: list, StateDir: t.TempDir(), Hostname: "h1", Runner: runner,
		Resources: mustParse(t, "cpus:4;mem:4096"), ReconnectMin: 50 * time.Millisecond, ReconnectMax: 500 * time.Millisecond,
		Log: testutil.FailureLog(t, "agent")})
	if err != nil {
		t.Fatal(err)
	}
	runner.client = agent
	wg.Add(1)
	go func() { defer wg.Done(); _ = agent.Run(ctx) }()
	var cutAt, fwDown atomic.Int64
	offers := make(chan []*pb.Offer, 16)
	d, err := scheduler.New(scheduler.Options{Master: list, Name: "cut", Roles: []string{"ops"}, FailoverTimeout: time.Minute,
		Log: testutil.FailureLog(t, "framework")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = d.Run(ctx, scheduler.Callbacks{
			Offers: func(_ context.Context, os []*pb.Offer) {
				select {
				case offers <- os:
				default:
				}
			},
			Disconnected: func(context.Context, error, time.Duration) {
				if cutAt.Load() != 0 {
					fwDown.CompareAndSwap(0, time.Now().UnixNano())
				}
			}})
	}()
	waitState(t, leader.r.Leading(), 20*time.Second, "agent and framework at the leader", func(s *master.State) bool {
		return len(s.Agents) == 1 && s.Agents[0].Connected && len(s.Frameworks) == 1 && s.Frameworks[0].Connected
	})
	var offer *pb.Offer
	select {
	case os := <-offers:
		offer = os[0]
	case <-time.After(20 * time.Second):
		t.Fatal("no offer from the leader")
	}
	for !agent.Connected() {
		time.Sleep(2 * time.Millisecond)
	}
	leader.elector.mu.Lock()
	term := leader.elector.terms[len(leader.elector.terms)-1]
	leader.elector.mu.Unlock()
	var termEnd atomic.Int64
	wg.Add(1)
	go func() { // the term's end, as the leader sees it
		defer wg.Done()
		select {
		case <-term.Done():
			termEnd.Store(time.Now().UnixNano())
		case <-ctx.Done():
		}
	}()
	var agentDown atomic.Int64
	wg.Add(1)
	go func() { // the agent's stream to the cut leader ends
		defer wg.Done()
		for ctx.Err() == nil && agent.Connected() {
			time.Sleep(2 * time.Millisecond)
		}
		agentDown.Store(time.Now().UnixNano())
	}()

	cut := time.Now()
	cutAt.Store(cut.UnixNano())
	leader.etcd.BlackHole()
	t.Cleanup(leader.etcd.Restore)
	time.Sleep(300 * time.Millisecond)
	switch write {
	case "subscribe": // a new framework's record, at the cut leader alone
		d2, err := scheduler.New(scheduler.Options{Master: leader.addr(), Name: "late", FailoverTimeout: time.Minute,
			Log: testutil.FailureLog(t, "late framework")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d2.Close() })
		wg.Add(1)
		go func() { defer wg.Done(); _ = d2.Run(ctx, scheduler.Callbacks{}) }()
	case "accept": // the agent's reservations
		wg.Add(1)
		go func() {
			defer wg.Done()
			op := &pb.Operation{Op: &pb.Operation_Reserve_{Reserve: &pb.Operation_Reserve{Resources: "cpus(ops,cut):1"}}}
			_ = d.Accept(ctx, []string{offer.Id}, []*pb.Operation{op}, 0)
		}()
	}
	time.Sleep(300 * time.Millisecond)
	type answer struct {
		what   string
		at     time.Time
		status int
		err    error
	}
	answers := make(chan answer, 2)
	hc := &http.Client{Timeout: 2 * etcdTimeout}
	for _, path := range []string{"/state", "/metrics"} {
		wg.Add(1)
		go func() { // hc's timeout ends it
			defer wg.Done()
			resp, err := hc.Get("http://" + leader.addr() + path)
			a := answer{what: path, at: time.Now(), err: err}
			if err == nil {
				a.status = resp.StatusCode
				_ = resp.Body.Close()
			}
			answers <- a
		}()
	}

	var elected time.Time
	for elected.IsZero() {
		if time.Since(cut) > 3*ttl {
			t.Fatalf("no standby elected within %v of the cut (TTL %v)", 3*ttl, ttl)
		}
		for _, m := range ms {
			if m != leader && m.r.Leading() != nil {
				elected = time.Now()
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	ended := time.Unix(0, termEnd.Load())
	if termEnd.Load() == 0 {
		t.Fatalf("the cut leader's term did not end before the next leader was elected")
	}
	late := time.After(etcdTimeout)
	answered := map[string]time.Duration{}
	for range 2 {
		var a answer
		select {
		case a = <-answers:
		case <-late:
			t.Fatalf("%v after the election, /state or /metrics of the cut leader has not answered: it hangs behind its store", etcdTimeout)
		}
		answered[a.what] = a.at.Sub(cut).Round(time.Millisecond)
		if a.err != nil || a.status != http.StatusOK {
			t.Errorf("%s of the cut leader with a %s write in flight: %d %v", a.what, write, a.status, a.err)
		}
		if !a.at.Before(ended) {
			t.Errorf("%s answered %v after the cut, after the term ended (%v): it waited for the %s's write",
				a.what, a.at.Sub(cut).Round(time.Millisecond), ended.Sub(cut).Round(time.Millisecond), write)
		}
	}
	for _, down := range []struct {
		who string
		at  int64
	}{{"agent", agentDown.Load()}, {"framework", fwDown.Load()}} {
		if down.at == 0 || !time.Unix(0, down.at).Before(elected) {
			got := "never"
			if down.at != 0 {
				got = time.Unix(0, down.at).Sub(cut).Round(time.Millisecond).String()
			}
			t.Errorf("the %s's stream with the cut leader ended %s after the cut, the next leader elected %v after it: "+
				"two leaders serving at once", down.who, got, elected.Sub(cut).Round(time.Millisecond))
		}
	}
	t.Logf("cut leader (TTL %v) with the %s's write: /state answered %v after the cut, /metrics %v; term ended %v, agent's stream closed %v, framework's %v, next leader %v",
		ttl, write, answered["/state"], answered["/metrics"], ended.Sub(cut).Round(time.Millisecond), time.Unix(0, agentDown.Load()).Sub(cut).Round(time.Millisecond),
		time.Unix(0, fwDown.Load()).Sub(cut).Round(time.Millisecond), elected.Sub(cut).Round(time.Millisecond))
}
