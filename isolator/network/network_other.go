//go:build !linux

package network

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/brimnode/brim/isolator"
)

// Isolator is the network isolator; it works only on Linux.
type Isolator struct{}

var _ isolator.Isolator = (*Isolator)(nil)

// New returns an error wrapping isolator.ErrNotSupported: namespaces, veth
// and HTB are Linux's.
func New(cfg Config) (*Isolator, error) {
	return nil, fmt.Errorf("network isolator: %w", isolator.ErrNotSupported)
}

func errNS() error { return fmt.Errorf("network isolator: %w", isolator.ErrNotSupported) }

// Name implements isolator.Isolator.
func (i *Isolator) Name() string { return "network" }

// Address is not supported off Linux.
func (i *Isolator) Address(id string) (netip.Addr, error) { return netip.Addr{}, errNS() }

// Prepare is not supported off Linux.
func (i *Isolator) Prepare(ctx context.Context, id string, limits isolator.Limits, launch *isolator.Launch) error {
	return errNS()
}

// Isolate is not supported off Linux.
func (i *Isolator) Isolate(ctx context.Context, id string, pid int) error { return errNS() }

// VerifiesOnly implements isolator.Verifier.
func (i *Isolator) VerifiesOnly() bool { return true }

// Update is not supported off Linux.
func (i *Isolator) Update(ctx context.Context, id string, limits isolator.Limits) error {
	return errNS()
}

// Usage is not supported off Linux.
func (i *Isolator) Usage(ctx context.Context, id string, stats *isolator.Statistics) error {
	return errNS()
}

// Cleanup is not supported off Linux.
func (i *Isolator) Cleanup(ctx context.Context, id string) error { return errNS() }

// Release is not supported off Linux.
func (i *Isolator) Release(ctx context.Context, id string) error { return errNS() }

// Recover is not supported off Linux.
func (i *Isolator) Recover(ctx context.Context, known map[string]isolator.Limits) error {
	return errNS()
}

// Uninstall is not supported off Linux.
func (i *Isolator) Uninstall(ctx context.Context) error { return errNS() }

// Close is not supported off Linux.
func (i *Isolator) Close() error { return errNS() }

// NotHeld is not supported off Linux.
func (i *Isolator) NotHeld() []error { return nil }

// Unsaved is not supported off Linux: nothing is recorded.
func (i *Isolator) Unsaved() map[string]error { return nil }

// Teardown returns an error wrapping isolator.ErrNotSupported.
func Teardown(cfg Config) ([]string, error) { return nil, errNS() }
