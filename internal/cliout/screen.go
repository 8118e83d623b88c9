package cliout

import (
	"strings"
	"unicode/utf8"
)

// ANSI sequences of a full-screen view: Enter clears the screen and hides
// the cursor, Leave shows it again (the caller writes it however the view
// ends).
const (
	ScreenEnter = "\x1b[2J\x1b[?25l"
	ScreenLeave = "\x1b[?25h"
)

// Frame is one redraw of a full-screen view (brim container stats --watch
// on a terminal), drawn over the previous one rather than below it: the
// cursor sent home, each line cut at width columns and cleared to its
// end, at most height-1 lines (the bottom row stays empty, so that the
// terminal never scrolls), then the rest of the screen cleared. A width
// or height of 0 (unknown) does not limit.
func Frame(text string, width, height int) []byte {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if height > 1 && len(lines) > height-1 {
		lines = lines[:height-1]
	}
	var b strings.Builder
	b.WriteString("\x1b[H")
	for _, l := range lines {
		if width > 0 && utf8.RuneCountInString(l) > width {
			l = string([]rune(l)[:width])
		}
		b.WriteString(l)
		b.WriteString("\x1b[K\n") // a terminal returns the carriage (onlcr)
	}
	b.WriteString("\x1b[J")
	return []byte(b.String())
}
