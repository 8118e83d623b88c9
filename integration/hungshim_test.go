package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hungShimBound bounds each CLI call of TestHungShim: with a hung shim the
// old agent never answered (kill) or never served (restart); the bound
// turns that into a failure that reports.
const hungShimBound = 90 * time.Second

// brimWithin runs the CLI against a's socket, killed after d.
func (a *agentProc) brimWithin(d time.Duration, args ...string) result {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	full := append(append([]string{}, args...), "--socket", a.Socket)
	cmd := exec.CommandContext(ctx, brimBinary, full...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		a.t.Fatalf("brim %v did not return within %v", args, d)
	}
	return exitResult(a.t, full, err, &out, &errb)
}

// stopShimOf SIGSTOPs the shim of container id (its pid from shim.pid,
// checked to be a shim of this agent's state dir) and resumes it on
// cleanup if it is still there.
func (a *agentProc) stopShimOf(id string) int {
	a.t.Helper()
	dir := filepath.Join(a.StateDir, "containers", id)
	b, err := os.ReadFile(filepath.Join(dir, "shim.pid"))
	if err != nil {
		a.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		a.t.Fatal(err)
	}
	isShim := func() bool {
		cwd, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		return cwd == dir || bytes.Contains(cmdline, []byte(dir))
	}
	if !isShim() {
		a.t.Fatalf("pid %d is not the shim of %s", pid, id)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() {
		if isShim() {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	})
	return pid
}

// TestHungShim: one SIGSTOPped shim does not stall the agent. `container
// kill` of its container returns (the agent kills the shim and the
// container's cgroup and records "shim-unresponsive"); an agent restart
// with one stopped shim and one whose shim.sock was removed serves,
// reports both as escalated, logs what it did, and still manages the
// healthy container.
func TestHungShim(t *testing.T) {
	a := startAgent(t)
	run := func() string { return a.run("--cpus", "0.05", "--mem", "16", "--", "sleep", "600") }
	hung, later, nosock, healthy := run(), run(), run(), run()

	a.stopShimOf(hung)
	if r := a.brimWithin(hungShimBound, "container", "kill", "--grace", "0s", hung); r.code != 0 {
		t.Fatalf("kill with a stopped shim: exit %d: %s", r.code, r.stderr)
	}
	if c := a.inspect(hung); c.State != "exited" || c.Exit == nil || c.Exit.Reason != "shim-unresponsive" {
		t.Errorf("container of the stopped shim after kill: %s", sprint(c))
	}

	a.stopShimOf(later)
	if err := os.Remove(filepath.Join(a.StateDir, "containers", nosock, "shim.sock")); err != nil {
		t.Fatal(err)
	}
	a.kill9()
	a.start()
	r := a.brimWithin(hungShimBound, "container", "ls", "--json")
	if r.code != 0 {
		t.Fatalf("ls after a restart with a stopped shim: exit %d: %s", r.code, r.stderr)
	}
	var list []containerJSON
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatal(err)
	}
	byID := map[string]containerJSON{}
	for _, c := range list {
		byID[c.ID] = c
	}
	for _, id := range []string{later, nosock} {
		if c := byID[id]; c.State != "exited" || c.Exit == nil || c.Exit.Reason != "shim-unresponsive" {
			t.Errorf("%s after the restart: %s", id, sprint(c))
		}
	}
	if c := byID[healthy]; c.State != "running" {
		t.Errorf("healthy container after the restart: %s", sprint(c))
	}
	if log, _ := os.ReadFile(a.logPath); !bytes.Contains(log, []byte("shim unresponsive")) {
		t.Errorf("agent log names no unresponsive shim")
	}
	if r := a.brimWithin(hungShimBound, "container", "kill", "--grace", "0s", healthy); r.code != 0 {
		t.Fatalf("kill the healthy container: exit %d: %s", r.code, r.stderr)
	}
	for _, id := range []string{hung, later, nosock, healthy} {
		a.mustBrim("container", "rm", "-f", id)
		a.assertGone(id)
	}
}

// TestHungShimTaskStatus: a task whose shim hangs (SIGSTOP) ends, once
// the containerizer has escalated the shim, as the runtime's failure —
// FAILED (CONTAINER_LOST) "the container runtime lost the task: the shim
// stopped answering …", without an exit code — not as the command's
// (before: COMMAND_EXITED "command killed by signal 9", exit 137).
func TestHungShimTaskStatus(t *testing.T) {
	m := startMasterProc(t)
	a := startLinkedAgent(t, m.Addr)
	run := startRun(t, m.Addr, "--task-id", "hung", "--cpus", "0.05", "--mem", "16", "--", "sleep", "600")
	run.waitLine(t, "RUNNING")
	var id string
	for _, c := range a.list() {
		if c.State == "running" {
			id = c.ID
		}
	}
	if id == "" {
		t.Fatalf("no running container for the task: %s", sprint(a.list()))
	}
	dev := *a // brim dev keeps the agent's state in STATE/agent
	dev.StateDir = filepath.Join(a.StateDir, "state", "agent")
	dev.stopShimOf(id)
	// No kill: the agent's own probes find the shim silent (three in a
	// row, ShimTimeout apart) and escalate.
	line := run.waitLine(t, "task hung: FAILED")
	if !strings.Contains(line, "(CONTAINER_LOST)") || !strings.Contains(line, "the container runtime lost the task: the shim stopped answering") {
		t.Errorf("final status of a task whose shim hung: %q", line)
	}
	if code := run.wait(t); code != 1 {
		t.Errorf("brim run exit %d, want 1 (no exit code of the command)", code)
	}
	if c := a.inspect(id); c.Exit == nil || c.Exit.Reason != "shim-unresponsive" {
		t.Errorf("container after the escalation: %s", sprint(c))
	}
}
