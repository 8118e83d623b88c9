package agentd

import (
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/isolator/cgroups"
)

// hostMemMiB is the host's RAM in MiB.
func hostMemMiB() (int64, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, err
	}
	return int64(si.Totalram) * int64(si.Unit) >> 20, nil
}

// signalNum is the number of a signal named like "SIGKILL"; 0 if unknown.
func signalNum(name string) int { return int(unix.SignalNum(name)) }

// cgroupConfig is the cgroup isolator's configuration. On a cgroup v2 host
// where the parent lies inside the agent's own cgroup (a systemd unit with
// Delegate=yes, --cgroup-parent /system.slice/brim-agent.service/containers)
// the agent first moves itself into the leaf <unit>/agent, so that the unit
// holds no process and may pass controllers on, and the isolator enables
// them from the unit down to the parent, nowhere above it.
func cgroupConfig(cfg cgroups.Config, log *slog.Logger) (cgroups.Config, error) {
	if _, err := os.Stat(filepath.Join(cgroups.DefaultRoot, "cgroup.controllers")); err != nil {
		return cfg, nil // v1 or hybrid
	}
	own, err := cgroups.OwnV2(0)
	if err != nil {
		return cfg, nil
	}
	if path.Base(own) == agentLeaf {
		own = path.Dir(own) // restarted inside the leaf
	}
	if own == "/" || !strings.HasPrefix(cfg.Parent, own+"/") {
		return cfg, nil
	}
	unit, err := cgroups.EnterLeafV2(cgroups.DefaultRoot, 0, agentLeaf)
	if err != nil {
		return cfg, fmt.Errorf("cgroup delegation: %w", err)
	}
	log.Info("cgroup v2 delegation", "unit", unit, "agent", path.Join(unit, agentLeaf), "parent", cfg.Parent)
	cfg.Delegated = unit
	return cfg, nil
}

// agentLeaf is the leaf of its delegated unit the agent moves into.
const agentLeaf = "agent"
