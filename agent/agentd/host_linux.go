package agentd

import "golang.org/x/sys/unix"

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
