//go:build !linux || !amd64

package bpf

import (
	"context"
	"fmt"
)

// Monitor is the eBPF scheduler and OOM monitor; only linux/amd64 has its
// generated objects. Here Load always fails with ErrNotSupported.
type Monitor struct{}

// Load returns an error wrapping ErrNotSupported on this platform.
func Load(Options) (*Monitor, error) {
	return nil, fmt.Errorf("load bpf monitor: %w: no objects for this platform", ErrNotSupported)
}

// Source returns SourceEBPF.
func (m *Monitor) Source() string { return SourceEBPF }

// Track returns ErrNotSupported.
func (m *Monitor) Track(string) (uint64, error) { return 0, ErrNotSupported }

// Untrack returns ErrNotSupported.
func (m *Monitor) Untrack(uint64) error { return ErrNotSupported }

// Read returns ErrNotSupported.
func (m *Monitor) Read(map[uint64]CgroupStats) error { return ErrNotSupported }

// ReadOOM returns ErrNotSupported.
func (m *Monitor) ReadOOM(context.Context) (OOMEvent, error) { return OOMEvent{}, ErrNotSupported }

// Stats returns ErrNotSupported.
func (m *Monitor) Stats() ([]ProgramStats, error) { return nil, ErrNotSupported }

// Close does nothing.
func (m *Monitor) Close() error { return nil }
