//go:build !linux

package executor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
)

// RunOptions configure Run.
type RunOptions struct {
	Dir     string
	Report  io.WriteCloser
	GoAhead io.ReadCloser
	Log     *slog.Logger
}

// Run returns an error wrapping ErrNotSupported: containers need Linux.
func Run(ctx context.Context, opts RunOptions) error {
	return fmt.Errorf("run shim: %w", ErrNotSupported)
}
