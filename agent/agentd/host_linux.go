package agentd

import (
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/isolator"
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

// warnEphemeralOverlap logs when the port mappings' range overlaps the
// kernel's ephemeral port range (net.ipv4.ip_local_port_range): the
// kernel hands those ports to the host's outgoing connections, and a
// mapping of one that is in use is refused as held by a host process.
func warnEphemeralOverlap(log *slog.Logger, r isolator.PortRange) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || int(r.Last) < lo || int(r.First) > hi {
		return
	}
	log.Warn("--network-port-range overlaps the kernel's ephemeral ports (net.ipv4.ip_local_port_range): a mapping of a port an outgoing connection uses is refused",
		"port_range", r.String(), "ephemeral", fmt.Sprintf("%d-%d", lo, hi))
}

// onMemoryFS reports whether dir (or, before it exists, its nearest
// existing parent) is on tmpfs or ramfs.
func onMemoryFS(dir string) bool {
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err == nil {
			return st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
		}
		if p == "/" {
			return false
		}
	}
}
