package isolator

import (
	"context"
	"fmt"
	"github.com/brimnode/brim/internal/errdefs"
	"time"
)

var (
	// ErrNotFound is returned for a container the isolator does not know.
	// It wraps internal/errdefs.ErrContainerNotFound, the one "container
	// not found": errors.Is matches it with the agent's and the
	// containerizer's, while isolator.ErrNotFound itself stays narrower
	// (no state in this isolator).
	ErrNotFound = fmt.Errorf("%w in isolator", errdefs.ErrContainerNotFound)
	// ErrNotSupported is returned when the host lacks a kernel feature the
	// isolator needs (wrapped with the detail); it is
	// internal/errdefs.ErrNotSupported, the one "not supported".
	ErrNotSupported = errdefs.ErrNotSupported
)

// Isolator isolates one aspect of a container. The containerizer calls, for
// each container: Prepare before the container exists, Isolate once its init
// process exists, Update any number of times while it runs, Usage to sample
// it, and Cleanup after it has exited (also after a launch that failed half
// way: Cleanup must accept a partly prepared container and be idempotent).
// After an agent restart, Recover is called once with the containers the
// agent still knows; the isolator drops (cleans up) everything else it finds.
//
// Implementations are safe for concurrent use on different containers.
type Isolator interface {
	// Name identifies the isolator in logs and errors ("cgroups", "network").
	Name() string
	// Prepare sets up isolation for container id and fills in what the
	// launcher must apply (cgroup path, network namespace path, …).
	Prepare(ctx context.Context, id string, limits Limits, launch *Launch) error
	// Isolate is called with the pid of the container's init process, after
	// the container exists and before the user process runs (not at all
	// when every isolator of the container is a Verifier).
	Isolate(ctx context.Context, id string, pid int) error
	// Update applies new limits to a running container.
	Update(ctx context.Context, id string, limits Limits) error
	// Usage adds what this isolator measures to stats.
	Usage(ctx context.Context, id string, stats *Statistics) error
	// Cleanup removes everything the isolator made for id. Idempotent.
	Cleanup(ctx context.Context, id string) error
	// Recover is called after an agent restart with the IDs of the live
	// containers the agent knows (and their limits); everything else the
	// isolator finds under its control is an orphan and is removed.
	Recover(ctx context.Context, known map[string]Limits) error
}

// QoSClass is a container's service class.
type QoSClass int

const (
	// Guaranteed containers run on non-revocable resources.
	Guaranteed QoSClass = iota
	// BestEffort containers run on revocable (oversubscribed) resources: low
	// cpu priority, low network priority, first to be throttled or killed.
	BestEffort
)

func (c QoSClass) String() string {
	if c == BestEffort {
		return "best-effort"
	}
	return "guaranteed"
}

// Limits are the resources a container may use. Zero means "no limit" for
// every field except CPUs (which sets the share/weight and is required).
type Limits struct {
	// MilliCPUs is the cpu allocation in thousandths of a cpu (the resource
	// model's fixed point): 1500 = 1.5 cpus. It sets cpu shares/weight.
	MilliCPUs int64
	// CPUQuota caps the container at MilliCPUs with a CFS quota when true
	// (hard limit); otherwise the container may use idle cpu.
	CPUQuota bool
	// FlatShares gives a Guaranteed container the kernel's default cpu
	// weight (1024 shares, weight 100) instead of one proportional to
	// MilliCPUs; with CPUQuota it is CPUModeQuota, Docker's --cpus. A
	// BestEffort container keeps its class's low weight.
	FlatShares bool `json:",omitempty"`
	// MemoryBytes is the memory limit (cgroup memory.limit/memory.max).
	MemoryBytes int64
	// Pids caps the number of processes/threads.
	Pids int64
	// NetBandwidthMbit is the egress and ingress rate limit in Mbit/s; used
	// only when the container has networking.
	NetBandwidthMbit int64
	// Network asks for an own network namespace with an address; without it
	// the container sees only loopback.
	Network bool
	// Class is the QoS class (revocable containers are BestEffort).
	Class QoSClass
	// Ports are host ports forwarded to the container (with Network only).
	// They are set at Prepare and never change: Update ignores them.
	Ports []PortMapping `json:",omitempty"`
	// DiskBytes limits what the container writes to its root (an image
	// container's upper dir): a project quota where the file system has
	// them, else a measured limit whose excess kills the container
	// (docs/images.md). 0: no limit. The isolators ignore it; it is set
	// at launch and never changes.
	DiskBytes int64 `json:",omitempty"`
}

// CPUMode is how a container's MilliCPUs limit its cpu (see
// docs/operators.md, "CPU limits").
type CPUMode string

// CPU modes.
const (
	// CPUModeShares: a cpu weight proportional to MilliCPUs and no cap.
	// Under contention each container gets at least its share; on an
	// idle node it uses what is idle. Mesos's default, and brim's: idle
	// cpu is what oversubscription lends, and a hard cap wastes it.
	CPUModeShares CPUMode = "shares"
	// CPUModeQuota: a CFS quota at MilliCPUs and the kernel's default
	// weight: Docker's --cpus.
	CPUModeQuota CPUMode = "quota"
	// CPUModeBoth: the proportional weight and the quota (Mesos's
	// --cgroups_enable_cfs; brim's --cpu-quota).
	CPUModeBoth CPUMode = "both"
)

// ParseCPUMode parses "shares", "quota" or "both"; the error names the
// choices.
func ParseCPUMode(s string) (CPUMode, error) {
	switch m := CPUMode(s); m {
	case CPUModeShares, CPUModeQuota, CPUModeBoth:
		return m, nil
	}
	return "", fmt.Errorf("cpu limit mode %q: want shares, quota or both", s)
}

// CPUMode returns the mode l's cpu fields describe.
func (l Limits) CPUMode() CPUMode {
	switch {
	case l.CPUQuota && l.FlatShares:
		return CPUModeQuota
	case l.CPUQuota:
		return CPUModeBoth
	}
	return CPUModeShares
}

// SetCPUMode sets l's cpu fields to mode m (a valid CPUMode).
func (l *Limits) SetCPUMode(m CPUMode) {
	l.CPUQuota = m == CPUModeQuota || m == CPUModeBoth
	l.FlatShares = m == CPUModeQuota
}

// Verifier is an optional interface of isolators whose Isolate changes
// nothing and only verifies what the launcher applied from Launch: the
// init is in the cgroup at CgroupPath, in the network namespace at
// NetNSPath. The shim checks exactly these facts itself before the user
// process runs (and fails the launch if they do not hold), so when every
// isolator of a container is a Verifier the containerizer does not call
// Isolate and the user process starts without waiting for it: one round
// trip between two processes less on the launch path, which matters most
// on a loaded host. An isolator that must act on the init before the user
// process runs, or check anything else, does not implement it.
type Verifier interface {
	Isolator
	// VerifiesOnly reports whether Isolate only verifies (see Verifier).
	VerifiesOnly() bool
}

// Warmer is an optional interface of isolators that can make the rest of
// a launch's kernel work cheaper when told that it is under way. The
// containerizer calls Warm once every isolator has prepared the
// container, and the returned done function once the container runs or
// the launch has failed. Warm never fails: it is an optimisation, never a
// condition of a launch.
type Warmer interface {
	Isolator
	Warm() (done func())
}

// Sandboxer is an optional interface of isolators that can isolate a
// warm sandbox: a container made before its task is known (its ID,
// limits and user), to be handed to a task later. The containerizer
// keeps warm sandboxes only when every isolator is a Sandboxer.
type Sandboxer interface {
	Isolator
	// PrepareSandbox prepares sandbox name as Prepare would a container,
	// with no limits (nothing a task needs is held for it) and fills in
	// launch. Cleanup(name) removes it while it is unclaimed.
	PrepareSandbox(ctx context.Context, name string, launch *Launch) error
	// Claim gives sandbox name's isolation to container id with limits
	// and fills in launch as Prepare does: from then on the isolator
	// knows it as id only (Cleanup(id) removes it, Cleanup(name) is a
	// no-op). The sandbox's init is still blocked before its task's
	// exec. On an error the caller cleans up both names.
	Claim(ctx context.Context, name, id string, limits Limits, launch *Launch) error
}

// Launch collects what the isolators tell the launcher during Prepare.
type Launch struct {
	// CgroupPath is the container's cgroup path relative to each hierarchy
	// root, absolute ("/brim/<id>"), for libcontainer's config.
	CgroupPath string
	// NetNSPath is a network namespace for the container to join; empty
	// means a fresh namespace with only loopback.
	NetNSPath string
	// Env is added to the container's environment.
	Env []string
	// OOMScoreAdj, when set, is the oom_score_adj of the container's init
	// (inherited by every process it starts), applied by the runtime
	// before the user process runs; nil inherits the shim's.
	OOMScoreAdj *int
}

// Statistics is one sample of a container's usage: Mesos's ResourceStatistics
// fields that this host can provide. Fields an isolator cannot measure stay
// zero; the Has* flags say which groups are valid.
type Statistics struct {
	Timestamp time.Time

	HasCPU           bool
	CPUUserSeconds   float64
	CPUSystemSeconds float64
	CPUUsageNanos    uint64 // total cpu time (cpuacct.usage / cpu.stat usage_usec)
	CPULimit         float64
	CPUPeriods       uint64 // nr_periods
	CPUThrottled     uint64 // nr_throttled
	CPUThrottledTime time.Duration

	HasMemory     bool
	MemUsageBytes uint64
	MemRSSBytes   uint64
	MemCacheBytes uint64
	MemLimitBytes uint64
	MemWorkingSet uint64 // usage − inactive file (cAdvisor's working set)
	MemMaxUsage   uint64
	MemOOMKills   uint64 // kills in this cgroup so far
	MemLimitHit   bool   // failcnt > 0 / events max > 0

	HasPids   bool
	Pids      uint64
	PidsLimit uint64

	// Pressure (PSI) where the container has a v2 directory.
	HasPressure bool
	CPUPressure PSI
	MemPressure PSI
	IOPressure  PSI

	// Network, when the container has its own namespace.
	HasNet          bool
	NetRxBytes      uint64
	NetRxPackets    uint64
	NetRxDropped    uint64
	NetRxErrors     uint64
	NetTxBytes      uint64
	NetTxPackets    uint64
	NetTxDropped    uint64
	NetTxErrors     uint64
	NetTrafficClass []TrafficControlStatistics
}

// PSI is one pressure line pair ("some" and "full") of a pressure file.
type PSI struct {
	SomeAvg10, SomeAvg60, SomeAvg300 float64
	SomeTotal                        time.Duration
	FullAvg10, FullAvg60, FullAvg300 float64
	FullTotal                        time.Duration
}

// TrafficControlStatistics are the counters of one tc class (Mesos's
// TrafficControlStatistics).
type TrafficControlStatistics struct {
	ID         string // e.g. "egress", "ingress"
	Backlog    uint64
	Bytes      uint64
	Drops      uint64
	Overlimits uint64
	Packets    uint64
	Qlen       uint64
	RateBps    uint64
	RatePps    uint64
	Requeues   uint64
}
