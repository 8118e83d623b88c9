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
