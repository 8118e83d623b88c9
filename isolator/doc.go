// Package isolator defines the Isolator contract that the containerizer runs
// for every container — prepare, isolate, update, usage, cleanup, recover —
// and the types that cross it: Limits (what a container may use, its port
// mappings included: PortMapping, ParsePort, CheckPorts, PortRange) and Statistics
// (what it used). Implementations live in sub-packages:
// isolator/cgroups (cgroup v1 and v2) and isolator/network (netns, veth,
// bridge, HTB).
//
// Optional abilities, found by type assertion: Verifier (Isolate only
// checks what the launcher applied), Warmer (makes the rest of a launch's
// kernel work cheaper) and Sandboxer (isolates a warm sandbox before its
// task is known and hands it to a container: the containerizer keeps
// warm sandboxes only when every isolator is one).
//
// Isolators decide no policy: they apply the limits they are given.
//
// Sentinels: ErrNotFound (no such container in this isolator),
// ErrNotSupported (the host lacks what the isolator needs), ErrBadPort (a
// malformed port mapping, or a host port outside the agent's PortRange),
// ErrPortInUse (a host port another container maps or a host process
// holds).
//
// ErrNotSupported is an alias of internal/errdefs.ErrNotSupported.
// ErrNotFound wraps internal/errdefs.ErrContainerNotFound, the one
// "container not found", so that errors.Is matches it across packages;
// errors.Is(err, isolator.ErrNotFound) stays narrower: a container the
// agent knows may have no state in one isolator (no network).
package isolator
