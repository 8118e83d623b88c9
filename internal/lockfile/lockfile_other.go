//go:build !linux

package lockfile

import "fmt"

// Lock is a held lock; never returned on this system.
type Lock struct{}

// File returns an error wrapping ErrNotSupported.
func File(path string) (*Lock, error) { return nil, fmt.Errorf("lock %s: %w", path, ErrNotSupported) }

// Dir returns an error wrapping ErrNotSupported.
func Dir(path string) (*Lock, error) { return nil, fmt.Errorf("lock %s: %w", path, ErrNotSupported) }

// Close does nothing.
func (*Lock) Close() error { return nil }

// Holder knows no holder here.
func Holder(path string) int { return 0 }
