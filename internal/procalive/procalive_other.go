//go:build !linux

package procalive

// Runs says every process runs: it can tell only on Linux.
func Runs(int) bool { return true }
