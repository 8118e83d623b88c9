package agent

import (
	"context"
	"time"

	"github.com/brimnode/brim/internal/exitstatus"
	"github.com/brimnode/brim/internal/subid"
	"github.com/brimnode/brim/isolator"
)

// Runtime runs containers for the agent: the containerizer, adapted in
// cmd/brim. Methods return errors wrapping ErrNotFound for an unknown ID,
// ErrCommandNotFound from Launch when the command is missing, ErrNotRunning
// for Update/Kill of an exited container. Safe for concurrent use.
type Runtime interface {
	// Launch starts a container and returns once its user process runs; it
	// cleans up everything itself when it fails.
	Launch(ctx context.Context, spec LaunchSpec) (*RuntimeInfo, error)
	// Wait blocks until the container has exited and returns how.
	Wait(ctx context.Context, id string) (*ExitStatus, error)
	// Kill sends SIGTERM, waits up to grace, then SIGKILLs the container.
	Kill(ctx context.Context, id string, grace time.Duration) error
	// Update resizes a running container.
	Update(ctx context.Context, id string, limits isolator.Limits) error
	// Usage samples a running container.
	Usage(ctx context.Context, id string) (*isolator.Statistics, error)
	// Destroy removes an exited container's cgroups, state and sandbox.
	Destroy(ctx context.Context, id string) error
	// Recover reattaches to every container the runtime finds after a
	// restart, running or exited, and returns them.
	Recover(ctx context.Context) ([]*RuntimeInfo, error)
}

// WarmSandboxes is what a runtime's warm sandboxes (containers made
// ahead of launches) hold: they count against nothing a task needs,
// their memory is reported.
type WarmSandboxes struct {
	// Off: the runtime keeps none.
	Off bool
	// Ready and Filling count the sandboxes ready and being made.
	Ready, Filling int
	// MemoryBytes is what the ready ones hold (proportional set size).
	MemoryBytes int64
	// Warm and Cold count the launches of shapes sandboxes serve that
	// took one and that found none.
	Warm, Cold uint64
}

// warmReporter is an optional ability of a Runtime: its warm sandboxes.
type warmReporter interface {
	WarmSandboxes() WarmSandboxes
}

// LaunchSpec is what the agent asks the Runtime to run.
type LaunchSpec struct {
	ID      string
	Name    string
	Command []string
	Env     []string
	Cwd     string
	Rootfs  string // empty: the host root, read-only
	User    string // "UID:GID", resolved by the agent
	// UserNS: a user namespace mapped onto this range (User is then
	// the container's IDs inside it); nil: none.
	UserNS *subid.Range
	Limits isolator.Limits
	Labels map[string]string
	// LogMaxSize and LogMaxFiles bound the container's output on disk
	// (resolved by the agent: never 0).
	LogMaxSize  int64
	LogMaxFiles int
	// Image is the ID of an image in the agent's store to run on (Rootfs
	// is then empty), held until Launch returns; ReadWrite makes its root
	// writable. Command, Env, Cwd and User have its defaults already.
	Image     string
	ReadWrite bool
	// Sandbox and LogDir, when set, are a previous run's sandbox and log
	// directories, to be the new run's (Agent.Restart): the runtime moves
	// them into place, the log going on where it ended, and back when the
	// launch fails.
	Sandbox, LogDir string
	// Stdin, Tty and TtySize: see Spec.
	Stdin, Tty bool
	TtySize    TermSize
}

// RuntimeInfo describes a container as the Runtime sees it.
type RuntimeInfo struct {
	ID         string
	Running    bool
	Pid        int
	StartedAt  time.Time
	Exit       *ExitStatus // set once the container has exited
	SandboxDir string      // the container's /mnt/sandbox
	LogDir     string      // its output (internal/containerlog); older containers: SandboxDir's stdout and stderr
	Address    string      // IPv4 address with networking, "" without
	// CgroupPath is the container's cgroup path below each hierarchy's
	// root; "" means <CgroupParent>/<ID>. A container made from a warm
	// sandbox on cgroup v2 keeps the sandbox's group.
	CgroupPath string
}

// ExitStatus is how a container ended: internal/exitstatus.Status, the
// one definition (the shim records it, the containerizer returns it, the
// checkpoint keeps it).
type ExitStatus = exitstatus.Status

// ExitReason is ExitStatus.Reason's type: internal/exitstatus.Reason, the
// one vocabulary of container exit reasons.
type ExitReason = exitstatus.Reason

// Exit reasons the agent sets or reads (aliases of internal/exitstatus).
const (
	// ReasonLost: the container vanished while the agent was down and its
	// exit status could not be learned.
	ReasonLost = exitstatus.ReasonLost
	// ReasonMemoryLimit: the container was OOM-killed at its memory limit.
	ReasonMemoryLimit = exitstatus.ReasonMemoryLimit
	// ReasonKilled: the container was killed on request.
	ReasonKilled = exitstatus.ReasonKilled
	// ReasonPreempted: a QoS correction or a safety guard killed the
	// revocable container (qos.ReasonPreempted is the same string).
	ReasonPreempted = exitstatus.ReasonPreempted
	// ReasonDiskLimit: the container wrote more to its read-write image
	// root than its disk limit, measured where the file system has no
	// project quotas; the agent killed it.
	ReasonDiskLimit = exitstatus.ReasonDiskLimit
	// ReasonRestartFailed: a restart stopped the container and could not
	// run it again (Message says why).
	ReasonRestartFailed = exitstatus.ReasonRestartFailed
)
