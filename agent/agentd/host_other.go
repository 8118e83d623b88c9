//go:build !linux

package agentd

import (
	"fmt"
	"log/slog"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
)

// hostMemMiB cannot measure the host here: --resources must be given.
func hostMemMiB() (int64, error) {
	return 0, fmt.Errorf("give --resources: %w", agent.ErrNotSupported)
}

// cgroupConfig: no cgroup delegation here.
func cgroupConfig(cfg cgroups.Config, _ *slog.Logger) (cgroups.Config, error) { return cfg, nil }

// warnEphemeralOverlap: no ephemeral port range to read here.
func warnEphemeralOverlap(*slog.Logger, isolator.PortRange) {}

// onMemoryFS reports whether dir is on a memory file system: unknown
// here, so false.
func onMemoryFS(string) bool { return false }
