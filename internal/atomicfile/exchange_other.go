//go:build !linux

package atomicfile

import "errors"

// oNoFollow: not every system has O_NOFOLLOW (brim's agent runs on Linux).
const oNoFollow = 0

// errNoExchange: the file system cannot exchange two names atomically.
var errNoExchange = errors.New("no atomic exchange of names")

// exchange is not available here: Dir renames instead.
func exchange(a, b string) error { return errNoExchange }
