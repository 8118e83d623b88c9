package agentd

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// hostMemBytes is the host's total RAM.
func hostMemBytes() (int64, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, fmt.Errorf("measure host memory: %w", err)
	}
	return int64(si.Totalram) * int64(si.Unit), nil
}

// signalNum is the number of signal name ("SIGKILL"), 0 if unknown.
func signalNum(name string) int { return int(unix.SignalNum(name)) }
