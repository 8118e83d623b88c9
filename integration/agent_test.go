package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
)

// TestLifecycle: launch → running → exit code recorded; logs; wait.
func TestLifecycle(t *testing.T) {
	a := startAgent(t)

	r := a.brim("container", "run", "--name", "three", "--wait", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	if r.code != 3 {
		t.Fatalf("run --wait: exit %d, want 3: %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	c := a.inspect("three")
	if c.ID != id || c.State != "exited" || c.Exit == nil || c.Exit.Code != 3 {
		t.Fatalf("inspect: %s", sprint(c))
	}
	lr := a.brim("container", "logs", "three")
	if lr.code != 0 || lr.stdout != "out\n" || lr.stderr != "err\n" {
		t.Fatalf("logs: %d %q %q", lr.code, lr.stdout, lr.stderr)
	}

	sleeper := a.run("--name", "sleeper", "--cpus", "0.5", "--", "sleep", "600")
	c = a.inspect(sleeper)
	if c.State != "running" || c.Pid <= 0 {
		t.Fatalf("sleeper: %s", sprint(c))
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", c.Pid)); err != nil {
		t.Fatalf("sleeper pid %d: %v", c.Pid, err)
	}
	ls := a.mustBrim("container", "ls")
	if !strings.Contains(ls, "ID") || !strings.Contains(ls, "sleeper") || !strings.Contains(ls, "running") || !strings.Contains(ls, "3") {
		t.Fatalf("ls:\n%s", ls)
	}

	// logs -f streams until the container exits.
	a.run("--name", "counter", "--", "sh", "-c", "for i in 1 2 3; do echo line$i; sleep 0.2; done; exit 4")
	lf := a.brim("container", "logs", "-f", "counter")
	if lf.code != 0 || lf.stdout != "line1\nline2\nline3\n" {
		t.Fatalf("logs -f: %d %q %q", lf.code, lf.stdout, lf.stderr)
	}
	w := a.brim("container", "wait", "counter")
	if w.code != 4 || strings.TrimSpace(w.stdout) != "4" {
		t.Fatalf("wait: %d %q", w.code, w.stdout)
	}

	st := a.mustBrim("container", "stats", "--interval", "200ms", "sleeper")
	if !strings.Contains(st, "CPU %") || !strings.Contains(st, sleeper) {
		t.Fatalf("stats:\n%s", st)
	}
	info := a.mustBrim("agent", "info")
	if !strings.Contains(info, "resources used") || !strings.Contains(info, "cpus:0.5;mem:128") {
		t.Fatalf("agent info:\n%s", info)
	}

	for _, ref := range []string{"three", "counter"} {
		a.mustBrim("container", "rm", ref)
	}
	a.mustBrim("container", "rm", "-f", "sleeper")
	for _, id := range []string{id, sleeper} {
		a.assertGone(id)
	}
	if l := a.list(); len(l) != 0 {
		t.Fatalf("containers left: %s", sprint(l))
	}
}

// TestResize: update while running changes the cgroup files.
func TestResize(t *testing.T) {
	// Revocable containers are admitted against the revocable pool (the
	// estimator's offer); the default noop estimator offers nothing.
	a := startAgent(t, "--estimator", "fixed", "--estimator-opt", "resources=cpus:1;mem:512")
	id := a.run("--cpus", "0.5", "--mem", "64", "--pids", "50", "--", "sleep", "600")
	if got := a.cgroupFile("cpu", id, "cpu.shares"); got != "512" {
		t.Fatalf("cpu.shares = %s, want 512", got)
	}
	if got := a.cgroupFile("memory", id, "memory.limit_in_bytes"); got != strconv.Itoa(64<<20) {
		t.Fatalf("memory.limit_in_bytes = %s", got)
	}
	out := a.mustBrim("container", "update", "--cpus", "1.5", "--mem", "256", "--pids", "80", id)
	if !strings.Contains(out, "cpus:1.5 mem:256MiB") {
		t.Fatalf("update: %s", out)
	}
	if got := a.cgroupFile("cpu", id, "cpu.shares"); got != "1536" {
		t.Fatalf("cpu.shares after update = %s, want 1536", got)
	}
	if got := a.cgroupFile("memory", id, "memory.limit_in_bytes"); got != strconv.Itoa(256<<20) {
		t.Fatalf("memory.limit_in_bytes after update = %s", got)
	}
	if got := a.cgroupFile("pids", id, "pids.max"); got != "80" {
		t.Fatalf("pids.max after update = %s", got)
	}
	c := a.inspect(id)
	if c.CPUs != 1.5 || c.MemMiB != 256 {
		t.Fatalf("inspect after update: %s", sprint(c))
	}
	// A revocable container runs best-effort: 10 shares per cpu (the
	// kernel may round what it reads back), not 1024.
	rev := a.run("--revocable", "--cpus", "0.2", "--", "sleep", "600")
	if got, _ := strconv.Atoi(a.cgroupFile("cpu", rev, "cpu.shares")); got < 2 || got > 10 {
		t.Fatalf("revocable cpu.shares = %d, want about 2", got)
	}
	if c := a.inspect(rev); !strings.Contains(a.mustBrim("container", "inspect", rev), `"revocable": true`) || c.CPUs != 0.2 {
		t.Fatalf("revocable inspect: %s", sprint(c))
	}
	a.mustBrim("container", "rm", "-f", rev)
	a.assertGone(rev)
	// Growing beyond the agent's resources is refused and changes nothing.
	r := a.brim("container", "update", "--cpus", "3", id)
	if r.code != 1 || !strings.Contains(r.stderr, "insufficient resources: asked cpus:1.5, free cpus:0.5") {
		t.Fatalf("update beyond total: %d %q", r.code, r.stderr)
	}
	if got := a.cgroupFile("cpu", id, "cpu.shares"); got != "1536" {
		t.Fatalf("cpu.shares after refused update = %s", got)
	}
}

// TestKillGrace: a task that traps SIGTERM exits cleanly; one that ignores
// it is SIGKILLed after the grace period.
func TestKillGrace(t *testing.T) {
	a := startAgent(t)
	trap := a.run("--", "sh", "-c", `trap "exit 7" TERM; echo ready; while :; do sleep 0.1; done`)
	ignore := a.run("--", "sh", "-c", `trap "" TERM; echo ready; while :; do sleep 0.1; done`)
	for _, id := range []string{trap, ignore} {
		eventually(t, id+" installed its trap", func() bool {
			return strings.Contains(a.brim("container", "logs", id).stdout, "ready")
		})
	}
	out := a.mustBrim("container", "kill", "--grace", "30s", trap)
	c := a.inspect(trap)
	if c.Exit == nil || c.Exit.Code != 7 || c.Exit.Signal != 0 {
		t.Fatalf("trapping task: %s (%s)", sprint(c.Exit), out)
	}
	a.mustBrim("container", "kill", "--grace", "1s", ignore)
	c = a.inspect(ignore)
	if c.Exit == nil || c.Exit.Signal != 9 || c.Exit.Code != 137 {
		t.Fatalf("ignoring task: %s", sprint(c.Exit))
	}
	if r := a.brim("container", "kill", ignore); r.code != 1 || !strings.Contains(r.stderr, "not running") {
		t.Fatalf("kill exited: %d %q", r.code, r.stderr)
	}
}

// TestOOM: a memory hog is OOM-killed and reported with reason memory-limit.
func TestOOM(t *testing.T) {
	a := startAgent(t)
	// tail keeps the whole (newline-free) line of /dev/zero in memory.
	r := a.brim("container", "run", "--mem", "32", "--wait", "--", "tail", "/dev/zero")
	if r.code != 137 {
		t.Fatalf("hog: exit %d, want 137: %s", r.code, r.stderr)
	}
	c := a.inspect(strings.TrimSpace(r.stdout))
	if c.Exit == nil || !c.Exit.OOMKilled || c.Exit.Reason != "memory-limit" {
		t.Fatalf("hog: %s", sprint(c.Exit))
	}
	if ls := a.mustBrim("container", "ls"); !strings.Contains(ls, "137 (memory-limit)") {
		t.Fatalf("ls:\n%s", ls)
	}
}

// TestRootfs: a container runs in a busybox root filesystem.
func TestRootfs(t *testing.T) {
	a := startAgent(t)
	_, err := os.Stat("/bin/busybox")
	testutil.Require(t, err == nil, "needs busybox-static (make deps)")
	root := filepath.Join(filepath.Dir(a.StateDir), "rootfs")
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	r := a.brim("container", "run", "--rootfs", root, "--wait", "--", "/bin/busybox", "sh", "-c", "test ! -e /usr/bin && echo inside")
	if r.code != 0 {
		t.Fatalf("rootfs run: %d %q", r.code, r.stderr)
	}
	if out := a.mustBrim("container", "logs", strings.TrimSpace(r.stdout)); out != "inside\n" {
		t.Fatalf("rootfs logs: %q", out)
	}
	// A command that does not exist in that root is refused.
	r = a.brim("container", "run", "--rootfs", root, "--", "sh")
	if r.code != 1 || !strings.Contains(r.stderr, "sh") || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("missing command in rootfs: %d %q", r.code, r.stderr)
	}
}

// TestRetention: with --sandbox-retention 1 only the newest finished
// container is kept; the older one is destroyed with its sandbox.
func TestRetention(t *testing.T) {
	a := startAgent(t, "--sandbox-retention", "1")
	first := strings.TrimSpace(a.brim("container", "run", "--wait", "--", "true").stdout)
	firstSandbox := filepath.Dir(a.inspect(first).SandboxDir)
	second := strings.TrimSpace(a.brim("container", "run", "--wait", "--", "true").stdout)
	eventually(t, "the older container is collected", func() bool {
		l := a.list()
		return len(l) == 1 && l[0].ID == second
	})
	a.assertGone(first)
	if _, err := os.Stat(firstSandbox); !os.IsNotExist(err) {
		t.Fatalf("sandbox of %s remains: %v", first, err)
	}
}
