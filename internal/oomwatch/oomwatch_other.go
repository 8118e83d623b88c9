//go:build !linux

package oomwatch

import (
	"context"
	"errors"
)

// V1 needs Linux (eventfd).
func V1(ctx context.Context, dir string) (<-chan struct{}, error) {
	return nil, errors.New("oom watch needs Linux")
}
