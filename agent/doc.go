// Package agent is the brim node agent service: it owns the agent's state
// dir (agent ID, a checkpoint of every container it launched), the resource
// accounting against the resources the operator gave it, container names and
// IDs, the retention of finished containers' sandboxes, recovery after a
// restart (including kill -9), and the operations the local API serves:
// Start (recovery, the loops, Ready), Shutdown, and the container, image
// and node methods that agent/agentserver, the local API (gRPC on a
// root-only unix socket, see agentpb), calls over its own interface. It
// knows no gRPC and no socket.
//
// The accounting is a ledger (ledger.go) over the resource model of package
// resources: one claim per container, reserved before the launch and
// committed or cancelled after it, resized in two steps likewise, released
// at exit, adopted without admission at recovery. Resources is only the
// API's view of a container's cpus, mem and net_bw limits. A request for a
// resource the agent has no total of is refused, as in Mesos.
//
// It decides who a task runs as: the launch's user or Options.DefaultUser
// (nobody), resolved in the host's user database; root (uid 0) only with
// Options.AllowRoot, the launch's Spec.RunAsRoot (the master's run_as_root
// ACL) or in a user namespace (Spec.UserNS, Options.UserNS, mapped onto
// Options.UserNSRange), else ErrRootNotAllowed (docs/security.md).
//
// Besides run, resize, kill and destroy it pauses a container (the cgroup
// freezer, through Options.Cgroups; a user's pause is checkpointed, ordered
// against kills, and wins over the QoS controller's thaws: pause.go),
// restarts one (its spec again under the same ID and name with the same
// sandbox: restart.go), and lists its processes (Top). A container's cpus
// limit it as its cpu limit mode says (Spec.CPUMode, else
// Options.CPUMode).
//
// Recovery quarantines a checkpoint record it cannot read instead of
// failing: the file stays untouched, the container it names is kept (never
// destroyed as an orphan), reported in Info and listed with
// Container.Quarantine set; only Destroy (rm) removes it with its record.
//
// With Options.Oversub it also runs oversubscription (oversub.go): the
// monitor over its own containers, the resource estimator loop (the
// revocable pool that revocable containers are admitted against, the
// estimate forwarded to the master through Oversub.Forward or SetForward),
// the QoS loop whose corrections it applies (throttle, freeze and thaw
// through the CgroupActuator it is given, kill through KillWithReason with
// reason CONTAINER_PREEMPTED), application latency reports
// (ReportLatency), the oversubscription status (Oversubscription, `brim
// agent explain`) and the Prometheus registry (Metrics).
//
// It never touches cgroups, processes or mounts itself: everything that runs
// or isolates a container goes through the Runtime (the containerizer), the
// CgroupActuator and ContainerCgroups (the cgroups isolator) it is given,
// wired in agent/agentd (it reads /proc for Top);
// it names no concrete estimator or QoS controller. Shutting the agent down
// never kills a container; only Kill, Destroy and QoS kills do.
//
// Sentinels: ErrNotFound (no such container), ErrNameInUse (duplicate name),
// ErrInsufficientResources (wrapped by *InsufficientResourcesError, which
// names the short resources, those the agent does not offer at all and, for
// revocable containers, the revocable pool), ErrInvalidArgument (bad
// request, an unknown user, or an update of a quarantined container),
// ErrRootNotAllowed (a root task without Options.AllowRoot), ErrCommandNotFound
// (the command does not exist in the container's root filesystem),
// ErrNotRunning (the container has exited), ErrRunning (destroy of a running
// container without force, or of one whose launch or restart is under way),
// ErrPaused and ErrNotPaused (a pause of a paused container, an unpause of
// one not paused), ErrTaskContainer (a restart of a master task's
// container), ErrStillExiting (a kill the container outlived), ErrAgentRunning (another agent serves the socket
// or uses the state dir), ErrNotSupported (the host cannot run the agent;
// ReportLatency without oversubscription; a QoS correction without a
// CgroupActuator; a pause or top without ContainerCgroups).
//
// ErrNotSupported and ErrNotFound are aliases of internal/errdefs' (the
// latter is containerizer.ErrNotFound too), so errors.Is needs no
// translation across the agent and its runtime.
package agent
