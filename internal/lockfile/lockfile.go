package lockfile

import "errors"

// ErrLocked is returned when another holder has the lock.
var ErrLocked = errors.New("locked by another process")

// ErrNotSupported is returned on systems without flock support here.
var ErrNotSupported = errors.New("file locks not supported on this system")
