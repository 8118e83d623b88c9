//go:build !linux

package agent

import "fmt"

// FDsPerContainer: see rlimit_linux.go.
const FDsPerContainer = 15

// RaiseFileLimit returns an error wrapping ErrNotSupported off Linux.
func RaiseFileLimit() (uint64, error) {
	return 0, fmt.Errorf("raise open-file limit: %w", ErrNotSupported)
}
