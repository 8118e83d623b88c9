//go:build !linux

package containerizer

import (
	"context"
	"fmt"
	"os"
	"time"
)

// Launch returns an error wrapping ErrNotSupported: containers need Linux.
func (c *Containerizer) Launch(ctx context.Context, spec Spec) (*Info, error) {
	return nil, fmt.Errorf("launch %s: %w", spec.ID, ErrNotSupported)
}

// Recover returns an error wrapping ErrNotSupported: containers need Linux.
func (c *Containerizer) Recover(ctx context.Context) ([]*Info, error) {
	return nil, fmt.Errorf("recover: %w", ErrNotSupported)
}

func (c *Containerizer) teardown(ctx context.Context, ct *container) error {
	return ErrNotSupported
}

func (c *Containerizer) markLost(ctx context.Context, ct *container) (*ExitStatus, error) {
	return nil, ErrNotSupported
}

func (c *Containerizer) escalate(ctx context.Context, ct *container, cause error) (*ExitStatus, error) {
	return nil, ErrNotSupported
}

func waitShim(ctx context.Context, ct *container, d time.Duration) bool { return true }

func cloneShimBinary(path, tmpDir string) (*os.File, error) { return nil, ErrNotSupported }

type shimProc struct{}

func (c *Containerizer) refill()    {}
func (c *Containerizer) closePool() {}

type pool struct{}

type dataSpares struct{}

func newDataSpares(string) (*dataSpares, error) { return nil, nil }

func newPool(*Containerizer) *pool { return &pool{} }
func (p *pool) close()             {}

func memTotal() int64 { return 0 }

func staticBinary(string) bool { return false }

// PoolStats returns no warm sandboxes: containers need Linux.
func (c *Containerizer) PoolStats() PoolStats { return PoolStats{} }

// Teardown returns an error wrapping ErrNotSupported: containers need Linux.
func Teardown(ctx context.Context, stateDir, runDir string) ([]string, error) {
	return nil, fmt.Errorf("tear down containers: %w", ErrNotSupported)
}

// DiskUsage returns an error wrapping ErrNotSupported: containers need Linux.
func (c *Containerizer) DiskUsage(_ context.Context, id string) (used, limit int64, enforced bool, err error) {
	return 0, 0, false, fmt.Errorf("disk usage %s: %w", id, ErrNotSupported)
}
