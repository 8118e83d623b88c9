//go:build !linux

package cgroups

import (
	"fmt"

	"github.com/brimnode/brim/isolator"
)

func diskDevices(sys string, paths []string) ([]string, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	return nil, fmt.Errorf("io paths: %w", isolator.ErrNotSupported)
}
