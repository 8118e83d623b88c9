package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/brimnode/brim/containerizer"
	"github.com/brimnode/brim/internal/testutil"
)

// TestWarmSandboxesGoWithTheAgent (issue 35): warm sandboxes are the
// agent's inventory, never left behind by it. A clean stop (SIGTERM)
// removes them (they hold memory and processes; the containers keep
// running), the recovery of an agent started after a kill -9 removes the
// dead agent's, and `brim agent cleanup` after a kill -9 removes them as
// a decommission's expected work (exit 0, "removed warm sandbox …"), not
// as a failure.
func TestWarmSandboxesGoWithTheAgent(t *testing.T) {
	a := startAgent(t)
	ready := regexp.MustCompile(`warm sandboxes\s+[1-9][0-9]* ready`)
	// A launch warm sandboxes serve (the host's root, no network): the
	// agent makes some ahead of the next one.
	var shims []int
	warmUp := func() {
		t.Helper()
		a.run("--cpus", "0.05", "--mem", "16", "--", "sleep", "1000")
		eventually(t, "a warm sandbox ready", func() bool {
			r := a.brim("agent", "info")
			return r.code == 0 && ready.MatchString(r.stdout)
		})
		shims = warmShims(a)
		if len(shims) == 0 || len(warmLeft(a, shims)) == 0 {
			t.Fatal("warm sandboxes ready, yet the probe sees none (the checks below would mean nothing)")
		}
	}

	warmUp()
	a.stop()
	if left := warmLeft(a, shims); len(left) > 0 {
		t.Errorf("after a clean stop:\n%s", strings.Join(left, "\n"))
	}

	a.start()
	warmUp()
	a.kill9()
	a.start()
	eventually(t, "the dead agent's warm sandboxes removed by the next one", func() bool { return len(warmLeft(a, shims)) == 0 })

	warmUp()
	a.kill9()
	r := runBrim(t, "agent", "cleanup", "--state-dir", a.StateDir, "--socket", a.Socket, "--cgroup-parent", a.Parent)
	if r.code != 0 || !strings.Contains(r.stdout, "removed warm sandbox "+containerizer.SandboxPrefix) {
		t.Errorf("cleanup after a kill -9 with warm sandboxes: exit %d: %s%s; want exit 0 saying \"removed warm sandbox\"", r.code, r.stdout, r.stderr)
	}
	if left := warmLeft(a, shims); len(left) > 0 {
		t.Errorf("after cleanup:\n%s", strings.Join(left, "\n"))
	}
}

// warmLeft lists what of warm sandboxes exists for a's agent: their
// directories, libcontainer state and groups (named
// containerizer.SandboxPrefix…), and the shims (PIDs read from
// their directories by warmShims) still running.
func warmLeft(a *agentProc, shims []int) []string {
	var out []string
	for _, sub := range []string{"containers", "runc"} {
		m, _ := filepath.Glob(filepath.Join(a.StateDir, sub, containerizer.SandboxPrefix+"*"))
		for _, d := range m {
			out = append(out, "directory "+d)
		}
	}
	m, _ := filepath.Glob(filepath.Join(testutil.CgroupRoot, "*", a.Parent, containerizer.SandboxPrefix+"*"))
	for _, g := range m {
		out = append(out, "cgroup "+g)
	}
	for _, pid := range shims {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !strings.Contains(string(b), ") Z ") {
			out = append(out, fmt.Sprintf("shim %d", pid))
		}
	}
	return out
}

// warmShims returns the PIDs of the shims of a's warm sandboxes.
func warmShims(a *agentProc) []int {
	var out []int
	m, _ := filepath.Glob(filepath.Join(a.StateDir, "containers", containerizer.SandboxPrefix+"*", "shim.pid"))
	for _, f := range m {
		b, _ := os.ReadFile(f)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// launchCounts reads the agent's launches taken warm and cold (agent
// info).
func launchCounts(t *testing.T, a *agentProc) (warm, cold int) {
	t.Helper()
	out := a.mustBrim("agent", "info")
	m := regexp.MustCompile(`launches (\d+) warm, (\d+) cold`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("agent info says nothing of warm and cold launches:\n%s", out)
	}
	warm, _ = strconv.Atoi(m[1])
	cold, _ = strconv.Atoi(m[2])
	return warm, cold
}

// awaitWarmReady waits until a's agent has a warm sandbox ready.
func awaitWarmReady(t *testing.T, a *agentProc) {
	t.Helper()
	ready := regexp.MustCompile(`warm sandboxes\s+[1-9][0-9]* ready`)
	eventually(t, "a warm sandbox ready", func() bool {
		r := a.brim("agent", "info")
		return r.code == 0 && ready.MatchString(r.stdout)
	})
}

// TestExecIntoWarmContainer (issues 33, 35): a container made from a warm
// sandbox takes execs as a cold one does: in its own (renamed) cgroups,
// its init's namespaces and privileges, with its exit code; attach
// follows its output to its exit code. A container that asks for a stdin or a
// terminal is launched cold even with sandboxes ready (they are made
// with the init, before any claim), and attach and exec work there.
func TestExecIntoWarmContainer(t *testing.T) {
	a := startAgent(t)
	a.run("--cpus", "0.05", "--mem", "16", "--", "sleep", "1000") // warms the shape up
	awaitWarmReady(t, a)
	warm0, _ := launchCounts(t, a)
	id := a.run("--cpus", "0.05", "--mem", "16", "--", "sleep", "1000")
	if warm, _ := launchCounts(t, a); warm != warm0+1 {
		t.Fatalf("the launch with a sandbox ready was not warm: %d warm launches, want %d", warm, warm0+1)
	}
	pid := a.inspect(id).Pid
	init := sleepingInitStatus(t, pid) // the trampoline's exec done
	r := runBrim(t, "container", "exec", "--socket", a.Socket, id, "--", "sh", "-c", "cat /proc/self/status; cat /proc/self/cgroup; exit 7")
	if r.code != 7 {
		t.Fatalf("exec into a warm-launched container: exit %d (%s), want 7", r.code, r.stderr)
	}
	if want, got := privileges(init), privileges(r.stdout); len(want) < 9 || sprint(got) != sprint(want) {
		t.Errorf("exec's privileges differ from the init's:\nexec %v\ninit %v", got, want)
	}
	// The groups are the sandbox's, renamed at the claim.
	checkExecCgroups(t, a, id, strings.Split(r.stdout, "\n"))
	checkExecNamespaces(t, a, id, pid)

	// Attach to a warm-launched container (no stdin): its output from
	// now, to its exit code.
	awaitWarmReady(t, a)
	warm1, _ := launchCounts(t, a)
	tick := a.run("--cpus", "0.05", "--mem", "16", "--", "sh", "-c", "while :; do echo tick; sleep 0.1; done")
	if warm, _ := launchCounts(t, a); warm != warm1+1 {
		t.Fatalf("the launch with a sandbox ready was not warm: %d warm launches, want %d", warm, warm1+1)
	}
	p := startPty(t, 80, 24, "container", "attach", "--socket", a.Socket, tick)
	p.waitFor("tick", 0)
	a.mustBrim("container", "kill", "--grace", "0s", tick)
	if code := p.exitCode(); code != 137 {
		t.Fatalf("attach to a warm-launched container ended with exit %d, want its 137 (killed)", code)
	}

	awaitWarmReady(t, a)
	warm2, _ := launchCounts(t, a)
	it := a.run("--cpus", "0.05", "--mem", "16", "-d", "-i", "-t", "--", "sh", "-c", `while read l; do [ "$l" = quit ] && exit 5; echo echo:$l; done`)
	if warm, _ := launchCounts(t, a); warm != warm2 {
		t.Fatalf("a -i -t launch took a warm sandbox: %d warm launches, want %d (cold)", warm, warm2)
	}
	r = runBrim(t, "container", "exec", "--socket", a.Socket, it, "--", "sh", "-c", "exit 3")
	if r.code != 3 {
		t.Errorf("exec into the cold -i -t container: exit %d (%s), want 3", r.code, r.stderr)
	}
	p = startPty(t, 80, 24, "container", "attach", "--socket", a.Socket, it)
	eventually(t, "attach passes input and output", func() bool {
		p.write("one\n")
		return strings.Contains(p.output(), "echo:one")
	})
	p.write("quit\n")
	if code := p.exitCode(); code != 5 {
		t.Fatalf("attach ended with exit %d, want the container's 5", code)
	}
}
