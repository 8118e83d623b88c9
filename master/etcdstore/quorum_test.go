package etcdstore_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/master"
)

// etcdProcs is an etcd cluster of member processes that can be killed
// and started again on their data.
type etcdProcs struct {
	args    []roleArgs
	procs   []*roleProc
	clients []string
}

func startEtcdMembers(t *testing.T, n int) *etcdProcs {
	t.Helper()
	ports := freePorts(t, 2*n)
	var initial []string
	e := &etcdProcs{}
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
		e.clients = append(e.clients, fmt.Sprintf("127.0.0.1:%d", ports[2*i]))
	}
	token := testutil.UniqueName("brim-etcd")
	for i := range n {
		e.args = append(e.args, roleArgs{Name: fmt.Sprintf("m%d", i), Dir: t.TempDir(), Token: token,
			Initial: strings.Join(initial, ","), ClientPort: ports[2*i], PeerPort: ports[2*i+1]})
		e.procs = append(e.procs, startRole(t, fmt.Sprintf("etcd-%d", i), "etcd", e.args[i], 0, 4))
	}
	for _, p := range e.procs {
		if l := p.line(t, 30*time.Second, "ready"); l != "ready" {
			t.Fatalf("%s: %q, want ready", p.name, l)
		}
	}
	return e
}

// kill kills member i (SIGKILL).
func (e *etcdProcs) kill(t *testing.T, i int) {
	t.Helper()
	if err := e.procs[i].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = e.procs[i].cmd.Wait()
}

// restart starts member i again on its data; it is ready once the
// cluster has a quorum.
func (e *etcdProcs) restart(t *testing.T, i int) {
	t.Helper()
	e.procs[i] = startRole(t, fmt.Sprintf("etcd-%d", i), "etcd", e.args[i], 0, 4)
}

// health reads a master's /health: its status and the leader it names.
func health(addr string) (int, string, string, error) {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + addr + "/health")
	if err != nil {
		return 0, "", "", err
	}
	defer func() { _ = resp.Body.Close() }()
	var body map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return resp.StatusCode, "", "", err
	}
	return resp.StatusCode, body["status"], body["leader"], nil
}

// TestQuorumLossNextLeader: etcd loses its quorum (two of three members
// killed) until the leader of three masters steps down (it cannot
// refresh its lease) and exits; its supervisor starts it again at the
// same address, as systemd does, while etcd is still down; then etcd's
// members come back. etcd renews every lease when it elects a leader of
// its own, the dead leader's too, so its key would stay first in line a
// TTL (10 s here) after the quorum's return. The restarted master ends
// that key of its earlier run, and the standbys, whose sessions etcd's
// outage may have ended, campaign again within a second: a new leader
// must come well within the TTL of the quorum's return (TTL/2 here), and
// every standby must name it (BRIM_HA_TTL=N sets the TTL to N s). Before,
// the next leader came a TTL and more after the quorum's return.
func TestQuorumLossNextLeader(t *testing.T) {
	e := startEtcdMembers(t, 3)
	ttl := 10 * time.Second
	if n := envInt(t, "BRIM_HA_TTL", "whole seconds"); n > 0 { // a measurement's (docs/ha.md)
		ttl = time.Duration(n) * time.Second
	}
	c := &etcdCluster{clients: e.clients}
	opts := func(i int) master.Options {
		return master.Options{AllocationInterval: 50 * time.Millisecond, HeartbeatInterval: 200 * time.Millisecond,
			MaxMissedHeartbeats: 25, FailoverTimeout: time.Minute, Log: testutil.FailureLog(t, fmt.Sprintf("master %d", i+1))}
	}
	var ms []*haMaster
	for i := range 3 {
		ms = append(ms, startHAMasterWith(t, c, ttl, "127.0.0.1:0", opts(i)))
	}
	leader := leaderOf(t, ms, 20*time.Second)
	lost := time.Now()
	e.kill(t, 1)
	e.kill(t, 2)
	select {
	case <-leader.stopped:
	case <-time.After(2 * ttl):
		t.Fatalf("the leader still serves %v after etcd lost its quorum", 2*ttl)
	}
	t.Logf("the leader stepped down %v after etcd lost its quorum (TTL %v)", time.Since(lost).Round(time.Millisecond), ttl)
	time.Sleep(2 * time.Second)
	back := time.Now()
	e.restart(t, 1)
	e.restart(t, 2)
	// Its supervisor starts it again, at the same address, once etcd
	// answers (before, it exits at once: no etcd within its dial timeout).
	for _, i := range []int{1, 2} {
		if l := e.procs[i].line(t, 30*time.Second, "ready"); l != "ready" {
			t.Fatalf("etcd-%d: %q, want ready", i, l)
		}
	}
	ms = append(ms, startHAMasterWith(t, c, ttl, leader.addr(), opts(3)))
	var next *haMaster
	for next == nil {
		if time.Since(back) > 3*ttl {
			t.Fatalf("no leader within %v of the quorum's return", 3*ttl)
		}
		for _, m := range ms {
			if m != leader && m.r.Leading() != nil {
				next = m
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	elected := time.Since(back)
	t.Logf("new leader %s %v after etcd's members were started again (TTL %v)", next.addr(), elected.Round(time.Millisecond), ttl)
	if elected > ttl/2 {
		t.Errorf("the next leader came %v after the quorum's return, TTL %v: it waited for a dead session's lease",
			elected.Round(time.Millisecond), ttl)
	}
	for _, m := range ms {
		if m == leader || m == next {
			continue
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, status, named, err := health(m.addr())
			if err == nil && code == http.StatusServiceUnavailable && named == next.addr() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("standby %s /health: %d %q leader %q (%v), want the leader %s", m.addr(), code, status, named, err, next.addr())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Until the end, not just the election: the etcd members are stopped
	// after the masters (cleanups run last-registered first).
	time.Sleep(ttl)
	if next.r.Leading() == nil {
		t.Errorf("the new leader %s lost its leadership within a TTL", next.addr())
	}
}
