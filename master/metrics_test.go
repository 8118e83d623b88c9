package master

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/buildinfo"
)

// denyAll refuses every operator request.
type denyAll struct{}

func (denyAll) Authenticate(*http.Request) (string, error) {
	return "", fmt.Errorf("no credentials: %w", ErrUnauthenticated)
}
func (denyAll) AuthenticateSecret(string, string) error { return ErrUnauthenticated }
func (denyAll) Authorize(string, string, string) error  { return ErrForbidden }

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
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := m.HTTPHandler(denyAll{})
	if code, body := get(t, h, "/health"); code != http.StatusServiceUnavailable || !strings.Contains(body, "starting") {
		t.Errorf("/health before ready: %d %s", code, body)
	}
	m.SetReady(true)
	if code, body := get(t, h, "/health"); code != http.StatusOK || !strings.Contains(body, "ready") {
		t.Errorf("/health when ready: %d %s", code, body)
	}
	code, body := get(t, h, "/version")
	var in buildinfo.Info
	if code != http.StatusOK || json.Unmarshal([]byte(body), &in) != nil || in != buildinfo.Get() {
		t.Errorf("/version: %d %s", code, body)
	}
	m.allocate()
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
		"brim_master_allocation_cycle_seconds_count 1",
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
type memStore struct{ Store }

func (memStore) Load() (*Persisted, error)           { return &Persisted{}, nil }
func (memStore) PutWeights(map[string]float64) error { return nil }

// Every store's writes are timed, not only bbolt's: the etcd store's
// were missing from brim_master_store_write_seconds.
func TestStoreWritesTimedWhateverTheStore(t *testing.T) {
	m, err := New(Options{Store: memStore{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetWeights(map[string]float64{"a": 2}); err != nil {
		t.Fatal(err)
	}
	_, body := get(t, m.HTTPHandler(denyAll{}), "/metrics")
	if !strings.Contains(body, "brim_master_store_write_seconds_count 1\n") {
		t.Errorf("/metrics after one write to a non-bbolt store lacks brim_master_store_write_seconds_count 1:\n%s", body)
	}
}
