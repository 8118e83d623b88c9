package etcdstore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/master/etcdstore"
)

// etcdCluster is an in-process etcd cluster for tests: fsync off, short
// raft ticks, so that a 3-member cluster starts in about a second.
type etcdCluster struct {
	members []*embed.Etcd
	clients []string // client addresses, HOST:PORT
}

// freePorts reserves n loopback ports (listen on :0, then close: etcd
// takes URLs, not listeners).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

func startEtcd(t testing.TB, n int) *etcdCluster {
	t.Helper()
	return startEtcdWith(t, n, 20, 200)
}

// startEtcdWith starts n members with the given raft tick and election
// timeout (ms). Short ones start a cluster fast; under heavy load in the
// same process they make etcd change its leader, which renews every
// lease (a dead master's too) and delays a failover by up to a TTL.
func startEtcdWith(t testing.TB, n int, tickMs, electionMs uint) *etcdCluster {
	t.Helper()
	ports := freePorts(t, 2*n)
	mkURL := func(p int) url.URL { return url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", p)} }
	var initial []string
	for i := range n {
		u := mkURL(ports[2*i+1])
		initial = append(initial, fmt.Sprintf("m%d=%s", i, u.String()))
	}
	c := &etcdCluster{}
	token := testutil.UniqueName("brim-etcd")
	for i := range n {
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("m%d", i)
		cfg.Dir = t.TempDir()
		cfg.ListenClientUrls = []url.URL{mkURL(ports[2*i])}
		cfg.AdvertiseClientUrls = cfg.ListenClientUrls
		cfg.ListenPeerUrls = []url.URL{mkURL(ports[2*i+1])}
		cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = token
		cfg.UnsafeNoFsync = true
		cfg.TickMs, cfg.ElectionMs = tickMs, electionMs
		cfg.LogLevel = "error"
		cfg.LogOutputs = []string{"/dev/null"}
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			c.close()
			t.Fatalf("start etcd member %d: %v", i, err)
		}
		c.members = append(c.members, e)
		c.clients = append(c.clients, cfg.ListenClientUrls[0].Host)
	}
	t.Cleanup(c.close)
	for i, e := range c.members {
		select {
		case <-e.Server.ReadyNotify():
		case err := <-e.Err():
			t.Fatalf("etcd member %d: %v", i, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("etcd member %d not ready in 30s", i)
		}
	}
	return c
}

func (c *etcdCluster) close() {
	for _, e := range c.members {
		e.Close()
	}
	c.members = nil
}

// proxy forwards loopback connections to one address until Cut, which
// closes them all and makes new ones fail at once, or BlackHole, which
// keeps every connection open but forwards nothing (nor dials anything
// new) — a link whose packets vanish, no reset ever coming — until
// Restore.
type proxy struct {
	l      net.Listener
	target string

	mu       sync.Mutex
	cut      bool
	hole     bool          // BlackHole: forward nothing
	restored chan struct{} // closed by Restore (and close) while hole
	closed   bool
	conns    map[net.Conn]bool
	wg       sync.WaitGroup
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target, conns: map[net.Conn]bool{}, restored: make(chan struct{})}
	p.wg.Add(1)
	go p.accept() // owned by p: ends with close
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.holeWait()
		p.mu.Lock()
		if p.cut || p.closed {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.wg.Add(2)
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			_, _ = io.Copy(holeWriter{p: p, w: dst}, src)
			_ = dst.Close()
			_ = src.Close()
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

// Cut drops every connection and refuses new ones.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// BlackHole stops forwarding, in both directions, without closing
// anything: what is read is held until Restore; new connections are
// accepted and left unanswered.
func (p *proxy) BlackHole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hole = true
}

// Restore lets connections through again.
func (p *proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	if p.hole {
		p.hole = false
		close(p.restored)
		p.restored = make(chan struct{})
	}
}

// holeWait waits while the proxy is a black hole (until Restore or
// close).
func (p *proxy) holeWait() {
	p.mu.Lock()
	hole, restored := p.hole && !p.closed, p.restored
	p.mu.Unlock()
	if hole {
		<-restored
	}
}

// holeWriter writes to w once the proxy forwards (holeWait).
type holeWriter struct {
	p *proxy
	w io.Writer
}

func (h holeWriter) Write(b []byte) (int, error) {
	h.p.holeWait()
	return h.w.Write(b)
}

func (p *proxy) close() {
	_ = p.l.Close()
	p.mu.Lock()
	p.closed = true
	if p.hole {
		p.hole = false
		close(p.restored)
	}
	p.mu.Unlock()
	p.Cut()
	p.wg.Wait()
}

// proxies is one proxy per etcd member: a master's whole path to etcd.
type proxies []*proxy

func newProxies(t testing.TB, c *etcdCluster) proxies {
	var ps proxies
	for _, a := range c.clients {
		ps = append(ps, newProxy(t, a))
	}
	return ps
}

func (ps proxies) addrs() []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.addr())
	}
	return out
}

func (ps proxies) Cut() {
	for _, p := range ps {
		p.Cut()
	}
}

func (ps proxies) BlackHole() {
	for _, p := range ps {
		p.BlackHole()
	}
}

func (ps proxies) Restore() {
	for _, p := range ps {
		p.Restore()
	}
}

// open connects to etcd at endpoints under prefix with a short session.
func open(t testing.TB, endpoints []string, prefix string, ttl time.Duration) *etcdstore.Client {
	t.Helper()
	return openLogged(t, endpoints, prefix, ttl, 2*time.Second, nil)
}

// openLogged is open with requestTimeout for each etcd request, logging
// to log (nil: nowhere).
func openLogged(t testing.TB, endpoints []string, prefix string, ttl, requestTimeout time.Duration, log *slog.Logger) *etcdstore.Client {
	t.Helper()
	c, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: endpoints, Prefix: prefix, SessionTTL: ttl,
		DialTimeout: 2 * time.Second, RequestTimeout: requestTimeout, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitDone waits for ch to close within d.
func waitDone(t *testing.T, ch <-chan struct{}, d time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-ch:
		return time.Since(start)
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
		return 0
	}
}
