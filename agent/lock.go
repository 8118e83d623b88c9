package agent

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/brimnode/brim/internal/lockfile"
)

// lockStateDir locks STATE/lock; the kernel drops the lock when the agent
// dies, even by kill -9. The error wraps ErrAgentRunning (and
// lockfile.ErrLocked) when another agent holds it, ErrNotSupported off
// Linux.
func lockStateDir(dir string) (*lockfile.Lock, error) {
	l, err := lockfile.File(filepath.Join(dir, "lock"))
	if errors.Is(err, lockfile.ErrLocked) {
		return nil, fmt.Errorf("%w: state dir %s: %w", ErrAgentRunning, dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("lock state dir: %w", err)
	}
	return l, nil
}
