package procio

import "io"

// TermSize is a terminal's size in characters.
type TermSize struct {
	Width  uint16 `json:"width"`
	Height uint16 `json:"height"`
}

// Stdio is the caller's side of a session: where input comes from and
// output goes to.
type Stdio struct {
	// Stdin is read until EOF (then the process's stdin is closed); nil:
	// no input.
	Stdin io.Reader
	// Stdout and Stderr receive the output (a terminal's only on
	// Stdout); nil discards.
	Stdout, Stderr io.Writer
	// Resize carries the terminal's new sizes; nil: none.
	Resize <-chan TermSize
	// Started, when not nil, is called with the process's host pid once
	// it runs, before any output.
	Started func(pid int)
}
