package atomicfile

import (
	"errors"

	"golang.org/x/sys/unix"
)

const oNoFollow = unix.O_NOFOLLOW

// errNoExchange: the file system cannot exchange two names atomically.
var errNoExchange = errors.New("no atomic exchange of names")

// exchange swaps the files named a and b atomically (renameat2
// RENAME_EXCHANGE): fs.ErrNotExist when one is missing, errNoExchange
// where the file system has no such rename.
func exchange(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return errNoExchange
	}
	return err
}
