package cli

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// terminalSize returns the columns and rows of the terminal f is, or ok
// false when f is not a terminal.
func terminalSize(f *os.File) (cols, rows int, ok bool) {
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return 0, 0, false
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0, true
	}
	return int(ws.Col), int(ws.Row), true
}

// resizeSignals are the signals of a terminal's size change.
var resizeSignals = []os.Signal{syscall.SIGWINCH}
