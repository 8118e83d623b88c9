//go:build !linux

package overlay

import "fmt"

// Mount mounts an overlay: Linux only.
func Mount(target string, _ []string, _, _ string) error {
	return fmt.Errorf("mount overlay on %s: %w", target, ErrNotSupported)
}
