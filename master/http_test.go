package master_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/master/boltstore"
	"github.com/brimnode/brim/master/transport"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc/codes"
)

// operatorAPI serves c's operator API without authentication.
func operatorAPI(t *testing.T, c *cluster) func(method, path, body string) (int, string, http.Header) {
	t.Helper()
	srv := httptest.NewServer(httpHandler(c.api, nil))
	t.Cleanup(srv.Close)
	return func(method, path, body string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 400 {
			var out map[string]string
			if err := json.Unmarshal(b, &out); err != nil || out["error"] == "" {
				t.Errorf("%s %s: %d answered %q, want a JSON error", method, path, resp.StatusCode, b)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s %s: %d with Content-Type %q", method, path, resp.StatusCode, ct)
			}
			return resp.StatusCode, out["error"], resp.Header
		}
		return resp.StatusCode, string(b), resp.Header
	}
}

// A request that is refused leaves nothing applied: not the roles before
// the one that failed, not the weights before the bad one.
func TestOperatorRequestsAllOrNothing(t *testing.T) {
	c := newCluster(t, master.Options{})
	c.startAgent(t.TempDir(), newFakeRunner())
	agentID := waitAgents(t, c.m, 1)[0].ID
	do := operatorAPI(t, c)
	reserve := func(path, res string) (int, string) {
		code, msg, _ := do(http.MethodPost, path, `{"agentId":"`+agentID+`","resources":"`+res+`"}`)
		return code, msg
	}
	reserved := func() resources.Resources { return resources.MustParse(c.m.State().Agents[0].Reserved) }

	if code, msg := reserve("/reserve", "cpus(ads):1;cpus(web):100"); code != http.StatusConflict {
		t.Fatalf("reserve beyond the agent: %d %s, want 409", code, msg)
	}
	if r := reserved(); !r.IsEmpty() {
		t.Fatalf("a refused /reserve left %s reserved", r)
	}
	// The allocator kept nothing either: the whole agent can be reserved.
	if code, msg := reserve("/reserve", "cpus(ads):3;cpus(web):1"); code != http.StatusOK {
		t.Fatalf("reserve the whole agent after a refused request: %d %s", code, msg)
	}
	if code, msg := reserve("/unreserve", "cpus(ads,anonymous):3;cpus(web,anonymous):2"); code != http.StatusConflict {
		t.Fatalf("unreserve more than reserved: %d %s, want 409", code, msg)
	}
	if r, want := reserved(), resources.MustParse("cpus(ads,anonymous):3;cpus(web,anonymous):1"); !r.Equal(want) {
		t.Fatalf("a refused /unreserve left %s reserved, want %s", r, want)
	}

	for _, body := range []string{
		`[{"role":"a","weight":2},{"role":"*","weight":3}]`,
		`[{"role":"a","weight":2},{"role":"b c","weight":3}]`,
		`[{"role":"a","weight":2},{"role":"b","weight":0}]`,
		`[{"role":"a","weight":1e308}]`, // beyond MaxWeight: every share compared as 0
		`[{"role":"a","weight":1e-320}]`,
	} {
		if code, msg, _ := do(http.MethodPost, "/weights", body); code != http.StatusBadRequest {
			t.Errorf("weights %s: %d %s, want 400", body, code, msg)
		} else if strings.Contains(body, `":1e`) && !strings.Contains(msg, "want a number from 1e-06 to 1e+06") {
			t.Errorf("weights %s: %q does not name the range", body, msg)
		}
		if w := c.m.State().Weights; len(w) != 0 {
			t.Fatalf("weights %s refused but %v applied", body, w)
		}
	}
	if code, msg, _ := do(http.MethodPost, "/weights", `[{"role":"a","weight":2},{"role":"b","weight":3}]`); code != http.StatusOK {
		t.Fatalf("weights: %d %s", code, msg)
	}
	if w := c.m.State().Weights; w["a"] != 2 || w["b"] != 3 {
		t.Fatalf("weights %v", w)
	}
}

// failingStore is a bbolt Store whose operator writes fail.
type failingStore struct{ *boltstore.Store }

var errDiskFull = errors.New("disk full")

func (failingStore) PutQuota(string, allocator.Quota) error            { return errDiskFull }
func (failingStore) PutWeights(map[string]float64) error               { return errDiskFull }
func (failingStore) PutReservations(string, resources.Resources) error { return errDiskFull }

// A change the store cannot record is answered 500 and not applied: it
// would vanish at the next restart.
func TestOperatorChangeNotSavedNotApplied(t *testing.T) {
	c := newCluster(t, master.Options{Store: failingStore{storeOpener(t)()}})
	c.startAgent(t.TempDir(), newFakeRunner())
	agentID := waitAgents(t, c.m, 1)[0].ID
	do := operatorAPI(t, c)
	for _, r := range []struct{ path, body string }{
		{"/quota", `{"role":"ads","guarantee":"cpus:1","limit":"cpus:2"}`},
		{"/weights", `[{"role":"ads","weight":2}]`},
		{"/reserve", `{"agentId":"` + agentID + `","resources":"cpus(ads):1"}`},
	} {
		code, msg, _ := do(http.MethodPost, r.path, r.body)
		if code != http.StatusInternalServerError || !strings.Contains(msg, "disk full") {
			t.Errorf("%s with a failing store: %d %q, want 500 naming the store's error", r.path, code, msg)
		}
	}
	st := c.m.State()
	if len(st.Quota) != 0 || len(st.Weights) != 0 || st.Agents[0].Reserved != "" {
		t.Fatalf("unsaved changes applied: quota %v, weights %v, reserved %q", st.Quota, st.Weights, st.Agents[0].Reserved)
	}
	for _, r := range st.Roles {
		if r.Role == "ads" && r.Weight != 1 {
			t.Fatalf("allocator weight of ads %v after an unsaved change", r.Weight)
		}
	}
}

func TestValidateRole(t *testing.T) {
	for _, role := range []string{"ads", "a.b", "a-b", "a_b", "web2", "team.ads-prod", "default"} {
		if err := master.ValidateRole(role); err != nil {
			t.Errorf("%q: %v", role, err)
		}
	}
	for _, role := range []string{"", "*", ".", "..", "../x", "a/b", "a b", "a\tb", "-a", "a*", "a(b", "a,b", "a;b", "a:b", "a{b", "a]b", "é", "a\x7f"} {
		if err := master.ValidateRole(role); !errors.Is(err, master.ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", role, err)
		}
	}
}

// Every way a role enters the master goes through ValidateRole.
func TestRolesValidatedEverywhere(t *testing.T) {
	c := newCluster(t, master.Options{})
	c.startAgent(t.TempDir(), newFakeRunner())
	agentID := waitAgents(t, c.m, 1)[0].ID
	do := operatorAPI(t, c)
	for _, r := range []struct{ path, body string }{
		{"/quota", `{"role":"a b","limit":"cpus:1"}`},
		{"/quota", `{"role":"..","limit":"cpus:1"}`},
		{"/quota", `{"role":"../x","limit":"cpus:1"}`},
		{"/quota", `{"role":"*","limit":"cpus:1"}`},
		{"/weights", `[{"role":"a b","weight":2}]`},
		{"/weights", `[{"role":"..","weight":2}]`},
		{"/weights", `[{"role":"-x","weight":2}]`},
		{"/reserve", `{"agentId":"` + agentID + `","resources":"cpus(..):1"}`},
	} {
		if code, msg, _ := do(http.MethodPost, r.path, r.body); code != http.StatusBadRequest {
			t.Errorf("%s %s: %d %s, want 400", r.path, r.body, code, msg)
		}
	}
	if st := c.m.State(); len(st.Quota) != 0 || len(st.Weights) != 0 || len(st.Roles) != 0 {
		t.Fatalf("invalid roles recorded: quota %v weights %v roles %v", st.Quota, st.Weights, st.Roles)
	}
	if err := c.m.SetQuota("a b", quota("", "cpus:1")); !errors.Is(err, master.ErrInvalid) {
		t.Errorf("SetQuota(\"a b\"): %v", err)
	}
	if err := c.m.SetWeight("../x", 2); !errors.Is(err, master.ErrInvalid) {
		t.Errorf("SetWeight(\"../x\"): %v", err)
	}
}

func TestOperatorHTTPErrors(t *testing.T) {
	c := newCluster(t, master.Options{})
	do := operatorAPI(t, c)
	big := `{"role":"ads","guarantee":"` + strings.Repeat(" ", transport.MaxBodyBytes) + `"}`
	if code, msg, _ := do(http.MethodPost, "/quota", big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("body over 1 MiB: %d %s, want 413", code, msg)
	}
	code, msg, _ := do(http.MethodPost, "/quota", `{"role":"ads","guarantee":"cpus:1","limt":"cpus:2"}`)
	if code != http.StatusBadRequest || !strings.Contains(msg, `"limt"`) {
		t.Errorf("unknown field: %d %q, want 400 naming \"limt\"", code, msg)
	}
	if code, msg, _ := do(http.MethodPost, "/weights", `[{"role":"a","weight":2}] x`); code != http.StatusBadRequest {
		t.Errorf("data after the body: %d %s, want 400", code, msg)
	}
	if code, msg, _ := do(http.MethodGet, "/nope", ""); code != http.StatusNotFound || !strings.Contains(msg, "/nope") {
		t.Errorf("unknown path: %d %q, want 404 naming it", code, msg)
	}
	code, msg, h := do(http.MethodDelete, "/quota", "")
	if code != http.StatusMethodNotAllowed || !strings.Contains(h.Get("Allow"), "POST") || !strings.Contains(msg, "DELETE") {
		t.Errorf("wrong method: %d %q Allow %q, want 405 with Allow", code, msg, h.Get("Allow"))
	}
	if st := c.m.State(); len(st.Quota) != 0 || len(st.Weights) != 0 {
		t.Fatalf("refused requests applied: %v %v", st.Quota, st.Weights)
	}
	if code, body, _ := do(http.MethodGet, "/state", ""); code != http.StatusOK || !strings.Contains(body, "startedAt") {
		t.Errorf("GET /state: %d %.80s", code, body)
	}
}

// TestRoleNameLimit: one limit on a role name's length (MaxRoleBytes,
// a directory name's 255 bytes), refused with 400 or InvalidArgument
// naming it wherever a role enters: /reserve, /quota, /weights, a demand,
// Subscribe and the Go API. Before, a 100,000-byte role was reserved (and
// kept across restarts) while /quota and /weights answered 500 "key too
// large" from the store.
func TestRoleNameLimit(t *testing.T) {
	longest, long := strings.Repeat("r", master.MaxRoleBytes), strings.Repeat("r", 100_000)
	if err := master.ValidateRole(longest); err != nil {
		t.Fatalf("a %d-byte role: %v", len(longest), err)
	}
	for _, role := range []string{longest + "x", long} {
		err := master.ValidateRole(role)
		if !errors.Is(err, master.ErrInvalid) || !strings.Contains(err.Error(), "255-byte limit") || len(err.Error()) > 200 {
			t.Errorf("a %d-byte role: %.300v, want a short ErrInvalid naming the 255-byte limit", len(role), err)
		}
	}
	c := newCluster(t, master.Options{Store: storeOpener(t)()})
	c.startAgent(t.TempDir(), newFakeRunner())
	agentID := waitAgents(t, c.m, 1)[0].ID
	do := operatorAPI(t, c)
	for _, r := range []struct{ path, body string }{
		{"/reserve", `{"agentId":"` + agentID + `","resources":"cpus(` + long + `):1"}`},
		{"/reserve", `{"agentId":"` + agentID + `","resources":"cpus(` + longest + `x):1"}`},
		{"/quota", `{"role":"` + long + `","limit":"cpus:1"}`},
		{"/weights", `[{"role":"` + long + `","weight":2}]`},
		{"/weights", `[{"role":"ok","weight":2},{"role":"` + longest + `x","weight":2}]`},
	} {
		code, msg, _ := do(http.MethodPost, r.path, r.body)
		if code != http.StatusBadRequest || !strings.Contains(msg, "255-byte limit") {
			t.Errorf("%s with a long role: %d %.200s, want 400 naming the limit", r.path, code, msg)
		}
	}
	if code, msg, _ := do(http.MethodPost, "/reserve", `{"agentId":"`+agentID+`","resources":"cpus(`+longest+`):1"}`); code != http.StatusOK {
		t.Errorf("reserve for a %d-byte role: %d %s", len(longest), code, msg)
	}
	if code, msg, _ := do(http.MethodPost, "/quota", `{"role":"`+longest+`","limit":"cpus:1"}`); code != http.StatusOK {
		t.Errorf("quota of a %d-byte role: %d %s", len(longest), code, msg)
	}
	if err := c.m.SetWeight(long, 2); !errors.Is(err, master.ErrInvalid) {
		t.Errorf("SetWeight(a long role): %.200v", err)
	}
	if err := c.m.SetQuota(long, quota("", "cpus:1")); !errors.Is(err, master.ErrInvalid) {
		t.Errorf("SetQuota(a long role): %.200v", err)
	}
	if err := c.m.Reserve(agentID, "", resources.MustParse("cpus("+long+"):1")); !errors.Is(err, master.ErrInvalid) {
		t.Errorf("Reserve(a long role): %.200v", err)
	}
	st := c.m.State()
	if len(st.Weights) != 0 || len(st.Quota) != 1 || st.Agents[0].Reserved != "cpus("+longest+",anonymous):1" {
		t.Fatalf("refused long roles recorded: weights %v, %d quotas, reserved %.300s", st.Weights, len(st.Quota), st.Agents[0].Reserved)
	}

	f := c.startDemandFramework("demands", false)
	code, body := postDemands(t, httpHandler(c.api, nil), `{"DemandID": "d", "FrameworkID": "`+f.d.FrameworkID()+`", "Role": "`+long+`", "Resources": "cpus:1"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "255-byte limit") || len(body) > 1000 {
		t.Errorf("demand for a long role: %d %.300s, want 400 naming the limit", code, body)
	}
	s := startSession(t, scheduler.Options{Master: c.addr, Name: "fw", Roles: []string{long}})
	s.refused(t, codes.InvalidArgument, "255-byte limit")
}

// A framework's roles go through the same rule at Subscribe.
func TestSubscribeValidatesRoles(t *testing.T) {
	c := newCluster(t, master.Options{})
	for _, role := range []string{"a b", "..", "../x", "*"} {
		s := startSession(t, scheduler.Options{Master: c.addr, Name: "fw", Roles: []string{"ok", role}})
		s.refused(t, codes.InvalidArgument, "role")
	}
	if st := c.m.State(); len(st.Frameworks) != 0 || len(st.Roles) != 0 {
		t.Fatalf("refused frameworks recorded: %+v %+v", st.Frameworks, st.Roles)
	}
}
