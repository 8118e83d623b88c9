package integration

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestRunAsRootACL (issue 13): through a real `brim master --acls` and a
// linked agent (without --allow-root-tasks), `brim run --user root` is
// refused at ACCEPT with TASK_ERROR (TASK_UNAUTHORIZED, naming
// run_as_root) for a principal without the run_as_root ACL, and runs as
// uid 0 for one with it; in a user namespace (--userns) root needs no ACL
// and is the agent's --userns-range on the host; without --user the task
// runs as the agent's default user.
func TestRunAsRootACL(t *testing.T) {
	dir := t.TempDir()
	creds := writeTemp(t, dir, "creds.json", `[{"principal":"ops","secret":"s1"},{"principal":"dev","secret":"s2"}]`)
	acls := writeTemp(t, dir, "acls.json", `{"rules":[
		{"principals":["ANY"],"action":"register_framework","roles":["ads"]},
		{"principals":["ops"],"action":"run_as_root","roles":["ads"]}]}`)
	m := startMasterProc(t, "--credentials", creds, "--acls", acls)
	a := startLinkedAgent(t, m.Addr, "--userns-range", "3000000000:65536")
	// The user namespace's root must reach the container directories.
	if err := os.Chmod(a.StateDir, 0o711); err != nil {
		t.Fatal(err)
	}
	waitState(t, m.Addr, "agent", func(st masterState) bool { return len(st.Agents) == 1 && st.Agents[0].Connected })

	run := func(principal, secret string, args ...string) result {
		t.Helper()
		return runBrim(t, append([]string{"run", "--master", m.Addr, "--role", "ads", "--principal", principal, "--secret", secret,
			"--cpus", "0.1", "--mem", "32"}, args...)...)
	}
	// exit $(id -u): 0 only as root.
	asRoot := []string{"--", "sh", "-c", "exit $(id -u)"}

	r := run("dev", "s2", append([]string{"--task-id", "root-refused", "--user", "root"}, asRoot...)...)
	if r.code != 1 {
		t.Fatalf("root task without run_as_root: exit %d, want 1:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := taskStates(r.stdout); !slices.Equal(got, []string{"ERROR"}) {
		t.Errorf("states %v, want only ERROR:\n%s", got, r.stdout)
	}
	for _, w := range []string{"TASK_UNAUTHORIZED", "run_as_root", `"root"`} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("the refusal does not say %q:\n%s", w, r.stdout)
		}
	}
	for _, tk := range getState(t, m.Addr).Tasks {
		if tk.ID == "root-refused" {
			t.Errorf("the refused task reached the master's tasks: %+v", tk)
		}
	}

	r = run("ops", "s1", append([]string{"--task-id", "root-allowed", "--user", "root"}, asRoot...)...)
	if r.code != 0 {
		t.Fatalf("root task with run_as_root: exit %d, want 0 (uid 0):\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := taskStates(r.stdout); !slices.Equal(got, []string{"STAGING", "STARTING", "RUNNING", "FINISHED"}) {
		t.Errorf("states %v:\n%s", got, r.stdout)
	}

	// Root in a user namespace: no ACL needed, and its uid 0 maps to the
	// range's first host uid.
	r = run("dev", "s2", "--task-id", "root-userns", "--user", "root", "--userns", "--",
		"sh", "-c", `read inside host size < /proc/self/uid_map; test "$(id -u) $inside $host $size" = "0 0 3000000000 65536"`)
	if r.code != 0 {
		t.Fatalf("root task in a user namespace: exit %d, want 0:\n%s%s", r.code, r.stdout, r.stderr)
	}

	// No user: the agent's default (nobody).
	r = run("dev", "s2", "--task-id", "default-user", "--", "sh", "-c", `test "$(id -u)" = 65534`)
	if r.code != 0 {
		t.Fatalf("task as the default user: exit %d, want 0:\n%s%s", r.code, r.stdout, r.stderr)
	}
}
