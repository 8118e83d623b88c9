//go:build !unix

package agent

// logOpenFlags: no such flags here; openLog's regular-file check remains.
const logOpenFlags = 0
