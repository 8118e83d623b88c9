//go:build !linux

package dirquota

import "fmt"

// Projects is Linux's (xfs).
type Projects struct{}

// Open fails: Linux only.
func Open(dir string) (*Projects, error) {
	return nil, fmt.Errorf("project quotas on %s: %w", dir, ErrNotSupported)
}

// Close does nothing.
func (p *Projects) Close() error { return nil }

// Reserve does nothing.
func (p *Projects) Reserve(uint32) {}

// Next returns FirstProject.
func (p *Projects) Next() uint32 { return FirstProject }

// Limit fails: Linux only.
func (p *Projects) Limit(uint32, int64, ...string) error { return ErrNotSupported }

// Clear fails: Linux only.
func (p *Projects) Clear(uint32) error { return ErrNotSupported }

// Usage fails: Linux only.
func (p *Projects) Usage(uint32) (int64, error) { return 0, ErrNotSupported }

// ProjectID fails: Linux only.
func ProjectID(string) (uint32, error) { return 0, ErrNotSupported }

// Usage fails: Linux only.
func Usage(dir string) (int64, error) {
	return 0, fmt.Errorf("disk usage of %s: %w", dir, ErrNotSupported)
}
