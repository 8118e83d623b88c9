//go:build !linux

package image

import (
	"context"
	"fmt"
	"io"
)

func unpack(context.Context, string, io.Reader) (unpackStats, error) {
	return unpackStats{}, fmt.Errorf("unpack layer: %w", ErrNotSupported)
}

func syncFS(string) error { return fmt.Errorf("sync: %w", ErrNotSupported) }
