package image

import (
	"fmt"

	"github.com/brimnode/brim/internal/overlay"
)

// Mount mounts the snapshot's overlay on target (an existing directory),
// in the caller's mount namespace (see internal/overlay: lowerdir+ one
// layer at a time, or mount(2) with Options before Linux 6.8). The caller
// unmounts it before Release.
func (s *Snapshot) Mount(target string) error {
	if err := overlay.Mount(target, s.Lower, s.Upper, s.Work); err != nil {
		return fmt.Errorf("mount snapshot %s: %w", s.ID, err)
	}
	return nil
}
