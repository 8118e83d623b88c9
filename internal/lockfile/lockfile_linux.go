package lockfile

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/internal/procalive"
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

// deadHolderWait bounds how long lock waits for a lock whose taker is
// dead: a child it forked holds a copy of the descriptor until its exec
// (O_CLOEXEC) closes it, or until it exits.
const deadHolderWait = 5 * time.Second

func lock(f *os.File, path string) (*Lock, error) {
	deadline := time.Now().Add(deadHolderWait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return &Lock{f: f}, nil
		}
		var st unix.Stat_t
		pid, listed := 0, false
		if unix.Fstat(int(f.Fd()), &st) == nil {
			pid, listed = holder(st, "/proc/locks")
		}
		// A lock whose taker is dead (the kernel lists its pid as 0 once
		// it is reaped) is held by a descriptor it left in a child forked
		// just before it died (a kill -9 during a shim's fork): that copy
		// goes at the child's exec. Wait for it rather than take the dead
		// agent for a live one.
		// Not listed: released between the try and the look (that
		// child's exec just closed it): try again.
		dead := listed && (pid == 0 || !procalive.Runs(pid))
		if errors.Is(err, unix.EWOULDBLOCK) && (dead || !listed) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		return nil, lockErr(f, path, pid, dead, err)
	}
}

// lockErr closes f and says why path could not be locked.
func lockErr(f *os.File, path string, pid int, dead bool, err error) error {
	_ = f.Close()
	switch {
	case errors.Is(err, unix.EWOULDBLOCK) && dead:
		return fmt.Errorf("lock %s: its taker is gone and a process it started still holds it: %w", path, ErrLocked)
	case errors.Is(err, unix.EWOULDBLOCK) && pid > 0:
		return fmt.Errorf("lock %s: held by pid %d: %w", path, pid, ErrLocked)
	case errors.Is(err, unix.EWOULDBLOCK):
		return fmt.Errorf("lock %s: %w", path, ErrLocked)
	}
	return fmt.Errorf("lock %s: %w", path, err)
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
	pid, _ := holder(st, "/proc/locks")
	return pid
}

// holder finds the FLOCK entry of the file st describes in locks (the
// format of /proc/locks: "1: FLOCK  ADVISORY  WRITE 4540 fe:00:9980687 0
// EOF", the device's major and minor in hex).
func holder(st unix.Stat_t, locks string) (pid int, listed bool) {
	f, err := os.Open(locks)
	if err != nil {
		return 0, false
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
		// The kernel lists 0 once the lock's taker is gone (or lives in
		// another PID namespace).
		if pid, err := strconv.Atoi(fields[4]); err == nil && pid >= 0 {
			return pid, true
		}
	}
	return 0, false
}
