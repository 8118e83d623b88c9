package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/buildinfo"
	"github.com/brimnode/brim/master"
)

// denyAll refuses every operator request.
type denyAll struct{}

func (denyAll) Authenticate(*http.Request) (string, error) {
	return "", fmt.Errorf("no credentials: %w", master.ErrUnauthenticated)
}
func (denyAll) AuthenticateSecret(string, string) error { return master.ErrUnauthenticated }
func (denyAll) Authorize(string, string, string) error  { return master.ErrForbidden }

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b)
}

// /health is 503 until the master is ready, /version is the build's, and
// /metrics has the allocation, offer, launch, store and auth series.
func TestServiceEndpoints(t *testing.T) {
	m, err := master.New(master.Options{AllocationInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a := New(m, Options{Auth: denyAll{}})
	h := a.Handler()
	if code, body := get(t, h, "/health"); code != http.StatusServiceUnavailable || !strings.Contains(body, "starting") {
		t.Errorf("/health before ready: %d %s", code, body)
	}
	a.SetReady(true)
	if code, body := get(t, h, "/health"); code != http.StatusOK || !strings.Contains(body, "ready") {
		t.Errorf("/health when ready: %d %s", code, body)
	}
	code, body := get(t, h, "/version")
	var in buildinfo.Info
	if code != http.StatusOK || json.Unmarshal([]byte(body), &in) != nil || in != buildinfo.Get() {
		t.Errorf("/version: %d %s", code, body)
	}
	cycles := runCycles(t, m)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/weights", strings.NewReader(`{"a": 2}`)))
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("POST /weights without credentials: %d", rec.Code)
	}
	code, body = get(t, h, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		fmt.Sprintf("brim_master_allocation_cycle_seconds_count %d", cycles),
		`brim_master_offers_total{event="made"} 0`,
		"brim_master_task_launches_total 0",
		"brim_master_agents_connected 0",
		"brim_master_frameworks_connected 0",
		`brim_master_auth_failures_total{kind="unauthenticated",transport="http"} 1`,
		"brim_master_store_write_seconds_count 0",
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// memStore is a Store that is neither bbolt nor etcd (as a test's or a
// future backend's).
type memStore struct{ master.Store }

func (memStore) Load() (*master.Persisted, error)    { return &master.Persisted{}, nil }
func (memStore) PutWeights(map[string]float64) error { return nil }

// Every store's writes are timed, not only bbolt's: the etcd store's
// were missing from brim_master_store_write_seconds.
func TestStoreWritesTimedWhateverTheStore(t *testing.T) {
	m, err := master.New(master.Options{Store: memStore{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetWeights(map[string]float64{"a": 2}); err != nil {
		t.Fatal(err)
	}
	_, body := get(t, New(m, Options{Auth: denyAll{}}).Handler(), "/metrics")
	if !strings.Contains(body, "brim_master_store_write_seconds_count 1\n") {
		t.Errorf("/metrics after one write to a non-bbolt store lacks brim_master_store_write_seconds_count 1:\n%s", body)
	}
}

// runCycles runs m's loop until it made an allocation cycle, stops it and
// returns how many it made.
func runCycles(t *testing.T, m *master.Master) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); m.Metrics().Cycles.Count == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatal("no allocation cycle within 10 s")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return int(m.Metrics().Cycles.Count)
}
