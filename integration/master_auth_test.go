package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestMasterFrameworkAuth: a real `brim master --credentials --acls` and
// `brim run`: without credentials, with a wrong secret, or for a role the
// ACLs do not allow, brim run is refused (exit 1, the reason on stderr)
// and nothing is launched; with the right principal and role (secret from
// --secret-file, then from $BRIM_SECRET) the task runs to FINISHED.
func TestMasterFrameworkAuth(t *testing.T) {
	dir := t.TempDir()
	creds := writeTemp(t, dir, "creds.json", `[{"principal":"ops","secret":"s3cret"},{"principal":"intern","secret":"pw"}]`)
	acls := writeTemp(t, dir, "acls.json", `{"rules":[
		{"principals":["ops"],"action":"register_framework","roles":["ads"]},
		{"principals":["ANY"],"action":"reserve","roles":["ads"]}]}`)
	secretFile := writeTemp(t, dir, "secret", "s3cret\n")
	m := startMasterProc(t, "--credentials", creds, "--acls", acls)
	startLinkedAgent(t, m.Addr)
	waitState(t, m.Addr, "agent", func(st masterState) bool { return len(st.Agents) == 1 && st.Agents[0].Connected })

	for _, tc := range []struct {
		name string
		args []string
		want []string // on stderr
	}{
		{"no credentials", []string{"--role", "ads"}, []string{"unauthenticated", "--principal"}},
		{"wrong secret", []string{"--role", "ads", "--principal", "ops", "--secret", "nope"}, []string{"unauthenticated", `bad credentials for "ops"`}},
		{"wrong role", []string{"--role", "web", "--principal", "ops", "--secret-file", secretFile}, []string{"permission denied", `principal "ops"`, `role "web"`}},
		{"principal without the ACL", []string{"--role", "ads", "--principal", "intern", "--secret", "pw"}, []string{"permission denied", `principal "intern"`, `role "ads"`}},
		{"default role not allowed", []string{"--principal", "ops", "--secret-file", secretFile}, []string{"permission denied", `role "default"`}},
	} {
		args := append(append([]string{"run", "--master", m.Addr}, tc.args...), "--", "true")
		r := runBrim(t, args...)
		if r.code != 1 {
			t.Errorf("%s: exit %d, want 1:\n%s%s", tc.name, r.code, r.stdout, r.stderr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr does not say %q:\n%s", tc.name, w, r.stderr)
			}
		}
		if strings.Contains(r.stdout, "STAGING") {
			t.Errorf("%s: a task was launched:\n%s", tc.name, r.stdout)
		}
	}
	if st := getState(t, m.Addr); len(st.Tasks) != 0 {
		t.Fatalf("tasks after refused frameworks: %+v", st.Tasks)
	}

	r := runBrim(t, "run", "--master", m.Addr, "--role", "ads", "--principal", "ops", "--secret-file", secretFile,
		"--cpus", "0.2", "--mem", "32", "--", "sh", "-c", "exit 0")
	if r.code != 0 {
		t.Fatalf("authenticated brim run: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := taskStates(r.stdout); !slices.Equal(got, []string{"STAGING", "STARTING", "RUNNING", "FINISHED"}) {
		t.Fatalf("states %v:\n%s", got, r.stdout)
	}

	// The secret from the environment; the task's exit code comes back.
	cmd := exec.Command(brimBinary, "run", "--master", m.Addr, "--role", "ads", "--principal", "ops", "--task-id", "env-secret",
		"--cpus", "0.2", "--mem", "32", "--", "sh", "-c", "exit 4")
	cmd.Env = append(os.Environ(), "BRIM_SECRET=s3cret")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("brim run with $BRIM_SECRET: %v, want exit 4:\n%s%s", err, out.String(), errb.String())
	}
	resp, err := http.Get("http://" + m.Addr + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Frameworks []struct {
			Principal string   `json:"principal"`
			Roles     []string `json:"roles"`
		} `json:"frameworks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if len(st.Frameworks) != 2 {
		t.Fatalf("frameworks in /state: %+v, want the two authenticated runs", st.Frameworks)
	}
	for _, f := range st.Frameworks {
		if f.Principal != "ops" || !slices.Equal(f.Roles, []string{"ads"}) {
			t.Errorf("framework in /state: %+v, want principal ops, role ads", f)
		}
	}
}
