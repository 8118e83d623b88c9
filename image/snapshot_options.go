package image

import "github.com/brimnode/brim/internal/overlay"

// Options is the overlay mount data for the snapshot
// (`lowerdir=…,upperdir=…,workdir=…`), with the characters overlay
// treats specially escaped. The kernel takes at most a page of it: an
// image with many layers under a long root may not fit, and Mount then
// passes the layers one by one instead.
func (s *Snapshot) Options() string { return overlay.Options(s.Lower, s.Upper, s.Work) }
