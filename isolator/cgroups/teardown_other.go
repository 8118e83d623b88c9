//go:build !linux

package cgroups

import (
	"context"
	"fmt"

	"github.com/brimnode/brim/isolator"
)

// Teardown returns an error wrapping isolator.ErrNotSupported.
func (i *Isolator) Teardown(ctx context.Context, own func(child string) bool) (TeardownReport, error) {
	return TeardownReport{}, fmt.Errorf("tear down cgroup parent: %w", isolator.ErrNotSupported)
}
