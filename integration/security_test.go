package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTaskConfinement (issue 13): through `brim agent` and the CLI, a
// default task runs as nobody, cannot read /etc/shadow, sees an empty
// /root, gets ENOENT dialling the agent's socket and writes its sandbox;
// root is refused without --allow-root-tasks; a fork bomb stops at
// --default-pids.
func TestTaskConfinement(t *testing.T) {
	// The socket outside /tmp (the task has a private /tmp), in a
	// traversable directory like /run/brim: only the mask may hide it.
	base, err := os.MkdirTemp("/var/tmp", "brim-it-sec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(base, "run", "agent.sock")
	a := startAgentAt(t, sock, "--default-pids", "64")

	script := strings.Join([]string{
		`echo uid=$(id -u)`,
		`cat /etc/shadow >/dev/null 2>&1 && echo shadow=read || echo shadow=denied`,
		`ls -A /root 2>/dev/null | grep -q . && echo root=listed || echo root=hidden`,
		`/usr/bin/python3 -c 'import socket,sys
s=socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print("socket=connected")
except FileNotFoundError: print("socket=ENOENT")
except OSError as e: print("socket=%s" % e)' ` + sock,
		`echo mine > /mnt/sandbox/file && echo sandbox=written`,
	}, "\n")
	r := a.brim("container", "run", "--name", "plain", "--wait", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("default task: exit %d: %s", r.code, r.stderr)
	}
	out := a.mustBrim("container", "logs", "plain")
	for _, w := range []string{"uid=65534", "shadow=denied", "root=hidden", "socket=ENOENT", "sandbox=written"} {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("default task's output lacks %q:\n%s", w, out)
		}
	}

	// Root without the operator's flag: refused, nothing launched.
	r = a.brim("container", "run", "--user", "root", "--wait", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "allow-root-tasks") {
		t.Errorf("run --user root without --allow-root-tasks: exit %d, stderr %q; want a refusal naming the flag", r.code, r.stderr)
	}
	r = a.brim("container", "run", "--user", "no-such-user-brim", "--wait", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "no-such-user-brim") {
		t.Errorf("run --user no-such-user-brim: exit %d, stderr %q; want an error naming the user", r.code, r.stderr)
	}

	// A fork bomb: the subshell forks 4x the limit; the shell then counts
	// the container's processes with builtins only (no fork needed).
	r = a.brim("container", "run", "--name", "bomb", "--wait", "--", "sh", "-c",
		`(for i in $(seq 1 256); do sleep 1000 & done) 2>/dev/null; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo procs=$n`)
	out = a.mustBrim("container", "logs", "bomb")
	_, after, ok := strings.Cut(out, "procs=")
	n, err := strconv.Atoi(strings.TrimSpace(after))
	if !ok || err != nil || n > 64 || n < 32 {
		t.Errorf("fork bomb (exit %d): %q, want about 64 processes (the default pids.max)", r.code, out)
	}

	// With the flag, root runs.
	b := startAgent(t, "--allow-root-tasks")
	if r := b.brim("container", "run", "--user", "root", "--wait", "--", "sh", "-c", `test "$(id -u)" = 0`); r.code != 0 {
		t.Errorf("run --user root with --allow-root-tasks: exit %d: %s", r.code, r.stderr)
	}
}
