//go:build !unix

package agent

// diskFull: no errno to tell here; Info still reports the failing write.
func diskFull(error) bool { return false }

// freeBytes: not known here.
func freeBytes(string) int64 { return -1 }
