// Package agent is the brim node agent service: it owns the agent's state
// dir (agent ID, a checkpoint of every container it launched), the resource
// accounting against the resources the operator gave it, container names and
// IDs, the retention of finished containers' sandboxes, recovery after a
// restart (including kill -9), and the local API (gRPC on a root-only unix
// socket, see agentpb) that `brim container …` talks to.
//
// It never touches cgroups, processes or mounts itself: everything that runs
// or isolates a container goes through the Runtime it is given (the
// containerizer, wired in cmd/brim). Shutting the agent down never kills a
// container; only Kill and Destroy do.
//
// Sentinels: ErrNotFound (no such container), ErrNameInUse (duplicate name),
// ErrInsufficientResources (wrapped by *InsufficientResourcesError, which
// names the resource), ErrInvalidArgument (bad request), ErrCommandNotFound
// (the command does not exist in the container's root filesystem),
// ErrNotRunning (the container has exited), ErrRunning (destroy of a running
// container without force), ErrAgentRunning (another agent serves the socket
// or uses the state dir), ErrNotSupported (the host cannot run the agent).
package agent
