package lockfile

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Lock is a held lock. Close releases it; it is not safe for concurrent
// Close calls.
type Lock struct{ f *os.File }

// File creates path (mode 0600) if needed and locks it without waiting.
// It returns an error wrapping ErrLocked when another holder has it.
func File(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return lock(f, path)
}

// Dir locks an existing directory without waiting (e.g. a cgroup, whose
// directory can hold no file of ours). It returns an error wrapping
// ErrLocked when another holder has it.
func Dir(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return lock(f, path)
}

func lock(f *os.File, path string) (*Lock, error) {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		var st unix.Stat_t
		pid := 0
		if unix.Fstat(int(f.Fd()), &st) == nil {
			pid = holder(st, "/proc/locks")
		}
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) && pid > 0 {
			return nil, fmt.Errorf("lock %s: held by pid %d: %w", path, pid, ErrLocked)
		}
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Close releases the lock.
func (l *Lock) Close() error { return l.f.Close() }

// Holder returns the PID of the process holding a flock on path, as
// /proc/locks lists it (the PID in this process's PID namespace of the
// process that took the lock), or 0 when there is none or it cannot be
// told.
func Holder(path string) int {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0
	}
	return holder(st, "/proc/locks")
}

// holder finds the FLOCK entry of the file st describes in locks (the
// format of /proc/locks: "1: FLOCK  ADVISORY  WRITE 4540 fe:00:9980687 0
// EOF", the device's major and minor in hex).
func holder(st unix.Stat_t, locks string) int {
	f, err := os.Open(locks)
	if err != nil {
		return 0
	}
	defer f.Close()
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// A waiter's line has "->" after the ordinal.
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != want {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil && pid > 0 {
			return pid
		}
	}
	return 0
}
