package etcdstore_test

import (
	"bytes"
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
	"github.com/brimnode/brim/scheduler"
)

// TestCutLeaderWithAWriteInFlight: the leader of three masters is cut
// from etcd by a link that forwards nothing and resets nothing (a black
// hole), and an operator's /weights reaches it 0.3 s later: its write to
// etcd hangs (each etcd request here may take 30 s, far past the
// election). The leader must go on serving while the write waits — its
// /state answers at once — and its term must end on time all the same:
// it stops serving (the write refused, the agent's and the framework's
// streams closed) before a standby can be elected, as docs/ha.md says.
// (BRIM_HA_TTL and BRIM_HA_ETCD_TIMEOUT, in whole seconds, change the
// TTL, 8 s, and the etcd requests' timeout, 30 s, to measure.)
// Before, the write held the master's lock until etcd's deadline: /state
// hung, and the streams stayed open until the write gave up, long after
// the next leader was elected.
func TestCutLeaderWithAWriteInFlight(t *testing.T) {
	c := startEtcd(t, 3)
	ttl, etcdTimeout := 8*time.Second, 30*time.Second
	if n := envInt(t, "BRIM_HA_TTL", "whole seconds"); n > 0 { // a measurement's (docs/ha.md)
		ttl = time.Duration(n) * time.Second
	}
	if n := envInt(t, "BRIM_HA_ETCD_TIMEOUT", "whole seconds"); n > 0 {
		etcdTimeout = time.Duration(n) * time.Second
	}
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
	var fwDown atomic.Int64 // first disconnection after the cut (unix ns)
	var cutAt atomic.Int64
	d, err := scheduler.New(scheduler.Options{Master: list, Name: "cut", FailoverTimeout: time.Minute, Log: testutil.FailureLog(t, "framework")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = d.Run(ctx, scheduler.Callbacks{Disconnected: func(context.Context, error, time.Duration) {
			if cutAt.Load() != 0 {
				fwDown.CompareAndSwap(0, time.Now().UnixNano())
			}
		}})
	}()
	waitState(t, leader.r.Leading(), 20*time.Second, "agent and framework at the leader", func(s *master.State) bool {
		return len(s.Agents) == 1 && s.Agents[0].Connected && len(s.Frameworks) == 1 && s.Frameworks[0].Connected
	})

	for !agent.Connected() { // the master's state says so before the agent heard it
		time.Sleep(2 * time.Millisecond)
	}
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
	type answer struct {
		at     time.Time
		status int
		err    error
	}
	weights, state := make(chan answer, 1), make(chan answer, 1)
	hc := &http.Client{Timeout: 2 * etcdTimeout}
	time.Sleep(300 * time.Millisecond)
	go func() { // owned by the test: hc's timeout ends it
		resp, err := hc.Post("http://"+leader.addr()+"/weights", "application/json", bytes.NewBufferString(`[{"role":"x","weight":7}]`))
		a := answer{at: time.Now(), err: err}
		if err == nil {
			a.status = resp.StatusCode
			_ = resp.Body.Close()
		}
		weights <- a
	}()
	time.Sleep(300 * time.Millisecond)
	go func() { // likewise
		resp, err := hc.Get("http://" + leader.addr() + "/state")
		a := answer{at: time.Now(), err: err}
		if err == nil {
			a.status = resp.StatusCode
			_ = resp.Body.Close()
		}
		state <- a
	}()

	var next *haMaster
	var elected time.Time
	for next == nil {
		if time.Since(cut) > 3*ttl {
			t.Fatalf("no standby elected within %v of the cut (TTL %v)", 3*ttl, ttl)
		}
		for _, m := range ms {
			if m != leader && m.r.Leading() != nil {
				next, elected = m, time.Now()
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	// What should come before the election is checked below; wait for
	// it long enough to tell how late it came, if late.
	late := time.After(etcdTimeout)
	var w, s answer
	gotW, gotS := false, false
	for !gotW || !gotS {
		select {
		case w = <-weights:
			gotW = true
		case s = <-state:
			gotS = true
		case <-late:
			t.Fatalf("%v after the election (%v after the cut, TTL %v): /weights answered %v, /state answered %v: the cut leader hangs behind its store",
				etcdTimeout, elected.Sub(cut).Round(time.Millisecond), ttl, gotW, gotS)
		}
	}
	if s.err != nil || s.status != http.StatusOK {
		t.Errorf("/state of the cut leader with a write in flight: %d %v", s.status, s.err)
	}
	if !s.at.Before(w.at) {
		t.Errorf("/state answered %v after the cut, after /weights (%v): it waited for the write",
			s.at.Sub(cut).Round(time.Millisecond), w.at.Sub(cut).Round(time.Millisecond))
	}
	if w.err == nil && w.status == http.StatusOK {
		t.Errorf("/weights through the cut leader: 200, want the write refused")
	}
	if !w.at.Before(elected) {
		t.Errorf("/weights answered %v after the cut, the next leader elected %v after it: the term outlived its write",
			w.at.Sub(cut).Round(time.Millisecond), elected.Sub(cut).Round(time.Millisecond))
	}
	for _, down := range []struct {
		who string
		at  int64
	}{{"agent", agentDown.Load()}, {"framework", fwDown.Load()}} {
		if down.at != 0 && time.Unix(0, down.at).Before(cut) {
			t.Fatalf("the %s's stream ended before the cut", down.who)
		}
		if down.at == 0 || !time.Unix(0, down.at).Before(elected) {
			got := "never"
			if down.at != 0 {
				got = time.Unix(0, down.at).Sub(cut).Round(time.Millisecond).String()
			}
			t.Errorf("the %s's stream with the cut leader ended %s after the cut, the next leader elected %v after it: "+
				"two leaders serving at once", down.who, got, elected.Sub(cut).Round(time.Millisecond))
		}
	}
	nm := next.r.Leading()
	waitState(t, nm, 30*time.Second, "agent and framework at the new leader", func(s *master.State) bool {
		return len(s.Agents) == 1 && s.Agents[0].Connected && len(s.Frameworks) == 1 && s.Frameworks[0].Connected
	})
	t.Logf("cut leader (TTL %v): /state answered %v after the cut, /weights %v (%d), agent's stream closed %v, framework's %v; "+
		"new leader %v; agent and framework there %v after the cut",
		ttl, s.at.Sub(cut).Round(time.Millisecond), w.at.Sub(cut).Round(time.Millisecond), w.status,
		time.Unix(0, agentDown.Load()).Sub(cut).Round(time.Millisecond), time.Unix(0, fwDown.Load()).Sub(cut).Round(time.Millisecond),
		elected.Sub(cut).Round(time.Millisecond), time.Since(cut).Round(time.Millisecond))
}
