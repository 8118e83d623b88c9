package agent

import (
	"fmt"
	"syscall"
)

// FDsPerContainer is about how many descriptors the agent holds open per
// running container (stat files kept open for sampling, the OOM watch,
// the shim connection): the agent's open-file limit divided by it is the
// number of containers it can follow (docs/security.md).
const FDsPerContainer = 15

// RaiseFileLimit raises the agent's soft RLIMIT_NOFILE to its hard limit
// and returns the resulting limit. The Go runtime does the same at start
// since Go 1.19 and restores the original soft limit in the processes it
// starts (shims, hence containers), which syscall.Setrlimit would turn
// off: it is only called when the soft limit is still below the hard one.
func RaiseFileLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("read open-file limit: %w", err)
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			return 0, fmt.Errorf("raise open-file limit to %d: %w", l.Max, err)
		}
	}
	return l.Cur, nil
}
