package integration

import (
	"strings"
	"testing"

	"github.com/containerd/console"
)

// TestMasterTaskExec: `brim task exec` runs a command in a running task's
// container through the master: the framework's own principal may, a
// principal the exec_tasks ACL allows for the task's role may, another
// principal is refused (and no ACL-less default lets it), an unknown task
// is NotFound; stdin, the exit code and a terminal (with its size) pass
// through the master.
func TestMasterTaskExec(t *testing.T) {
	dir := t.TempDir()
	creds := writeTemp(t, dir, "creds.json", `[{"principal":"ops","secret":"s3cret"},{"principal":"admin","secret":"adm"},{"principal":"intern","secret":"pw"}]`)
	acls := writeTemp(t, dir, "acls.json", `{"permissive":true,"rules":[
		{"principals":["ops","intern"],"action":"register_framework","roles":["ads"]},
		{"principals":["admin"],"action":"exec_tasks","roles":["ads"]}]}`)
	m := startMasterProc(t, "--credentials", creds, "--acls", acls)
	ag := startLinkedAgent(t, m.Addr)
	waitState(t, m.Addr, "agent", func(st masterState) bool { return len(st.Agents) == 1 && st.Agents[0].Connected })
	run := startRun(t, m.Addr, "--role", "ads", "--principal", "ops", "--secret", "s3cret", "--task-id", "target",
		"--cpus", "0.2", "--mem", "32", "--", "sleep", "600")
	run.waitLine(t, "RUNNING")
	st := waitState(t, m.Addr, "the task running", func(st masterState) bool {
		return len(st.Tasks) == 1 && st.Tasks[0].State == "TASK_RUNNING" || len(st.Tasks) == 1 && st.Tasks[0].State == "RUNNING"
	})
	fw := st.Tasks[0].FrameworkID
	exec := func(principal, secret, task string, args ...string) result {
		return runBrim(t, append([]string{"task", "exec", "--master", m.Addr, "--principal", principal, "--secret", secret, "--framework", fw, task, "--"}, args...)...)
	}

	r := exec("ops", "s3cret", "target", "sh", "-c", "echo hi; echo err >&2; exit 5")
	if r.code != 5 || r.stdout != "hi\n" || r.stderr != "err\n" {
		t.Fatalf("the framework's principal: exit %d, %q, %q; want 5, hi, err", r.code, r.stdout, r.stderr)
	}
	r = exec("admin", "adm", "target", "id", "-u")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "65534" {
		t.Fatalf("a principal with exec_tasks for the role: exit %d, %q %q; want 0 and the task's user 65534", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct {
		name, principal, secret, task string
		want                          []string
	}{
		{"another principal", "intern", "pw", "target", []string{"permission denied", `principal "intern"`, "exec_tasks", `role "ads"`}},
		{"another principal, unknown task", "intern", "pw", "nope", []string{"permission denied", `principal "intern"`}},
		{"unknown task", "ops", "s3cret", "nope", []string{"task nope", "not found"}},
		{"wrong secret", "ops", "x", "target", []string{"unauthenticated"}},
	} {
		r := exec(tc.principal, tc.secret, tc.task, "true")
		if r.code != 1 {
			t.Errorf("%s: exit %d, want 1: %s%s", tc.name, r.code, r.stdout, r.stderr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr does not say %q: %s", tc.name, w, r.stderr)
			}
		}
	}
	r = runBrim(t, "task", "exec", "--master", m.Addr, "--principal", "ops", "--secret", "s3cret", "--framework", fw, "--user", "root", "target", "--", "id")
	if r.code != 1 || !strings.Contains(r.stderr, "root") {
		t.Errorf("exec --user root in a task of nobody: exit %d %q, want refused naming root", r.code, r.stderr)
	}

	in := runBrimStdin(t, strings.Repeat("x", 100_000), "task", "exec", "--master", m.Addr, "--principal", "ops", "--secret", "s3cret",
		"--framework", fw, "-i", "target", "--", "wc", "-c")
	if in.code != 0 || strings.TrimSpace(in.stdout) != "100000" {
		t.Fatalf("task exec -i: exit %d, %q %q; want 100000 bytes counted", in.code, in.stdout, in.stderr)
	}

	p := startPty(t, 100, 33, "task", "exec", "--master", m.Addr, "--principal", "ops", "--secret", "s3cret",
		"--framework", fw, "-i", "-t", "target", "--", "sh", "-c", `stty size; echo ready; while read l; do [ "$l" = quit ] && exit 9; stty size; done`)
	at := p.waitFor("ready", 0)
	if !strings.Contains(p.output()[:at], "33 100") {
		t.Errorf("the task's terminal is not the client's 100x33: %q", p.output()[:at])
	}
	if err := p.master.Resize(console.WinSize{Width: 61, Height: 17}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the window size reaches the task through the master", func() bool {
		p.write("size\n")
		return strings.Contains(p.output()[at:], "17 61")
	})
	p.write("quit\n")
	if code := p.exitCode(); code != 9 {
		t.Fatalf("task exec -it: exit %d, want 9", code)
	}
	if st := getState(t, m.Addr); len(st.Tasks) != 1 || !strings.Contains(st.Tasks[0].State, "RUNNING") {
		t.Fatalf("the task after the execs: %+v, want it running", st.Tasks)
	}

	// A client killed mid-session: the master ends the agent's session,
	// and the shim the command with what it started.
	ls := ag.list()
	if len(ls) != 1 {
		t.Fatalf("the agent's containers: %+v, want the task's", ls)
	}
	held := startHeld(t, "task", "exec", "--master", m.Addr, "--principal", "ops", "--secret", "s3cret",
		"--framework", fw, "-i", "target", "--", "sh", "-c", "sleep 1001 & sleep 1002")
	eventually(t, "the exec's shell and sleeps run in the task", func() bool { return ag.procCount(ls[0].ID) == 4 })
	if err := held.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "nothing the exec started is left in the task", func() bool { return ag.procCount(ls[0].ID) == 1 })
}
