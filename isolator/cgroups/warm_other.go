//go:build !linux

package cgroups

// Warm implements isolator.Warmer; without Linux there is nothing to warm.
func (i *Isolator) Warm() (done func()) { return func() {} }
