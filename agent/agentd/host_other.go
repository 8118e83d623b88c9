//go:build !linux

package agentd

import (
	"fmt"

	"github.com/brimnode/brim/agent"
)

// hostMemBytes returns an error wrapping agent.ErrNotSupported: the agent
// runs containers on Linux only (the package builds elsewhere so that the
// library packages do).
func hostMemBytes() (int64, error) {
	return 0, fmt.Errorf("measure host memory: %w", agent.ErrNotSupported)
}

// signalNum returns 0: no container ever exits here.
func signalNum(string) int { return 0 }
