//go:build !linux

package image

import (
	"fmt"
	"os"
)

// Open opens a file of the image as the container sees it: Linux only.
func (s *Store) Open(img Image, name string) (*os.File, error) {
	return nil, fmt.Errorf("open %s in image %s: %w", name, img.ID, ErrNotSupported)
}
