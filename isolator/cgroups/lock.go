package cgroups

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/brimnode/brim/internal/lockfile"
)

// ErrParentInUse is returned by LockParent when another process (a live
// agent) holds the parent.
var ErrParentInUse = errors.New("cgroup parent in use by another agent")

// LockParent takes an exclusive lock on the parent group (its directory in
// the main hierarchy, made if needed) until the returned Closer is closed
// or the process ends, even by kill -9. A second agent pointed at the same
// parent is refused with ErrParentInUse instead of taking the first one's
// containers for orphans and removing them.
func (i *Isolator) LockParent() (io.Closer, error) {
	dir := i.dir(i.mainController(), i.parent)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock cgroup parent %s: %w", i.parent, err)
	}
	l, err := lockfile.Dir(dir)
	if errors.Is(err, lockfile.ErrLocked) {
		return nil, fmt.Errorf("cgroup parent %s (%s): %w (%w)", i.parent, dir, ErrParentInUse, err)
	}
	if err != nil {
		return nil, fmt.Errorf("lock cgroup parent %s: %w", i.parent, err)
	}
	return l, nil
}
