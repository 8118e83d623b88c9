//go:build !linux

package cgroups

import (
	"context"
	"fmt"

	"github.com/brimnode/brim/isolator"
)

// WatchParentMemory needs Linux.
func (i *Isolator) WatchParentMemory(ctx context.Context) (<-chan struct{}, error) {
	return nil, fmt.Errorf("watch parent memory: %w", isolator.ErrNotSupported)
}
