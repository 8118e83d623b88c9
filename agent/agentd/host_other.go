//go:build !linux

package agentd

import (
	"fmt"

	"github.com/brimnode/brim/agent"
)

// hostMemMiB cannot measure the host here: --resources must be given.
func hostMemMiB() (int64, error) {
	return 0, fmt.Errorf("give --resources: %w", agent.ErrNotSupported)
}

// signalNum knows no signal names here.
func signalNum(string) int { return 0 }
