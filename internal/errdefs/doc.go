// Package errdefs defines the sentinels that mean the same thing in many
// brim packages, once, so that errors.Is works across package boundaries
// without translation (the model is cilium/ebpf's internal.ErrNotSupported,
// aliased in link, btf, ...). Packages alias them under their own names
// (`var ErrNotSupported = errdefs.ErrNotSupported`) and wrap them with
// context at the return site; the sentinel text is deliberately short.
//
// A sentinel that means something narrower wraps the wider one
// (`fmt.Errorf("%w in monitor", errdefs.ErrContainerNotFound)`), so that
// errors.Is matches both: the monitor's ErrNotFound ("not sampled yet")
// and the isolators' ErrNotFound (no state in that isolator for a
// container others may know). The master's and allocator's ErrNotFound
// (frameworks, agents, tasks) are no containers and stay their own.
//
// The package has no code besides the sentinels and never will.
package errdefs
