package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
)

// runRefusedAgent runs `brim agent --master addr` with its own state dir,
// socket and cgroup parent (removed at cleanup) until it exits.
func runRefusedAgent(t *testing.T, addr string, extra ...string) result {
	t.Helper()
	base, err := os.MkdirTemp("", "brim-it")
	if err != nil {
		t.Fatal(err)
	}
	parent := "/" + testutil.UniqueName("brim-test")
	t.Cleanup(func() {
		testutil.RemoveCgroupTree(t, parent)
		unmountUnder(t, base)
		if err := os.RemoveAll(base); err != nil {
			t.Errorf("remove %s: %v", base, err)
		}
	})
	args := append([]string{"agent", "--master", addr, "--state-dir", filepath.Join(base, "state"), "--socket", filepath.Join(base, "agent.sock"),
		"--cgroup-parent", parent, "--resources", "cpus:1;mem:512"}, extra...)
	return runBrimBounded(t, parent, args...)
}

// decodeState decodes the master's /state into v (the fields a test reads).
func decodeState(t *testing.T, addr string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// agentPrincipals returns the agents in /state with their principals.
func agentPrincipals(t *testing.T, addr string) map[string]string {
	t.Helper()
	var st struct {
		Agents []struct {
			ID        string `json:"id"`
			Principal string `json:"principal"`
		} `json:"agents"`
	}
	decodeState(t, addr, &st)
	out := map[string]string{}
	for _, a := range st.Agents {
		out[a.ID] = a.Principal
	}
	return out
}

// TestMasterAgentAuth: a real `brim master --credentials --acls
// --authenticate-agents`. `brim master --authenticate-agents` without
// credentials does not start; `brim agent --master` without credentials,
// with a wrong secret, or as a principal the register_agent ACL does not
// name exits 1 at once with the master's reason, and /state shows no
// agent; `brim dev --join` with the agent's principal and secret file
// registers (its principal in /state) and runs a task for an authenticated
// `brim run`.
func TestMasterAgentAuth(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	r := runBrimBounded(t, "/"+testutil.UniqueName("brim-test"), "master", "--listen", testutil.FreeAddr(t), "--state-dir", filepath.Join(dir, "nocreds"), "--authenticate-agents")
	if r.code != 2 || !strings.Contains(r.stderr, "--authenticate-agents needs --credentials") {
		t.Fatalf("master --authenticate-agents without --credentials: exit %d, want 2 and the reason:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "nocreds")); !os.IsNotExist(err) {
		t.Errorf("the refused master created its state dir (%v)", err)
	}

	creds := writeTemp(t, dir, "creds.json", `[{"principal":"agent1","secret":"a-s3cret"},{"principal":"ops","secret":"s3cret"},{"principal":"intruder","secret":"pw"}]`)
	acls := writeTemp(t, dir, "acls.json", `{"rules":[
		{"principals":["agent1"],"action":"register_agent"},
		{"principals":["ops"],"action":"register_framework","roles":["ANY"]}]}`)
	agentSecret := writeTemp(t, dir, "agent-secret", "a-s3cret\n")
	wrongSecret := writeTemp(t, dir, "wrong-secret", "nope\n")
	intruderSecret := writeTemp(t, dir, "intruder-secret", "pw\n")
	opsSecret := writeTemp(t, dir, "ops-secret", "s3cret\n")
	m := startMasterProc(t, "--credentials", creds, "--acls", acls, "--authenticate-agents")

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // on stderr
	}{
		{"no credentials", nil, 1, []string{"the master refused the agent: unauthenticated", "no credentials", "--principal"}},
		{"wrong secret", []string{"--principal", "agent1", "--secret-file", wrongSecret}, 1, []string{"unauthenticated", `"agent1"`, "wrong secret"}},
		{"unknown principal", []string{"--principal", "nobody", "--secret-file", wrongSecret}, 1, []string{"unauthenticated", `"nobody"`, "unknown principal"}},
		{"acl", []string{"--principal", "intruder", "--secret-file", intruderSecret}, 1, []string{"permission denied", `"intruder"`, "register_agent"}},
		{"secret file without principal", []string{"--secret-file", agentSecret}, 2, []string{"--principal"}},
	} {
		r := runRefusedAgent(t, m.Addr, tc.args...)
		if r.code != tc.code {
			t.Errorf("%s: exit %d, want %d:\n%s%s", tc.name, r.code, tc.code, r.stdout, r.stderr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr does not say %q:\n%s", tc.name, w, r.stderr)
			}
		}
	}
	if ag := agentPrincipals(t, m.Addr); len(ag) != 0 {
		t.Fatalf("agents in /state after the refused ones: %v", ag)
	}

	startLinkedAgent(t, m.Addr, "--principal", "agent1", "--secret-file", agentSecret)
	st := waitState(t, m.Addr, "the authenticated agent", func(st masterState) bool { return len(st.Agents) == 1 && st.Agents[0].Connected })
	if ag := agentPrincipals(t, m.Addr); ag[st.Agents[0].ID] != "agent1" {
		t.Fatalf("agent principals in /state: %v, want agent1", ag)
	}

	run := startRun(t, m.Addr, "--principal", "ops", "--secret-file", opsSecret, "--cpus", "0.2", "--mem", "32", "--", "sh", "-c", "exit 0")
	if code := run.wait(t); code != 0 {
		t.Fatalf("authenticated brim run: exit %d:\n%s", code, run.output())
	}
	if got := taskStates(run.output()); !slices.Equal(got, []string{"STAGING", "STARTING", "RUNNING", "FINISHED"}) {
		t.Fatalf("states %v:\n%s", got, run.output())
	}
}
