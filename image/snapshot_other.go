//go:build !linux

package image

import "fmt"

// Mount mounts the snapshot's overlay on target: Linux only.
func (s *Snapshot) Mount(target string) error {
	return fmt.Errorf("mount snapshot %s: %w", s.ID, ErrNotSupported)
}
