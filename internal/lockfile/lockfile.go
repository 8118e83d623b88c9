package lockfile

import (
	"errors"

	"github.com/brimnode/brim/internal/errdefs"
)

// ErrLocked is returned when another holder has the lock.
var ErrLocked = errors.New("locked by another process")

// ErrNotSupported is returned on systems without flock support here
// (internal/errdefs.ErrNotSupported, the one "not supported").
var ErrNotSupported = errdefs.ErrNotSupported
