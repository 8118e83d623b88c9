package errdefs

import "errors"

var (
	// ErrNotSupported: this host (operating system, kernel, permissions)
	// cannot do what was asked. Aliased by agent, bpf, containerizer,
	// estimator, executor, isolator, monitor, qos and internal/lockfile; a
	// factory returning it is skipped unless the operator asked for it.
	ErrNotSupported = errors.New("not supported on this host")
	// ErrContainerNotFound: a container ID or name the agent and its
	// containerizer do not know. Aliased as agent.ErrNotFound and
	// containerizer.ErrNotFound; wrapped by the narrower
	// isolator.ErrNotFound and monitor.ErrNotFound.
	ErrContainerNotFound = errors.New("container not found")
)
