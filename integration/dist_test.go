package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
)

// The unit files in dist/systemd pass `systemd-analyze verify` with no
// warning (unknown keys are only warnings there, so any output fails).
func TestSystemdUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	testutil.Require(t, err == nil, "systemd-analyze not installed")
	dir := t.TempDir()
	units, err := filepath.Glob("../dist/systemd/*.service")
	if err != nil || len(units) != 2 {
		t.Fatalf("units: %v %v", units, err)
	}
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		// verify checks that ExecStart's binary exists: point it at ours.
		text := strings.ReplaceAll(string(b), "/usr/bin/brim ", brimBinary+" ")
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(u)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(analyze, "verify", filepath.Join(dir, "brim-agent.service"), filepath.Join(dir, "brim-master.service")).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// The .deb installs brim, its units, configs and directories, and a purge
// leaves nothing behind.
func TestDebPackage(t *testing.T) {
	testutil.RequireRoot(t)
	deb := os.Getenv("BRIM_DEB")
	testutil.Require(t, deb != "", "BRIM_DEB not set (make test builds the package)")
	// Never touch an operator's installation: on a machine that has one,
	// skip (and fail in CI, which runs on fresh machines).
	testutil.Require(t, exec.Command("dpkg-query", "-W", "brim").Run() != nil, "a brim package is installed on this machine")
	paths := []string{"/usr/bin/brim", "/usr/bin/brim-shim", "/usr/bin/brim-experiment", "/lib/systemd/system/brim-agent.service",
		"/lib/systemd/system/brim-master.service", "/etc/brim/agent.toml", "/etc/brim/master.toml",
		"/usr/share/doc/brim/operators.md", "/var/lib/brim"}
	for _, p := range paths {
		_, err := os.Lstat(p)
		testutil.Require(t, err != nil, p+" exists before the install")
	}
	t.Cleanup(func() { _ = exec.Command("dpkg", "--purge", "brim").Run() })
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("dpkg", "-i", deb)
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	if st, err := os.Stat("/var/lib/brim"); err == nil && st.Mode().Perm() != 0o700 {
		t.Errorf("/var/lib/brim mode %v, want 0700", st.Mode().Perm())
	}
	want := strings.TrimSpace(run(brimBinary, "--version"))
	if got := strings.TrimSpace(run("/usr/bin/brim", "--version")); got != want {
		t.Errorf("installed brim --version = %q, want %q", got, want)
	}
	// The shipped configuration loads as it is.
	run("/usr/bin/brim", "agent", "config", "--config", "/etc/brim/agent.toml")
	run("/usr/bin/brim", "master", "config", "--config", "/etc/brim/master.toml")
	out, err := exec.Command("systemd-analyze", "verify", "/lib/systemd/system/brim-agent.service", "/lib/systemd/system/brim-master.service").CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("installed units: systemd-analyze verify: %v\n%s", err, out)
	}
	if exec.Command("getent", "passwd", "brim").Run() != nil {
		t.Error("no brim user for the master")
	}

	run("dpkg", "--purge", "brim")
	for _, p := range append(paths, "/etc/brim", "/usr/share/doc/brim") {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("left behind after purge: %s", p)
		}
	}
	if exec.Command("getent", "passwd", "brim").Run() == nil {
		t.Error("brim user left behind after purge")
	}
}
