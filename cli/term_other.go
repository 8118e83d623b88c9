//go:build !linux

package cli

import "os"

// terminalSize reports no terminal: the full-screen view is Linux's.
func terminalSize(*os.File) (cols, rows int, ok bool) { return 0, 0, false }

// resizeSignals: none off Linux.
var resizeSignals []os.Signal
