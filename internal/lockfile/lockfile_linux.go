package lockfile

import (
	"errors"
	"fmt"
	"os"

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
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Close releases the lock.
func (l *Lock) Close() error { return l.f.Close() }
