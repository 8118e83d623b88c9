package monitor

import (
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

type selfUsage struct {
	user, system float64 // seconds
	rss          uint64  // bytes
}

// readSelf returns the process's own cpu time and resident memory.
func readSelf() (selfUsage, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return selfUsage{}, fmt.Errorf("getrusage: %w", err)
	}
	s := selfUsage{
		user:   float64(ru.Utime.Sec) + float64(ru.Utime.Usec)/1e6,
		system: float64(ru.Stime.Sec) + float64(ru.Stime.Usec)/1e6,
	}
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return s, fmt.Errorf("read statm: %w", err)
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return s, fmt.Errorf("parse statm %q: %w", b, ErrNotSupported)
	}
	pages, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		return s, fmt.Errorf("parse statm: %w", err)
	}
	s.rss = pages * uint64(os.Getpagesize())
	return s, nil
}
