package agentd

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/cgtree"
	"github.com/brimnode/brim/internal/testutil"
)

// TestCleanupWithNothingMakesNothing: on a host where an agent never ran
// (the package's removal before any start), Cleanup has nothing to do and
// makes nothing on its way — no state dir, cgroup parent, bridge or netns
// dir — so a second run finds nothing either. A bad setting is a
// *ConfigError; one Cleanup does not use (a missing estimator plugin) is
// no obstacle.
func TestCleanupWithNothingMakesNothing(t *testing.T) {
	testutil.RequireRoot(t)
	cfg := DefaultConfig()
	dir := t.TempDir()
	cfg.StateDir = filepath.Join(dir, "state")
	cfg.Socket = filepath.Join(dir, "run", "agent.sock")
	cfg.CgroupParent = testutil.UniqueName("brim-test")
	t.Cleanup(func() { testutil.RemoveCgroupTree(t, "/"+cfg.CgroupParent) })
	cfg.Network.Enabled = true
	cfg.Network.Bridge = testutil.UniqueName("brn")
	cfg.Network.NetNSDir = filepath.Join(dir, "netns")
	cfg.Oversub.Estimator = "plugin:/nonexistent/estimator"
	var lines []string
	n, err := Cleanup(context.Background(), cfg, func(l string) { lines = append(lines, l) })
	if err != nil || n != 0 || len(lines) != 0 {
		t.Fatalf("cleanup of nothing: %d, %v, %q", n, err, lines)
	}
	for _, p := range []string{cfg.StateDir, cfg.Network.NetNSDir, filepath.Dir(cfg.Socket), filepath.Join("/sys/class/net", cfg.Network.Bridge)} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want it not made", p, err)
		}
	}
	if roots := cgtree.Roots("/" + cfg.CgroupParent); len(roots) > 0 {
		t.Errorf("cgroup parent made: %v", roots)
	}
	cfg.StateDir = "state"
	var ce *ConfigError
	if _, err := Cleanup(context.Background(), cfg, func(string) {}); !errors.As(err, &ce) || ce.Flag != "--state-dir" {
		t.Errorf("relative state dir: %v, want a *ConfigError for --state-dir", err)
	}
}

// TestCleanupRefusesOthersState: a state dir with no agent-id (a typo:
// --state-dir /var/lib) or one whose agent recorded another cgroup parent
// (a typo: --cgroup-parent system.slice) is refused with a *ConfigError,
// and nothing in it is touched.
func TestCleanupRefusesOthersState(t *testing.T) {
	testutil.RequireRoot(t)
	cfg := DefaultConfig()
	cfg.StateDir = t.TempDir()
	cfg.Socket = filepath.Join(cfg.StateDir, "agent.sock")
	cfg.CgroupParent = testutil.UniqueName("brim-test")
	// Someone else's: it must survive.
	theirs := filepath.Join(cfg.StateDir, "containers", "db")
	if err := os.MkdirAll(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	var ce *ConfigError
	if _, err := Cleanup(context.Background(), cfg, func(string) {}); !errors.As(err, &ce) || ce.Flag != "--state-dir" {
		t.Errorf("a state dir without agent-id: %v, want a *ConfigError for --state-dir", err)
	}
	for _, f := range []struct{ name, text string }{{"agent-id", "x\n"}, {cgroupParentFile, "/brim-other\n"}} {
		if err := os.WriteFile(filepath.Join(cfg.StateDir, f.name), []byte(f.text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Cleanup(context.Background(), cfg, func(string) {})
	if !errors.As(err, &ce) || ce.Flag != "--cgroup-parent" || !strings.Contains(err.Error(), "used /brim-other") {
		t.Errorf("another recorded cgroup parent: %v, want a *ConfigError for --cgroup-parent", err)
	}
	if _, err := os.Stat(theirs); err != nil {
		t.Errorf("a refused cleanup removed %s: %v", theirs, err)
	}
}

// TestRecordCgroupParentKeepsParentsTraversable: the record is written
// before the agent makes its state dir; made by the record, the dir's
// missing parents must stay traversable (0755) for a user namespace's
// root, as `brim dev --state-dir BASE` (agent under BASE/agent) needs —
// with 0700 parents a --userns launch was refused ("above the state dir
// is not traversable").
func TestRecordCgroupParentKeepsParentsTraversable(t *testing.T) {
	base := t.TempDir()
	state := filepath.Join(base, "dev", "agent")
	recordCgroupParent(state, "/brim-x", slog.New(slog.DiscardHandler))
	for dir, want := range map[string]os.FileMode{filepath.Join(base, "dev"): 0o755, state: 0o700} {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", dir, got, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(state, cgroupParentFile)); err != nil || string(b) != "/brim-x\n" {
		t.Errorf("record: %q, %v", b, err)
	}
}
