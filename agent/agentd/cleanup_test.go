package agentd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
