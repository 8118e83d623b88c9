package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/brimnode/brim/cli"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/master/server"
)

func TestStoreFlagErrors(t *testing.T) {
	for _, tc := range []haFlags{
		{store: "nope"},
		{store: "bbolt:"},
		{store: "etcd://10.0.0.1:2379"},
		{store: "etcd://10.0.0.1/brim"},
		{store: "etcd://10.0.0.1:2379/brim", sessionTTL: 1500 * time.Millisecond},
		{store: "etcd://10.0.0.1:2379/brim", sessionTTL: 0},
		{store: "bbolt:/tmp/x", advertise: "h:1"},
		{advertise: "h:1"},
	} {
		var ee cli.ExitError
		if err := tc.check(); !errors.As(err, &ee) || ee.Code != 2 {
			t.Errorf("%+v: %v, want exit 2", tc, err)
		}
	}
	for _, ok := range []haFlags{{}, {store: "bbolt:/var/lib/brim/master"}, {store: "etcd://a:2379,b:2379/brim", sessionTTL: 10 * time.Second, advertise: "m1:5050"}} {
		if err := ok.check(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// startTestEtcd runs a one-member etcd in the test process.
func startTestEtcd(t *testing.T) string {
	t.Helper()
	var ports []int
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		_ = l.Close()
	}
	cfg := embed.NewConfig()
	cfg.Name = "m0"
	cfg.Dir = t.TempDir()
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = "m0=" + peer.String()
	cfg.InitialClusterToken = testutil.UniqueName("brim-cmd-etcd")
	cfg.UnsafeNoFsync = true
	cfg.TickMs, cfg.ElectionMs = 20, 200
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{"/dev/null"}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready in 30s")
	}
	return client.Host
}

func health(t *testing.T, addr string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// TestMasterOnEtcd: brim master's flags wire an etcd store: two masters,
// one leads, the other is a standby naming it; when the leader stops
// (it resigns), the standby takes over.
func TestMasterOnEtcd(t *testing.T) {
	etcd := startTestEtcd(t)
	start := func() (net.Addr, context.CancelFunc, func() error) {
		var f masterCommandFlags
		fs := pflag.NewFlagSet("master", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse([]string{"--store", "etcd://" + etcd + "/brim-cmd", "--listen", "127.0.0.1:0", "--session-ttl", "2s"}); err != nil {
			t.Fatal(err)
		}
		if err := f.check(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		_, addr, wait, err := startMaster(ctx, &f.masterFlags, slog.New(slog.DiscardHandler))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		return addr, cancel, wait
	}
	a, stopA, waitA := start()
	waitFor := func(addr string, code int, leader string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			c, body := health(t, addr)
			if c == code && body["leader"] == leader {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s /health: %d %v, want %d leader %q", addr, c, body, code, leader)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor(a.String(), http.StatusOK, "")
	b, stopB, waitB := start()
	defer func() { stopB(); _ = waitB() }()
	waitFor(b.String(), http.StatusServiceUnavailable, a.String())
	// --master etcd://…: the campaigning masters, the leader first.
	// (b campaigns concurrently with serving: poll until its key is there.)
	var discover func(context.Context) ([]string, error)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, d, err := cli.ResolveMasters(context.Background(), "etcd://"+etcd+"/brim-cmd")
		if err == nil && got == a.String()+","+b.String() {
			discover = d
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resolveMasters = %q, %v; want %s,%s", got, err, a, b)
		}
	}
	if discover == nil {
		t.Fatal("resolveMasters of etcd:// returned no discovery to run again")
	}
	if got, d, err := cli.ResolveMasters(context.Background(), "h:1,h:2"); err != nil || got != "h:1,h:2" || d != nil {
		t.Fatalf("resolveMasters of a list = %q, %v (discovery %v)", got, err, d != nil)
	}
	var ee cli.ExitError
	if _, _, err := cli.ResolveMasters(context.Background(), "etcd://"+etcd+"/nobody"); !errors.As(err, &ee) || ee.Code != 1 {
		t.Fatalf("resolveMasters with no master there: %v, want exit 1", err)
	}
	if _, _, err := cli.ResolveMasters(context.Background(), "etcd://"+etcd); !errors.As(err, &ee) || ee.Code != 2 {
		t.Fatalf("resolveMasters without a prefix: %v, want exit 2", err)
	}
	stopA()
	if err := waitA(); err != nil {
		t.Fatalf("the leader stopped with %v", err)
	}
	waitFor(b.String(), http.StatusOK, "")
	// Run again (an agent whose masters all failed), the discovery finds
	// the masters campaigning now: b alone.
	if got, err := discover(context.Background()); err != nil || !slices.Equal(got, []string{b.String()}) {
		t.Fatalf("discovery after the leader left = %v, %v; want [%s]", got, err, b)
	}
}

// TestEndDeadLeaderFlag: --end-dead-leader (default true) decides whether
// the master's standbys end a killed leader's session; false has them
// wait out its TTL.
func TestEndDeadLeaderFlag(t *testing.T) {
	etcd := startTestEtcd(t)
	for _, c := range []struct {
		args    []string
		waitOut bool
	}{{nil, false}, {[]string{"--end-dead-leader=true"}, false}, {[]string{"--end-dead-leader=false"}, true}} {
		var h haFlags
		fs := pflag.NewFlagSet("master", pflag.ContinueOnError)
		h.register(fs)
		if err := fs.Parse(append([]string{"--store", "etcd://" + etcd + "/brim-flag"}, c.args...)); err != nil {
			t.Fatal(err)
		}
		var cfg server.Config
		closeStore, err := h.apply(context.Background(), &cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if err := closeStore(); err != nil {
			t.Error(err)
		}
		if cfg.WaitOutDeadLeader != c.waitOut {
			t.Errorf("%v: WaitOutDeadLeader %v, want %v", c.args, cfg.WaitOutDeadLeader, c.waitOut)
		}
	}
}
