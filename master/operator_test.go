package master_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/master/transport"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
)

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitAgents(t *testing.T, m *master.Master, n int) []master.AgentState {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var up []master.AgentState
		for _, a := range m.State().Agents {
			if a.Connected {
				up = append(up, a)
			}
		}
		if len(up) >= n {
			return up
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("fewer than %d agents registered", n)
	return nil
}

func TestOperatorReserveStatusCodes(t *testing.T) {
	c := newCluster(t, master.Options{})
	c.startAgent(t.TempDir(), newFakeRunner())
	agentID := waitAgents(t, c.m, 1)[0].ID
	dir := t.TempDir()
	auth, err := transport.LoadAuth(
		writeFile(t, dir, "creds.json", `[{"principal":"ops","secret":"s3cret"},{"principal":"intern","secret":"pw"}]`),
		writeFile(t, dir, "acls.json", `{"rules":[{"principals":["ops"],"action":"reserve","roles":["ads"]},{"principals":["ops"],"action":"unreserve","roles":["ANY"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpHandler(c.api, auth))
	defer srv.Close()
	post := func(path, user, pass, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out["error"]
	}
	body := func(res string) string { return `{"agentId":"` + agentID + `","resources":"` + res + `"}` }
	cases := []struct {
		name, path, user, pass, body string
		want                         int
	}{
		{"unauthenticated", "/reserve", "", "", body("cpus(ads):1"), 401},
		{"wrong secret", "/reserve", "ops", "nope", body("cpus(ads):1"), 401},
		{"wrong role", "/reserve", "ops", "s3cret", body("cpus(web):1"), 403},
		{"not permitted", "/reserve", "intern", "pw", body("cpus(ads):1"), 403},
		{"more than available", "/reserve", "ops", "s3cret", body("cpus(ads):100"), 409},
		{"malformed JSON", "/reserve", "ops", "s3cret", `{"agentId":`, 400},
		{"malformed resources", "/reserve", "ops", "s3cret", body("cpus(ads):x"), 400},
		{"unreserved role", "/reserve", "ops", "s3cret", body("cpus:1"), 400},
		{"revocable", "/reserve", "ops", "s3cret", body("cpus(ads){REV}:1"), 400},
		{"unknown agent", "/reserve", "ops", "s3cret", `{"agentId":"nope","resources":"cpus(ads):1"}`, 400},
		{"ok", "/reserve", "ops", "s3cret", body("cpus(ads):1;mem(ads):512"), 200},
		{"unreserve more than reserved", "/unreserve", "ops", "s3cret", body("cpus(ads,ops):2"), 409},
		{"unreserve ok", "/unreserve", "ops", "s3cret", body("cpus(ads,ops):0.5"), 200},
	}
	for _, tc := range cases {
		code, msg := post(tc.path, tc.user, tc.pass, tc.body)
		if code != tc.want {
			t.Errorf("%s: %d (%s), want %d", tc.name, code, msg, tc.want)
		}
		if code >= 400 && msg == "" {
			t.Errorf("%s: %d without a message", tc.name, code)
		}
		// Said once, with what the agent has ("reserve …: insufficient
		// resources: reserve …: insufficient resources" before).
		if code == 409 && (strings.Count(msg, "insufficient resources") != 1 || strings.Count(msg, "reserve ") != 1) {
			t.Errorf("%s: %q repeats itself", tc.name, msg)
		}
	}
	_, msg := post("/reserve", "ops", "s3cret", body("cpus(ads):100"))
	if want := "reserve cpus:100 on " + agentID + ": insufficient resources: unreserved and unallocated there: cpus:"; !strings.HasPrefix(msg, want) {
		t.Errorf("reserving too much: %q, want it to start %q", msg, want)
	}
	st := c.m.State()
	if got := resources.MustParse(st.Agents[0].Reserved); !got.Equal(resources.MustParse("cpus(ads,ops):0.5;mem(ads,ops):512")) {
		t.Fatalf("reserved %s", st.Agents[0].Reserved)
	}
}

func TestMasterRestartKeepsTasksReservationsQuota(t *testing.T) {
	open := storeOpener(t)
	store := open()
	c := newClusterAt(t, master.Options{Store: store}, "127.0.0.1:0")
	addr := c.addr
	r := newFakeRunner()
	c.startAgent(t.TempDir(), r)
	f := c.startFramework("fw", "ads")
	launch(t, f, f.nextOffers(t)[0], "t1", "cpus:1;mem:128")
	f.expectStates(t, "t1", pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING)
	agentID := waitAgents(t, c.m, 1)[0].ID
	if err := c.m.Reserve(agentID, "ops", resources.MustParse("cpus(ads):1")); err != nil {
		t.Fatal(err)
	}
	if err := c.m.SetQuota("ads", quota("cpus:1", "cpus:3")); err != nil {
		t.Fatal(err)
	}
	if err := c.m.SetWeight("ads", 2); err != nil {
		t.Fatal(err)
	}
	c.stop()
	store.Close()

	// Same address and store: the agent and the framework come back.
	c2 := newClusterAt(t, master.Options{Store: open()}, addr)
	waitAgents(t, c2.m, 1)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := c2.m.State()
		if len(st.Frameworks) == 1 && st.Frameworks[0].Connected && st.Frameworks[0].Tasks == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("framework did not re-subscribe with its task: %+v", st.Frameworks)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := f.d.Reconcile(context.Background(), "t1"); err != nil {
		t.Fatal(err)
	}
	for {
		st := f.nextUpdate(t)
		if st.TaskId == "t1" && st.Reason == master.ReasonReconciliation {
			if st.State != pb.TaskState_TASK_RUNNING {
				t.Fatalf("t1 %s after master restart, want RUNNING", st.State)
			}
			break
		}
	}
	st := c2.m.State()
	if got := resources.MustParse(st.Agents[0].Reserved); !got.Equal(resources.MustParse("cpus(ads,ops):1")) {
		t.Errorf("reservations after restart: %q", st.Agents[0].Reserved)
	}
	if q := st.Quota["ads"]; q.Guarantee != "cpus:1" || q.Limit != "cpus:3" {
		t.Errorf("quota after restart: %+v", st.Quota)
	}
	if st.Weights["ads"] != 2 {
		t.Errorf("weights after restart: %v", st.Weights)
	}
}

func quota(g, l string) allocator.Quota {
	return allocator.Quota{Guarantee: resources.MustParse(g), Limit: resources.MustParse(l)}
}

// nilLists returns the paths of the nil slices in v, walking structs,
// pointers, slices and maps: a nil slice is JSON null.
func nilLists(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return nilLists(v.Elem(), path)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			return nil
		}
		var out []string
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out = append(out, nilLists(v.Field(i), path+"."+v.Type().Field(i).Name)...)
			}
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return []string{path}
		}
		var out []string
		for i := range v.Len() {
			out = append(out, nilLists(v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	case reflect.Map:
		var out []string
		for it := v.MapRange(); it.Next(); {
			out = append(out, nilLists(it.Value(), fmt.Sprintf("%s[%v]", path, it.Key()))...)
		}
		return out
	}
	return nil
}

// TestStateListsNeverNull: every list of State — top-level and nested,
// empty or not — is [] in /state's JSON, never null: an empty master, and
// one with an agent, a framework, a task, a completed task and framework
// and a demand. Before, an empty tasks or offers list was null.
func TestStateListsNeverNull(t *testing.T) {
	check := func(what string, st master.State) {
		t.Helper()
		if nils := nilLists(reflect.ValueOf(st), "State"); len(nils) > 0 {
			t.Errorf("%s: nil lists %v", what, nils)
		}
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "null") {
			t.Errorf("%s: /state has null: %s", what, b)
		}
	}
	c := newCluster(t, master.Options{})
	check("empty master", c.m.State())
	do := operatorAPI(t, c)
	if code, body, _ := do(http.MethodGet, "/state", ""); code != http.StatusOK || strings.Contains(body, "null") {
		t.Errorf("GET /state of an empty master: %d %s", code, body)
	}

	r := newFakeRunner()
	c.startAgent(t.TempDir(), r)
	waitAgents(t, c.m, 1)
	f := c.startFramework("lists")
	o := (<-f.offers)[0]
	if err := f.d.Launch(context.Background(), []string{o.Id}, []*pb.TaskInfo{{TaskId: "t1", Resources: "cpus:1;mem:64", Command: []string{"true"}}}, 0); err != nil {
		t.Fatal(err)
	}
	waitState(t, c.m, "t1 running", func(st master.State) bool { return len(st.Tasks) == 1 && st.Tasks[0].State == "RUNNING" })
	check("a running task", c.m.State())
	finishTask(t, r, "t1")
	waitState(t, c.m, "t1 completed", func(st master.State) bool { return len(st.CompletedTasks) == 1 })
	check("a completed task", c.m.State())
	f.d.Close() // its failover timeout is a minute: still listed, disconnected
	check("a disconnected framework", c.m.State())
	gone, err := scheduler.New(scheduler.Options{Master: c.addr, Name: "gone", FailoverTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = gone.Run(ctx, scheduler.Callbacks{}) }()
	waitState(t, c.m, "framework gone subscribed", func(st master.State) bool { return len(st.Frameworks) == 2 })
	cancel()
	gone.Close()
	waitState(t, c.m, "framework gone removed", func(st master.State) bool { return len(st.CompletedFrameworks) == 1 })
	check("a completed framework", c.m.State())
}
