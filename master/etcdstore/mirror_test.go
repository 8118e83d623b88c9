package etcdstore_test

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/etcdstore"
)

// TestStandbyLoadsFromItsCopy: a standby keeps a copy of the registry
// while it campaigns; elected, it loads the copy with what changed
// since (records added, changed and deleted while it waited) — the same
// registry the old leader had — and a copy that holds a record deleted
// since is not trusted: the registry is read whole.
func TestStandbyLoadsFromItsCopy(t *testing.T) {
	c := startEtcd(t, 1)
	const ttl = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := open(t, c.clients, "/brim-copy", ttl)
	ta, err := a.Campaign(ctx, "10.0.0.1:5050")
	if err != nil {
		t.Fatal(err)
	}
	s := ta.Store()
	must := func(errs ...error) {
		t.Helper()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	must(s.PutAgent("agent-1", master.PersistedAgent{Hostname: "h1"}),
		s.PutFramework("fw-1", master.PersistedFramework{Roles: []string{"ads"}}),
		s.PutFramework("fw-gone", master.PersistedFramework{Roles: []string{"web"}}),
		s.PutWeights(map[string]float64{"ads": 2}))

	standby := func() (*etcdstore.Client, *testutil.LockedBuffer) {
		log := &testutil.LockedBuffer{}
		b, err := etcdstore.Open(context.Background(), etcdstore.Config{Endpoints: c.clients, Prefix: "/brim-copy", SessionTTL: ttl,
			DialTimeout: 2 * time.Second, RequestTimeout: 2 * time.Second,
			Log: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b, log
	}
	has := func(log *testutil.LockedBuffer, s string) bool { return strings.Contains(log.String(), s) }
	campaign := func(b *etcdstore.Client, log *testutil.LockedBuffer, addr string) <-chan master.Term {
		elected := make(chan master.Term, 1)
		go func() { // ends with ctx or the election
			tb, err := b.Campaign(ctx, addr)
			if err != nil {
				t.Error(err)
			}
			elected <- tb
		}()
		for deadline := time.Now().Add(20 * time.Second); !has(log, "standby's copy of the registry: read"); {
			if time.Now().After(deadline) {
				t.Fatal("the standby did not read its copy of the registry within 20s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		return elected
	}
	// handOver resigns from's term and returns the next leader's.
	handOver := func(from master.Term, elected <-chan master.Term) master.Term {
		t.Helper()
		if err := from.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		next := <-elected
		if next == nil {
			t.FailNow()
		}
		return next
	}
	b, blog := standby()
	elected := campaign(b, blog, "10.0.0.2:5050")

	// While b waits: added, changed, deleted.
	must(s.PutAgent("agent-2", master.PersistedAgent{Hostname: "h2"}),
		s.PutAgent("agent-1", master.PersistedAgent{Hostname: "h1-renamed"}),
		s.DeleteFramework("fw-gone"),
		s.PutWeights(map[string]float64{"ads": 3}))
	want, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	tb := handOver(ta, elected)
	got, err := tb.Store().Load()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(registryText(got), registryText(want)) {
		t.Fatalf("the new leader loads\n%v\nwant\n%v", registryText(got), registryText(want))
	}
	if !has(blog, "registry loaded from the standby's copy") {
		t.Errorf("the new leader did not load from its copy; its log:\n%s", blog.String())
	}

	// A copy that missed a deletion.
	d, dlog := standby()
	td := handOver(tb, campaign(d, dlog, "10.0.0.3:5050"))
	if !etcdstore.AddToCopy(td, "agents/ghost", `{"hostname":"ghost"}`) {
		t.Fatal("the elected standby has no copy of the registry")
	}
	got, err = td.Store().Load()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(registryText(got), registryText(want)) {
		t.Fatalf("from a copy with a record deleted since, the new leader loads\n%v\nwant\n%v", registryText(got), registryText(want))
	}
	if !has(dlog, "out of date: reading it whole") {
		t.Errorf("the copy with a deleted record was not found out of date; the log:\n%s", dlog.String())
	}

	// A record that does not decode, written while a standby waits: its
	// copy keeps the agents' records decoded, and this one fails the
	// load as a whole read fails — it is not dropped.
	e, elog := standby()
	elected = campaign(e, elog, "10.0.0.4:5050")
	raw, err := clientv3.New(clientv3.Config{Endpoints: c.clients, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = raw.Close() }()
	if _, err := raw.Put(ctx, "/brim-copy/registry/agents/broken", "{not json"); err != nil {
		t.Fatal(err)
	}
	te := handOver(td, elected)
	if _, err := te.Store().Load(); err == nil || !strings.Contains(err.Error(), "agents/broken") {
		t.Fatalf("loading a registry with a record that does not decode: %v, want an error naming it", err)
	}
}
