//go:build !linux

package cgroups

import (
	"context"
	"fmt"

	"github.com/brimnode/brim/isolator"
)

// OOMEvents needs Linux (eventfd, inotify): it returns an error wrapping
// isolator.ErrNotSupported.
func (i *Isolator) OOMEvents(ctx context.Context, id string) (<-chan struct{}, error) {
	return nil, fmt.Errorf("watch oom of %s: %w", id, isolator.ErrNotSupported)
}
