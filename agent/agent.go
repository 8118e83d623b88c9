package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/brimnode/brim/internal/atomicfile"
	"github.com/brimnode/brim/internal/containerlog"
	"github.com/brimnode/brim/internal/exitstatus"
	"github.com/brimnode/brim/internal/lockfile"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/brimnode/brim/image"
	"github.com/brimnode/brim/internal/hostuser"
	"github.com/brimnode/brim/internal/speclimit"
	"github.com/brimnode/brim/internal/subid"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/resources"
	"github.com/google/uuid"
)

// DefaultKillGrace is the grace period between SIGTERM and SIGKILL when
// Options.KillGrace is zero.
const DefaultKillGrace = 10 * time.Second

// DefaultKillExitTimeout is how long a kill waits for the exit after its
// grace period when Options.KillExitTimeout is zero.
const DefaultKillExitTimeout = 30 * time.Second

// Options configure an Agent. StateDir, Runtime and Resources are
// required.
type Options struct {
	// StateDir holds the agent ID, the lock and the checkpoint (see
	// docs/operators.md). Created 0700 if missing.
	StateDir string
	// Runtime runs the containers (the containerizer).
	Runtime Runtime
	// Resources is what the agent may hand out to containers.
	Resources Resources
	// Network says the runtime has a network isolator: containers may ask
	// for networking (Spec.Network).
	Network bool
	// PortRange is the host ports a container's port mappings may use
	// (--network-port-range); zero: isolator.DefaultPortRange.
	PortRange isolator.PortRange
	// KillGrace is the default SIGTERM→SIGKILL grace period.
	KillGrace time.Duration
	// KillExitTimeout bounds how long a kill (and a forced destroy) waits
	// for the container's exit after the grace period: a process that
	// SIGKILL cannot end yet (uninterruptible sleep on a hung disk) makes
	// it return ErrStillExiting instead of holding its caller; default
	// DefaultKillExitTimeout.
	KillExitTimeout time.Duration
	// Retention bounds how long finished containers (their records and
	// sandboxes) are kept; the zero value keeps them until destroyed.
	Retention Retention
	// Log receives the agent's logs; nil discards them.
	Log *slog.Logger
	// Version and CgroupParent are reported by Info.
	Version      string
	CgroupParent string
	// DefaultUser runs the containers whose Spec names no user: NAME, UID,
	// NAME:GROUP or UID:GID from the host's /etc/passwd and /etc/group;
	// empty means DefaultUser ("nobody").
	DefaultUser string
	// AllowRoot lets containers run as root (uid 0), asked for or as the
	// default user; without it such a launch fails with ErrRootNotAllowed
	// (unless the launch carries Spec.RunAsRoot, or runs in a user
	// namespace).
	AllowRoot bool
	// UserNSRange is the host ID range user namespaces map containers'
	// IDs onto (--userns-range); nil: containers cannot have one.
	UserNSRange *subid.Range
	// UserNS runs every container in a user namespace (needs
	// UserNSRange), as if each Spec had UserNS.
	UserNS bool
	// LogMaxSize and LogMaxFiles bound each container's output on disk
	// (internal/containerlog: rotated files of LogMaxSize bytes, at most
	// LogMaxFiles of them) unless its Spec sets its own; 0:
	// containerlog.DefaultMaxSize and DefaultMaxFiles.
	LogMaxSize  int64
	LogMaxFiles int
	// Images is the image store containers may run from (Spec.Image);
	// the runtime leases images from the same store. nil: launches from
	// an image are refused.
	Images *image.Store
	// ImageCacheMax is the image cache's cap in bytes (reported by Info;
	// the store enforces it); 0: none.
	ImageCacheMax int64
	// PullTimeout bounds a pull (brim image pull, or a launch's); 0:
	// DefaultPullTimeout.
	PullTimeout time.Duration
	// UpperLimitMiB limits the writes of a read-write image root whose
	// container asks for no disk (a safety bound, not accounted); 0: no
	// limit.
	UpperLimitMiB int64
	// CPUMode is how the cpus of a container whose Spec names no mode
	// limit it (--cpu-limit-mode); empty: isolator.CPUModeShares.
	CPUMode isolator.CPUMode
	// Cgroups lists a container's processes (Top) and freezes and thaws
	// it (Pause, Unpause): the cgroups isolator. nil: those fail with
	// ErrNotSupported.
	Cgroups ContainerCgroups
	// Oversub runs the monitor, estimator and QoS controller and admits
	// revocable containers against the revocable pool. nil: none of them,
	// and revocable containers are accounted against Resources like the
	// others.
	Oversub *Oversub
	// RecordsUnsaved reports the records other parts keep only in
	// memory for want of space on the state dir (the network
	// isolator's IPAM records: network.Isolator.Unsaved), by container,
	// with their last write's error; the checkpoint status counts them
	// (Info, metrics). nil: none.
	RecordsUnsaved func() map[string]error
}

// Retention is the policy for finished containers: keep at most MaxExited
// of them (newest first) and none longer than MaxAge after it finished.
// Zero fields do not limit.
type Retention struct {
	MaxExited int
	MaxAge    time.Duration
}

// ParseRetention parses "N", "DURATION" or "N,DURATION" (e.g. "100,168h").
func ParseRetention(s string) (Retention, error) {
	var r Retention
	if strings.TrimSpace(s) == "" {
		return r, nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		var n int
		if _, err := fmt.Sscanf(part, "%d", &n); err == nil && fmt.Sprint(n) == part {
			if n < 0 {
				return r, fmt.Errorf("%w: retention %q: negative count", ErrInvalidArgument, s)
			}
			r.MaxExited = n
			continue
		}
		d, err := time.ParseDuration(part)
		if err != nil || d < 0 {
			return r, fmt.Errorf("%w: retention %q: %q is neither a count nor a duration", ErrInvalidArgument, s, part)
		}
		r.MaxAge = d
	}
	return r, nil
}

// Spec is a request to run a container.
type Spec struct {
	// Name must be unique among the agent's containers; empty: the ID.
	Name    string
	Command []string
	Env     []string // K=V
	Cwd     string
	Rootfs  string // absolute directory; empty: the host root, read-only
	// Image runs the container on an image (a reference, or an image ID
	// "sha256:…") from Options.Images, pulled as Pull says: its
	// entrypoint and cmd, env, working dir and user are the defaults of
	// Command, Env, Cwd and User. The root is read-only unless ReadWrite.
	Image     string
	Pull      PullPolicy
	ReadWrite bool
	// rerun: a restart's spec, from the container's record: Image is the
	// image's ID, whose defaults Command, Env, Cwd and User have already.
	rerun bool
	// User runs the process (see Options.DefaultUser for the syntax);
	// empty: the image's user, else Options.DefaultUser. In a user
	// namespace it names the IDs inside it (resolved in the host's user
	// database all the same); with an image, in the image's /etc/passwd
	// and /etc/group, never the host's.
	User string
	// UserNS runs the container in a user namespace mapped onto
	// Options.UserNSRange: root inside it is an unprivileged host uid, so
	// it needs no AllowRoot.
	UserNS bool
	// RunAsRoot: whoever asked for the container may run it as root (the
	// master's run_as_root ACL, for its tasks), as AllowRoot does for all.
	RunAsRoot bool
	// Resources are accounted against the agent's and set the limits:
	// cpu (as CPUMode says), memory limit.
	Resources Resources
	Pids      int64
	// CPUMode is how Resources' cpus limit the container; empty:
	// isolator.CPUModeBoth with CPUQuota, else Options.CPUMode.
	CPUMode  isolator.CPUMode
	CPUQuota bool
	// Network gives the container its own network namespace with an
	// address on the agent's bridge (the agent must run with --network);
	// Resources.NetMbit then limits its bandwidth both ways.
	Network bool
	// Ports are host ports forwarded to the container (with Network);
	// released when it exits.
	Ports []isolator.PortMapping
	// LogMaxSize and LogMaxFiles bound the container's output on disk;
	// 0: Options' (the agent's --log-max-size, --log-max-files).
	LogMaxSize  int64
	LogMaxFiles int
	// Revocable runs the container best-effort (low priority). With
	// Options.Oversub it is admitted against the revocable pool (see
	// Oversub), otherwise against the same total as the others.
	Revocable bool
	// Lent (with Revocable): the master lends the resources from
	// capacity it holds for a demand's start (docs/demands.md), not from
	// this agent's oversubscription: admitted against the agent's own
	// free resources, like a non-revocable container, and run
	// best-effort; the master preempts it before the start.
	Lent   bool
	Labels map[string]string
	// Stdin keeps the container's stdin open for Attach; Tty gives it a
	// terminal (of TtySize when not zero) whose output is logged as
	// stdout.
	Stdin, Tty bool
	TtySize    TermSize
}

// Update changes a running container's limits; zero fields are unchanged.
type Update struct {
	MilliCPUs int64
	MemMiB    int64
	Pids      int64
	// NetMbit is the bandwidth limit of a container with networking
	// (Mbit/s, both directions), changed live.
	NetMbit int64
	// CPUMode is a new cpu limit mode; empty leaves it.
	CPUMode isolator.CPUMode
}

// Info describes the agent.
type Info struct {
	ID           string
	Version      string
	StateDir     string
	CgroupParent string
	Total        Resources
	Used         Resources
	Free         Resources
	Running      int
	Exited       int
	StartedAt    time.Time
	// CPUMode is Options.CPUMode: the mode of containers that name none.
	CPUMode isolator.CPUMode
	// Oversub is the oversubscription status; nil without it.
	Oversub *Oversubscription
	// Quarantined are the checkpoint records the agent could not read at
	// recovery (see Agent.Recover); an rm of the container drops one.
	Quarantined []Quarantined
	// Checkpoint says whether every record is on disk, or the state dir
	// is full and some wait in memory.
	Checkpoint CheckpointStatus
	// LogMaxSize and LogMaxFiles are the default log bound of a container.
	LogMaxSize  int64
	LogMaxFiles int
	// Warm is the runtime's warm sandboxes; nil when it has none.
	Warm *WarmSandboxes
	// ImageCache is the image cache's size and cap; zero without an
	// image store.
	ImageCache ImageCache
}

// Agent is the node agent. Create it with New, then Start it (the local
// API, agent/agentserver, does before it serves), or Recover it and call
// its methods directly; Close releases it without touching any
// container. Safe for concurrent use.
type Agent struct {
	opts  Options
	log   *slog.Logger
	rt    Runtime
	store *store
	id    string
	lock  *lockfile.Lock

	ctx    context.Context // the agent's lifetime; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	resizeMu sync.Mutex // serialises Resize

	// freezeMu orders a user's pause against kills and QoS thaws: a
	// pause freezes only a container no kill has begun on, and a kill or
	// thaw that comes meanwhile acts after the freeze (pause.go).
	freezeMu sync.Mutex

	mu          sync.Mutex
	containers  map[string]*Container
	names       map[string]string        // name → id
	done        map[string]chan struct{} // closed when the container has exited
	killReasons map[string]killReason    // id → why a pending kill was asked for
	killing     map[string]bool          // id → a kill has begun (no pause)
	ledger      *ledger                  // claims of running (and launching) containers
	quarantined []Quarantined            // checkpoint records Recover could not read
	unsaved     map[string]bool          // records not written yet (checkpoint.go)
	saveErr     error                    // the last failed checkpoint write, nil once all are written
	started     time.Time
	over        *oversub // nil without Options.Oversub
	closed      bool
	ready       chan struct{} // closed by Start once recovered (ready.go)
}

// check validates o and fills in the defaults of its zero fields (those
// documented to have one). Errors wrap ErrInvalidArgument, or come from
// resolving the default user.
func (o *Options) check() error {
	if o.StateDir == "" || !filepath.IsAbs(o.StateDir) {
		return fmt.Errorf("%w: state dir %q must be an absolute path", ErrInvalidArgument, o.StateDir)
	}
	if o.Runtime == nil {
		return fmt.Errorf("%w: no runtime", ErrInvalidArgument)
	}
	if o.Resources.MilliCPUs <= 0 || o.Resources.MemMiB <= 0 {
		return fmt.Errorf("%w: resources %s: need cpus and mem", ErrInvalidArgument, o.Resources)
	}
	if o.KillGrace <= 0 {
		o.KillGrace = DefaultKillGrace
	}
	if o.KillExitTimeout <= 0 {
		o.KillExitTimeout = DefaultKillExitTimeout
	}
	if o.PullTimeout <= 0 {
		o.PullTimeout = DefaultPullTimeout
	}
	if o.PortRange.IsZero() {
		o.PortRange = isolator.DefaultPortRange
	}
	if o.LogMaxSize == 0 {
		o.LogMaxSize = containerlog.DefaultMaxSize
	}
	if o.LogMaxFiles == 0 {
		o.LogMaxFiles = containerlog.DefaultMaxFiles
	}
	if err := (containerlog.Limits{MaxSize: o.LogMaxSize, MaxFiles: o.LogMaxFiles}).Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if o.DefaultUser == "" {
		o.DefaultUser = DefaultUser
	}
	if o.CPUMode == "" {
		o.CPUMode = isolator.CPUModeShares
	}
	if _, err := isolator.ParseCPUMode(string(o.CPUMode)); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if o.UserNSRange != nil {
		if err := o.UserNSRange.Validate(); err != nil {
			return fmt.Errorf("%w: --userns-range: %w", ErrInvalidArgument, err)
		}
	}
	if o.UserNS && o.UserNSRange == nil {
		return fmt.Errorf("%w: user namespaces for every container need a range (--userns-range)", ErrInvalidArgument)
	}
	defaultNS := o.UserNSRange
	if !o.UserNS {
		defaultNS = nil
	}
	if _, err := resolveUser(o.DefaultUser, o.AllowRoot, defaultNS); err != nil {
		return fmt.Errorf("default user: %w", err)
	}
	return nil
}

// New opens (creating if needed) the state dir, takes its lock and reads or
// creates the agent ID. It returns an error wrapping ErrAgentRunning when
// another agent holds the state dir, ErrInvalidArgument for bad options.
func New(opts Options) (*Agent, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := MakeStateDir(opts.StateDir); err != nil {
		return nil, err
	}
	lock, err := lockStateDir(opts.StateDir)
	if err != nil {
		return nil, err
	}
	id, err := agentID(opts.StateDir)
	if err != nil {
		_ = lock.Close() // New fails with err; the lock only has to go
		return nil, err
	}
	st, err := newStore(filepath.Join(opts.StateDir, "checkpoint"))
	if err != nil {
		_ = lock.Close() // New fails with err; the lock only has to go
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Agent{
		opts:        opts,
		log:         log.With("component", "agent"),
		rt:          opts.Runtime,
		store:       st,
		id:          id,
		lock:        lock,
		ctx:         ctx,
		cancel:      cancel,
		containers:  map[string]*Container{},
		names:       map[string]string{},
		done:        map[string]chan struct{}{},
		killReasons: map[string]killReason{},
		killing:     map[string]bool{},
		unsaved:     map[string]bool{},
		ledger:      newLedger(opts.Resources.Model()),
		started:     time.Now(),
		ready:       make(chan struct{}),
	}
	if opts.Oversub != nil {
		a.over = newOversub(a, *opts.Oversub)
		a.over.reg.MustRegister(a.checkpointMetrics()...)
		if wr, ok := a.rt.(warmReporter); ok {
			a.over.reg.MustRegister(warmMetrics(wr)...)
		}
		if err := a.over.newGuards(a); err != nil {
			cancel()
			_ = lock.Close() // New fails with err; the lock only has to go
			return nil, fmt.Errorf("oversubscription: %w", err)
		}
	}
	return a, nil
}

// pool is how a container is admitted: whether it is revocable, and
// whether its revocable resources are lent by the master (Spec.Lent).
type pool struct{ revocable, lent bool }

func poolOf(c *Container) pool { return pool{c.Revocable, c.Lent} }

// revocablePool reports whether a container of pool p is accounted in the
// revocable pool (with oversubscription) rather than against Resources: a
// lent one never is.
func (a *Agent) revocablePool(p pool) bool { return p.revocable && !p.lent && a.over != nil }

// claimOf returns what a container with resources r is accounted for in
// the ledger: in the revocable pool (entries marked revocable) or in the
// agent's own resources.
func (a *Agent) claimOf(p pool, r Resources) resources.Resources {
	m := r.Model()
	if a.revocablePool(p) {
		return markRevocable(m, true)
	}
	return m
}

// reserveLocked admits a new container's claim. Errors: an
// *InsufficientResourcesError.
func (a *Agent) reserveLocked(id string, p pool, r Resources) error {
	claim := a.claimOf(p, r)
	if a.revocablePool(p) {
		return a.over.admit(a.ledger, claim, func() error { return a.ledger.Reserve(id, claim) })
	}
	return a.ledger.Reserve(id, claim)
}

// resizeLocked admits a running container's new size.
func (a *Agent) resizeLocked(id string, p pool, old, next Resources) error {
	claim := a.claimOf(p, next)
	if a.revocablePool(p) {
		grow := claim.Subtract(a.claimOf(p, old))
		return a.over.admit(a.ledger, grow, func() error { return a.ledger.Resize(id, claim) })
	}
	return a.ledger.Resize(id, claim)
}

// settleLocked commits (ok) or cancels id's pending claim. A claim the exit
// of its container released meanwhile is gone: nothing to settle.
func (a *Agent) settleLocked(id string, ok bool) {
	op := a.ledger.Cancel
	if ok {
		op = a.ledger.Commit
	}
	if err := op(id); err != nil && !errors.Is(err, ErrNotFound) {
		a.log.Error("settle resource claim", "id", id, "err", err)
	}
}

// releaseLocked gives a container's claim back.
func (a *Agent) releaseLocked(id string) {
	if err := a.ledger.Release(id); err != nil {
		a.log.Error("release resource claim", "id", id, "err", err)
	}
}

// usedLocked returns what the agent's own resources (revocable false) or
// the revocable pool (true) have handed out.
func (a *Agent) usedLocked(revocable bool) Resources {
	u := a.ledger.Used()
	if revocable {
		return resourcesOf(u.Revocable())
	}
	return resourcesOf(u.NonRevocable())
}

// agentID reads the agent ID file, creating it on first start.
func agentID(stateDir string) (string, error) {
	p := filepath.Join(stateDir, "agent-id")
	b, err := os.ReadFile(p)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read agent id: %w", err)
	}
	id := uuid.NewString()
	if err := atomicfile.WriteFile(p, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write agent id: %w", err)
	}
	return id, nil
}

// ID returns the agent's ID (stable across restarts with the same state dir).
func (a *Agent) ID() string { return a.id }

// Close stops the agent's goroutines and releases the state dir. Containers
// keep running; a new Agent on the same state dir recovers them.
func (a *Agent) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
	return a.lock.Close()
}

// addLocked enters a recovered container; a running one's resources are
// claimed again without admission (it runs already).
func (a *Agent) addLocked(c *Container) {
	a.containers[c.ID] = c
	if _, taken := a.names[c.Name]; !taken {
		a.names[c.Name] = c.ID
	}
	ch := make(chan struct{})
	a.done[c.ID] = ch
	switch {
	case c.State != StateRunning:
		close(ch)
	case c.Quarantine == "":
		a.ledger.Adopt(c.ID, a.claimOf(poolOf(c), c.Resources()))
	}
}

// quarantineLocked takes care of a checkpoint record that cannot be read
// (corrupt, or written by a newer agent): it is reported (log, Info) and
// left untouched on disk, so a repaired file or a newer agent recovers it
// in full at the next start. Its container, if the runtime has it, is no
// orphan: it is adopted as far as the runtime knows it — listed under its
// ID with Quarantine set, watched, killable and removable, but neither
// resizable nor accounted (its limits are in the unreadable record) nor
// checkpointed, nor removed by retention; `rm` is the operator's decision
// to remove it and its record. It reports whether the container runs.
func (a *Agent) quarantineLocked(q Quarantined, in *RuntimeInfo, now time.Time) bool {
	c := &Container{ID: q.ID, Name: q.ID, Quarantine: q.Err, State: StateExited, CreatedAt: now}
	switch {
	case in == nil:
		q.Container = "none"
		c.Exit = &ExitStatus{Code: -1, Reason: ReasonLost, Message: "checkpoint record unreadable and the runtime has no such container", FinishedAt: now}
	case in.Running:
		q.Container = StateRunning
		c.State, c.Pid, c.StartedAt, c.SandboxDir, c.LogDir = StateRunning, in.Pid, in.StartedAt, in.SandboxDir, in.LogDir
	default:
		q.Container = StateExited
		c.Exit, c.SandboxDir, c.LogDir = in.Exit, in.SandboxDir, in.LogDir
		if c.Exit == nil {
			c.Exit = &ExitStatus{Code: -1, Reason: ReasonLost, Message: "exit status unknown", FinishedAt: now}
		}
	}
	if !c.StartedAt.IsZero() {
		c.CreatedAt = c.StartedAt
	}
	a.quarantined = append(a.quarantined, q)
	a.addLocked(c)
	a.log.Error("quarantined unreadable checkpoint record: its container is kept; repair the file and restart the agent, or rm the container",
		"id", q.ID, "file", q.File, "err", q.Err, "container", q.Container)
	return c.State == StateRunning
}

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

func (s *Spec) validate() error {
	if s.Image == "" && (len(s.Command) == 0 || s.Command[0] == "") {
		return fmt.Errorf("%w: no command given", ErrInvalidArgument)
	}
	if err := s.checkImage(); err != nil {
		return err
	}
	if s.Name != "" && !nameRE.MatchString(s.Name) {
		return fmt.Errorf("%w: name %q: use 1-63 letters, digits, '_', '.', '-', starting with a letter or digit", ErrInvalidArgument, s.Name)
	}
	if s.Resources.MilliCPUs <= 0 {
		return fmt.Errorf("%w: cpus must be positive, got %s", ErrInvalidArgument, FormatMilli(s.Resources.MilliCPUs))
	}
	if s.Resources.MemMiB <= 0 {
		return fmt.Errorf("%w: mem must be positive, got %d MiB", ErrInvalidArgument, s.Resources.MemMiB)
	}
	if s.Pids < 0 {
		return fmt.Errorf("%w: pids must not be negative, got %d", ErrInvalidArgument, s.Pids)
	}
	if s.Resources.NetMbit < 0 || (s.Resources.NetMbit > 0 && !s.Network) {
		return fmt.Errorf("%w: net_bw %d Mbit/s: must not be negative, and needs networking", ErrInvalidArgument, s.Resources.NetMbit)
	}
	if err := s.checkCommand(); err != nil {
		return err
	}
	if err := s.checkPorts(); err != nil {
		return err
	}
	if s.Rootfs != "" {
		if !filepath.IsAbs(s.Rootfs) {
			return fmt.Errorf("%w: rootfs %q: must be an absolute path", ErrInvalidArgument, s.Rootfs)
		}
		if fi, err := os.Stat(s.Rootfs); err != nil || !fi.IsDir() {
			return fmt.Errorf("%w: rootfs %q: no such directory", ErrInvalidArgument, s.Rootfs)
		}
	}
	return nil
}

// logLimits applies the agent's log bound to a spec that sets none and
// checks the result. Errors wrap ErrInvalidArgument.
func (a *Agent) logLimits(s *Spec) error {
	if s.LogMaxSize == 0 {
		s.LogMaxSize = a.opts.LogMaxSize
	}
	if s.LogMaxFiles == 0 {
		s.LogMaxFiles = a.opts.LogMaxFiles
	}
	if err := (containerlog.Limits{MaxSize: s.LogMaxSize, MaxFiles: s.LogMaxFiles}).Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return nil
}

// checkCommand refuses what the kernel would refuse at exec (a container
// ending with exit 255 and no reason), or what would swell every
// listing: checked first, and again once an image's defaults are in (the
// errors quote the strings).
func (s *Spec) checkCommand() error {
	if err := speclimit.Check(s.Command, s.Env, s.Labels, speclimit.MaxLabels); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	for _, e := range s.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return fmt.Errorf("%w: env %q: want KEY=VALUE", ErrInvalidArgument, e)
		}
	}
	return nil
}

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Launch checkpoints and starts a container, returning once its process
// runs. Errors wrap ErrInvalidArgument, ErrNameInUse,
// ErrInsufficientResources (an *InsufficientResourcesError; its Pool is
// "revocable" for a revocable container refused by the revocable pool) or
// ErrCommandNotFound; a failed launch leaves nothing behind.
func (a *Agent) Launch(ctx context.Context, spec Spec) (*Container, error) {
	c, err := a.launch(ctx, spec)
	if err == nil {
		a.sample()
	}
	return c, err
}

func (a *Agent) launch(ctx context.Context, spec Spec) (*Container, error) {
	p, err := a.plan(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	defer p.release() // the runtime's lease holds an image from Launch on
	spec = p.spec
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, fmt.Errorf("run: agent is shutting down")
	}
	id := newID()
	for a.containers[id] != nil {
		id = newID()
	}
	name := spec.Name
	if name == "" {
		name = id
	}
	if other, ok := a.names[name]; ok {
		a.mu.Unlock()
		return nil, fmt.Errorf("run: %w: %q is used by container %s", ErrNameInUse, name, other)
	}
	if err := a.reserveLocked(id, pool{spec.Revocable, spec.Revocable && spec.Lent}, spec.Resources); err != nil {
		a.mu.Unlock()
		return nil, fmt.Errorf("run: %w", err)
	}
	c := &Container{
		ID: id, Name: name, Command: spec.Command, Env: spec.Env, Cwd: spec.Cwd,
		Rootfs: spec.Rootfs, User: spec.User, UserNS: spec.UserNS, Limits: p.limits, Revocable: spec.Revocable, Lent: spec.Revocable && spec.Lent, Labels: spec.Labels,
		Stdin: spec.Stdin, Tty: spec.Tty, State: StateLaunching, CreatedAt: time.Now().UTC(), LogMaxSize: spec.LogMaxSize, LogMaxFiles: spec.LogMaxFiles,
		DiskMiB: spec.Resources.DiskMiB,
	}
	if p.im != nil {
		c.Image, c.ImageID, c.ImageDigest, c.ExposedPorts = spec.Image, p.im.img.ID, p.im.img.Digest, p.im.img.Config.ExposedPorts
		c.ReadWrite = spec.ReadWrite
	}
	// Checkpoint before launching: after a crash mid-launch the recovery
	// either adopts the container or drops the record, never leaks.
	if err := a.store.put(c); err != nil {
		// No record, no launch: the state dir's state (full?) shows in
		// Info until a write succeeds.
		a.noteSaveLocked(err)
		a.settleLocked(id, false)
		a.mu.Unlock()
		return nil, fmt.Errorf("run: %w", err)
	}
	a.containers[id] = c
	a.names[name] = id
	a.done[id] = make(chan struct{})
	a.mu.Unlock()

	in, err := a.rt.Launch(ctx, p.launchSpec(c, heldDirs{}))
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		delete(a.containers, id)
		delete(a.names, name)
		delete(a.done, id)
		a.settleLocked(id, false)
		if derr := a.store.delete(id); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, fmt.Errorf("run: %w", err)
	}
	a.startedLocked(c, in)
	a.log.Info("launched container", "id", id, "name", name, "pid", c.Pid, "resources", spec.Resources, "cpu_limit_mode", p.limits.CPUMode())
	return c.clone(), nil
}

// launchPlan is a checked Spec with what the runtime needs besides it.
// Its image, if any, is held until release.
type launchPlan struct {
	spec   Spec // with the defaults applied (the image's too)
	user   hostuser.ID
	userns *subid.Range
	limits isolator.Limits
	im     *imageLaunch // nil: the host root or Spec.Rootfs
}

// release lets the plan's image go (the runtime holds its own lease from
// Launch on).
func (p launchPlan) release() {
	if p.im != nil {
		p.im.release()
	}
}

// plan checks spec and resolves its image (held: the caller releases the
// plan), user, user namespace and limits (Options.CPUMode for a spec that
// names no cpu mode). Errors wrap ErrInvalidArgument, ErrRootNotAllowed
// or the image store's.
func (a *Agent) plan(ctx context.Context, spec Spec) (_ launchPlan, retErr error) {
	if err := spec.validate(); err != nil {
		return launchPlan{}, err
	}
	if err := a.logLimits(&spec); err != nil {
		return launchPlan{}, err
	}
	lookup := hostUser
	var im *imageLaunch
	if spec.Image != "" {
		var err error
		if im, err = a.imageOf(ctx, &spec); err != nil {
			return launchPlan{}, err
		}
		defer func() {
			if retErr != nil {
				im.release()
			}
		}()
		if err := spec.checkCommand(); err != nil {
			return launchPlan{}, fmt.Errorf("image %s: %w", spec.Image, err)
		}
		lookup = func(u string) (hostuser.ID, error) { return im.lookupUser(a.opts.Images, spec.Image, u) }
	}
	if spec.User == "" {
		spec.User = a.opts.DefaultUser
	}
	var userns *subid.Range
	if spec.UserNS || a.opts.UserNS {
		if a.opts.UserNSRange == nil {
			return launchPlan{}, fmt.Errorf("%w: a user namespace was asked for but the agent has no --userns-range", ErrInvalidArgument)
		}
		spec.UserNS, userns = true, a.opts.UserNSRange
	}
	user, err := resolveUserIn(lookup, spec.User, a.opts.AllowRoot || spec.RunAsRoot, userns)
	if err != nil {
		return launchPlan{}, err
	}
	if spec.Network && !a.opts.Network {
		return launchPlan{}, fmt.Errorf("%w: networking asked but the agent runs without --network", ErrInvalidArgument)
	}
	if err := checkPortRange(spec.Ports, a.opts.PortRange); err != nil {
		return launchPlan{}, err
	}
	limits := a.limitsOf(&spec) // before the copy: it clears a revocable spec's net_bw
	return launchPlan{spec: spec, user: user, userns: userns, limits: limits, im: im}, nil
}

// imageOf holds spec's image: a launch's, resolved with its defaults laid
// under spec (resolveImage), or a restart's, whose record has them already
// (by its ID, never pulled).
func (a *Agent) imageOf(ctx context.Context, spec *Spec) (*imageLaunch, error) {
	if !spec.rerun {
		return a.resolveImage(ctx, spec)
	}
	if a.opts.Images == nil {
		return nil, fmt.Errorf("%w: image %s: the agent has no image store", ErrInvalidArgument, spec.Image)
	}
	img, release, err := a.holdImage(ctx, spec.Image, PullNever)
	if err != nil {
		return nil, err
	}
	return &imageLaunch{img: img, release: release}, nil
}

// limitsOf are the isolator's limits for spec (its cpu mode, else
// Options.CPUMode); a revocable spec's bandwidth is left unaccounted.
func (a *Agent) limitsOf(spec *Spec) isolator.Limits {
	mode := spec.CPUMode
	switch {
	case mode == "" && spec.CPUQuota:
		mode = isolator.CPUModeBoth
	case mode == "":
		mode = a.opts.CPUMode
	}
	limits := isolator.Limits{
		MilliCPUs:   spec.Resources.MilliCPUs,
		MemoryBytes: spec.Resources.MemMiB << 20,
		Pids:        spec.Pids,
		Network:     spec.Network,
		Ports:       spec.Ports,
		DiskBytes:   a.diskLimit(*spec),
	}
	limits.SetCPUMode(mode)
	if spec.Network {
		limits.NetBandwidthMbit = spec.Resources.NetMbit
	}
	if spec.Revocable {
		limits.Class = isolator.BestEffort
		// Revocable bandwidth is borrowed, never accounted.
		spec.Resources.NetMbit = 0
	}
	return limits
}

// launchSpec is what the runtime gets to run c as p says; kept, when
// set, is a previous run's sandbox and log to go on with (Restart).
func (p launchPlan) launchSpec(c *Container, kept heldDirs) LaunchSpec {
	s := p.spec
	l := LaunchSpec{
		ID: c.ID, Name: c.Name, Command: s.Command, Env: s.Env, Cwd: s.Cwd,
		Rootfs: s.Rootfs, User: p.user.String(), UserNS: p.userns, Limits: p.limits, Labels: s.Labels,
		LogMaxSize: s.LogMaxSize, LogMaxFiles: s.LogMaxFiles, Sandbox: kept.sandbox, LogDir: kept.log,
		Stdin: s.Stdin, Tty: s.Tty, TtySize: s.TtySize,
	}
	if p.im != nil {
		l.Image, l.ReadWrite = p.im.img.ID, s.ReadWrite
	}
	return l
}

// startedLocked records that c's launch (or restart) succeeded: its claim
// committed, its process, checkpoint and exit watcher.
func (a *Agent) startedLocked(c *Container, in *RuntimeInfo) {
	a.settleLocked(c.ID, true)
	c.State, c.Pid, c.StartedAt, c.SandboxDir = StateRunning, in.Pid, in.StartedAt, in.SandboxDir
	c.Address, c.LogDir, c.Exit, c.CgroupPath = in.Address, in.LogDir, nil, in.CgroupPath
	if c.StartedAt.IsZero() {
		c.StartedAt = time.Now().UTC()
	}
	// The container runs and the launching record is on disk, so a
	// restart would adopt it even if this write waits for space.
	a.saveLocked(c)
	a.watchLocked(c.ID)
}

func (a *Agent) watch(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.watchLocked(id)
}

// watchLocked starts the goroutine that records id's exit. Owned by the
// agent: Close cancels and waits for it.
func (a *Agent) watchLocked(id string) {
	if a.closed {
		return // the next agent recovers it
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		st, err := a.rt.Wait(a.ctx, id)
		if a.ctx.Err() != nil {
			return // shutting down: the container keeps running
		}
		if err != nil {
			a.log.Warn("wait for container", "id", id, "err", err)
			st = &ExitStatus{Code: -1, Reason: ReasonLost, Message: err.Error(), FinishedAt: time.Now().UTC()}
		}
		a.exited(id, st)
		a.sample()
		a.collect(a.ctx)
	}()
}

func (a *Agent) exited(id string, st *ExitStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.containers[id]
	if c == nil || c.State == StateExited {
		return
	}
	if st.FinishedAt.IsZero() {
		st.FinishedAt = time.Now().UTC()
	}
	if r, ok := a.killReasons[id]; ok {
		delete(a.killReasons, id)
		if st.Reason == exitstatus.ReasonNone || st.Reason == ReasonKilled {
			st.Reason, st.Message = r.reason, r.message
		}
	}
	c.State, c.Exit, c.Paused = StateExited, st, false
	delete(a.killing, id)
	if c.Quarantine == "" { // a quarantined container has no claim and no record of its own
		a.releaseLocked(id)
		a.saveLocked(c)
	}
	close(a.done[id])
	if a.over != nil {
		a.over.endKill(id)
	}
	a.log.Info("container exited", "id", id, "name", c.Name, "code", st.Code, "signal", st.Signal, "reason", st.Reason)
}

// resolveLocked finds a container by ID, name or unique ID prefix.
func (a *Agent) resolveLocked(ref string) (*Container, error) {
	if c := a.containers[ref]; c != nil {
		return c, nil
	}
	if id, ok := a.names[ref]; ok {
		return a.containers[id], nil
	}
	var match *Container
	if len(ref) >= 3 {
		for id, c := range a.containers {
			if strings.HasPrefix(id, ref) {
				if match != nil {
					return nil, fmt.Errorf("%w: %q matches several containers", ErrInvalidArgument, ref)
				}
				match = c
			}
		}
	}
	if match == nil {
		return nil, &NotFoundError{Ref: ref}
	}
	return match, nil
}

// Get returns a copy of the container with that ID, name or unique ID
// prefix; errors wrap ErrNotFound.
func (a *Agent) Get(ref string) (*Container, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, err := a.resolveLocked(ref)
	if err != nil {
		return nil, err
	}
	return c.clone(), nil
}

// List returns copies of every container, oldest first.
func (a *Agent) List() []*Container {
	a.mu.Lock()
	out := make([]*Container, 0, len(a.containers))
	for _, c := range a.containers {
		out = append(out, c.clone())
	}
	a.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Wait blocks until the container has exited (or ctx ends, or the agent
// shuts down) and returns it.
func (a *Agent) Wait(ctx context.Context, ref string) (*Container, error) {
	a.mu.Lock()
	c, err := a.resolveLocked(ref)
	if err != nil {
		a.mu.Unlock()
		return nil, err
	}
	id, done := c.ID, a.done[c.ID]
	a.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait %s: %w", id, ctx.Err())
	case <-a.ctx.Done():
		return nil, fmt.Errorf("wait %s: agent is shutting down", id)
	}
	return a.Get(id)
}

// killReason is the exit reason and message a kill asked for, recorded
// unless the container ends otherwise first.
type killReason struct {
	reason  ExitReason
	message string
}

// Kill stops a running container: SIGTERM, then SIGKILL after grace (a
// negative grace uses the agent's default). It returns once the container
// has exited, or with ErrStillExiting once it has not for
// Options.KillExitTimeout after the grace. Errors wrap ErrNotFound,
// ErrNotRunning or ErrStillExiting.
func (a *Agent) Kill(ctx context.Context, ref string, grace time.Duration) (*Container, error) {
	return a.KillWithReason(ctx, ref, grace, "", "")
}

// KillWithReason is Kill that records reason and message as the
// container's exit reason (e.g. "preempted" for a QoS kill) unless the
// container ended otherwise (OOM, its own exit) first.
func (a *Agent) KillWithReason(ctx context.Context, ref string, grace time.Duration, reason ExitReason, message string) (*Container, error) {
	return a.killWithin(ctx, ref, grace, a.opts.KillExitTimeout, reason, message)
}

// killWithin is KillWithReason that waits at most exitWait after the
// grace for the exit (then ErrStillExiting).
func (a *Agent) killWithin(ctx context.Context, ref string, grace, exitWait time.Duration, reason ExitReason, message string) (*Container, error) {
	a.mu.Lock()
	c, err := a.resolveLocked(ref)
	if err != nil {
		a.mu.Unlock()
		return nil, err
	}
	id, state := c.ID, c.State
	if state == StateRunning && reason != "" {
		a.killReasons[id] = killReason{reason, message}
	}
	a.mu.Unlock()
	if state != StateRunning {
		return nil, fmt.Errorf("kill %s: %w", id, ErrNotRunning)
	}
	if grace < 0 {
		grace = a.opts.KillGrace
	}
	// A frozen process cannot die: a user's pause is lifted, and no new
	// one taken, before the signal.
	a.thawForKill(ctx, id)
	if a.over != nil {
		// A frozen process cannot die: thaw it, and freeze it no more
		// until it is gone (exited clears the mark of a kill still under
		// way when this call returns).
		if err := a.over.beginKill(ctx, id); err != nil {
			a.log.Warn("thaw before kill", "id", id, "err", err)
		}
	}
	done, err := a.killAndWait(ctx, id, grace, exitWait, reason)
	if err == nil || errors.Is(err, ErrNotRunning) {
		a.mu.Lock()
		delete(a.killing, id)
		a.mu.Unlock()
	}
	if a.over != nil && (err == nil || errors.Is(err, ErrNotRunning)) {
		// Gone. Otherwise the signal may be on its way or delivered
		// (the caller stopped waiting, or the kill is still exiting):
		// the mark stays until exited clears it.
		a.over.endKill(id)
	}
	return done, err
}

// killAndWait kills container id through the runtime and waits for its
// exit, at most grace + exitWait (then ErrStillExiting).
func (a *Agent) killAndWait(ctx context.Context, id string, grace, exitWait time.Duration, reason ExitReason) (*Container, error) {
	// The caller waits for the exit, but not forever: a process SIGKILL
	// cannot end yet (uninterruptible sleep on a hung disk) would hold a
	// forced rm, a task kill or the QoS loop as long as the disk hangs.
	bound := grace + exitWait
	kctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	stillExiting := func() error {
		a.log.Warn("container not gone after its kill: still exiting", "id", id, "waited", bound)
		return fmt.Errorf("kill %s: %w %s after SIGTERM (grace %s): a process in uninterruptible sleep, on a hung disk? "+
			"the kill goes on and the exit is recorded when it comes (brim container inspect)", id, ErrStillExiting, bound, grace)
	}
	if err := a.rt.Kill(kctx, id, grace); err != nil && !errors.Is(err, ErrNotRunning) {
		if kctx.Err() != nil && ctx.Err() == nil {
			return nil, stillExiting()
		}
		a.mu.Lock()
		delete(a.killReasons, id)
		a.mu.Unlock()
		return nil, fmt.Errorf("kill %s: %w", id, err)
	}
	a.log.Info("killed container", "id", id, "grace", grace, "reason", reason)
	done, err := a.Wait(kctx, id)
	if err != nil && kctx.Err() != nil && ctx.Err() == nil {
		return nil, stillExiting()
	}
	return done, err
}

// Resize changes a running container's limits. Growing needs free
// resources. Errors wrap ErrNotFound, ErrNotRunning, ErrInvalidArgument or
// ErrInsufficientResources.
func (a *Agent) Resize(ctx context.Context, ref string, u Update) (*Container, error) {
	return a.resize(ctx, ref, u, nil)
}

// resize is Resize that also merges labels into the container's labels,
// checkpointed with the new limits.
func (a *Agent) resize(ctx context.Context, ref string, u Update, labels map[string]string) (*Container, error) {
	if u.MilliCPUs < 0 || u.MemMiB < 0 || u.Pids < 0 || u.NetMbit < 0 {
		return nil, fmt.Errorf("update: %w: negative value", ErrInvalidArgument)
	}
	if u.CPUMode != "" {
		if _, err := isolator.ParseCPUMode(string(u.CPUMode)); err != nil {
			return nil, fmt.Errorf("update: %w: %w", ErrInvalidArgument, err)
		}
	}
	if u == (Update{}) {
		return nil, fmt.Errorf("update: %w: nothing to change", ErrInvalidArgument)
	}
	// Resizes are serialised; a.mu is not held across the runtime call
	// (which may wait behind a kill in the containerizer), so the growth is
	// reserved first and settled afterwards.
	a.resizeMu.Lock()
	defer a.resizeMu.Unlock()
	a.mu.Lock()
	c, err := a.resolveLocked(ref)
	if err != nil {
		a.mu.Unlock()
		return nil, err
	}
	if c.State != StateRunning {
		a.mu.Unlock()
		return nil, fmt.Errorf("update %s: %w", c.ID, ErrNotRunning)
	}
	if c.Quarantine != "" {
		a.mu.Unlock()
		return nil, fmt.Errorf("update %s: %w: its checkpoint record is quarantined (%s)", c.ID, ErrInvalidArgument, c.Quarantine)
	}
	id, limits := c.ID, c.Limits
	if u.MilliCPUs != 0 {
		limits.MilliCPUs = u.MilliCPUs
	}
	if u.MemMiB != 0 {
		limits.MemoryBytes = u.MemMiB << 20
	}
	if u.Pids != 0 {
		limits.Pids = u.Pids
	}
	if u.CPUMode != "" {
		limits.SetCPUMode(u.CPUMode)
	}
	if u.NetMbit != 0 {
		if !limits.Network {
			a.mu.Unlock()
			return nil, fmt.Errorf("update %s: %w: net_bw needs a container with networking", c.ID, ErrInvalidArgument)
		}
		limits.NetBandwidthMbit = u.NetMbit
	}
	old := c.Resources()
	next := Resources{MilliCPUs: limits.MilliCPUs, MemMiB: limits.MemoryBytes >> 20}
	if !c.Revocable {
		next.NetMbit = limits.NetBandwidthMbit
	}
	if err := a.resizeLocked(id, poolOf(c), old, next); err != nil {
		a.mu.Unlock()
		return nil, fmt.Errorf("update %s: %w", id, err)
	}
	a.mu.Unlock()

	err = a.rt.Update(ctx, id, limits)

	a.mu.Lock()
	defer a.mu.Unlock()
	// The claim holds the larger of both sizes until settled here; if the
	// container exited meanwhile its claim is gone already.
	a.settleLocked(id, err == nil)
	if err != nil {
		return nil, err // the runtime's error names the operation and the container
	}
	if c.State != StateRunning {
		return nil, fmt.Errorf("update %s: %w", id, ErrNotRunning)
	}
	c.Limits = limits
	if len(labels) > 0 && c.Labels == nil {
		c.Labels = make(map[string]string, len(labels))
	}
	for k, v := range labels {
		c.Labels[k] = v
	}
	a.saveLocked(c)
	a.log.Info("resized container", "id", c.ID, "resources", next, "pids", limits.Pids, "cpu_limit_mode", limits.CPUMode())
	return c.clone(), nil
}

// Stats samples a running container and returns it with the sample.
// Errors wrap ErrNotFound or ErrNotRunning.
func (a *Agent) Stats(ctx context.Context, ref string) (*Container, *isolator.Statistics, error) {
	c, err := a.Get(ref)
	if err != nil {
		return nil, nil, err
	}
	if c.State != StateRunning {
		return nil, nil, fmt.Errorf("stats %s: %w", c.ID, ErrNotRunning)
	}
	st, err := a.rt.Usage(ctx, c.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("stats %s: %w", c.ID, err)
	}
	return c, st, nil
}

// Destroy removes a container: its record, cgroups, state and sandbox. A
// running container needs force (it is then killed without grace).
// Errors wrap ErrNotFound or ErrRunning.
func (a *Agent) Destroy(ctx context.Context, ref string, force bool) error {
	c, err := a.Get(ref)
	if err != nil {
		return err
	}
	if c.State == StateLaunching {
		return fmt.Errorf("destroy %s: %w: its launch or restart is under way", c.ID, ErrRunning)
	}
	if c.State != StateExited {
		if !force {
			return fmt.Errorf("destroy %s: %w (kill it first or use force)", c.ID, ErrRunning)
		}
		if _, err := a.Kill(ctx, c.ID, 0); err != nil && !errors.Is(err, ErrNotRunning) {
			return fmt.Errorf("destroy %s: %w", c.ID, err)
		}
	}
	return a.remove(ctx, c.ID)
}

func (a *Agent) remove(ctx context.Context, id string) error {
	if err := a.rt.Destroy(ctx, id); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("destroy %s: %w", id, err)
	}
	if err := os.RemoveAll(filepath.Dir(a.held(id).sandbox)); err != nil { // a failed restart's
		return fmt.Errorf("destroy %s: %w", id, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.containers[id]; c != nil && a.names[c.Name] == id {
		delete(a.names, c.Name)
	}
	delete(a.containers, id)
	delete(a.done, id)
	delete(a.unsaved, id)
	if err := a.store.delete(id); err != nil {
		return fmt.Errorf("destroy %s: %w", id, err)
	}
	for i, q := range a.quarantined {
		if q.ID == id { // rm was the operator's decision on the unreadable record
			a.quarantined = append(a.quarantined[:i:i], a.quarantined[i+1:]...)
			a.log.Warn("removed quarantined checkpoint record with its container", "id", id, "file", q.File)
			break
		}
	}
	a.log.Info("destroyed container", "id", id)
	return nil
}

// collect applies the retention policy to finished containers.
func (a *Agent) collect(ctx context.Context) {
	r := a.opts.Retention
	if r.MaxExited == 0 && r.MaxAge == 0 {
		return
	}
	var exited []*Container
	a.mu.Lock()
	for _, c := range a.containers {
		if c.State == StateExited && c.Quarantine == "" { // only rm removes a quarantined record
			exited = append(exited, c.clone())
		}
	}
	a.mu.Unlock()
	sort.Slice(exited, func(i, j int) bool { return finished(exited[i]).After(finished(exited[j])) })
	now := time.Now()
	for i, c := range exited {
		if (r.MaxExited > 0 && i >= r.MaxExited) || (r.MaxAge > 0 && now.Sub(finished(c)) > r.MaxAge) {
			if err := a.remove(ctx, c.ID); err != nil {
				a.log.Warn("retention: destroy container", "id", c.ID, "err", err)
			}
		}
	}
}

func finished(c *Container) time.Time {
	if c.Exit != nil && !c.Exit.FinishedAt.IsZero() {
		return c.Exit.FinishedAt
	}
	return c.CreatedAt
}

// Info describes the agent and its resource accounting.
func (a *Agent) Info() Info {
	cache := a.imageCache() // under the store's lock, before the agent's
	a.mu.Lock()
	defer a.mu.Unlock()
	in := Info{
		ID: a.id, Version: a.opts.Version, StateDir: a.opts.StateDir, CgroupParent: a.opts.CgroupParent, CPUMode: a.opts.CPUMode,
		Total: a.opts.Resources, Used: a.usedLocked(false), Free: resourcesOf(a.ledger.Free().NonRevocable()),
		StartedAt: a.started, Quarantined: append([]Quarantined(nil), a.quarantined...),
		Checkpoint: a.checkpointLocked(), LogMaxSize: a.opts.LogMaxSize, LogMaxFiles: a.opts.LogMaxFiles,
		ImageCache: cache,
	}
	for _, c := range a.containers {
		if c.State == StateExited {
			in.Exited++
		} else {
			in.Running++
		}
	}
	if a.over != nil {
		st := a.over.status(a.usedLocked(true))
		in.Oversub = &st
	}
	if wr, ok := a.rt.(warmReporter); ok {
		w := wr.WarmSandboxes()
		in.Warm = &w
	}
	return in
}

// cgroupOf returns c's cgroup path: the runtime's, else
// <CgroupParent>/<ID> ("" without a parent).
func (a *Agent) cgroupOf(c *Container) string {
	if c.CgroupPath != "" {
		return c.CgroupPath
	}
	if a.opts.CgroupParent == "" {
		return ""
	}
	return path.Join(a.opts.CgroupParent, c.ID)
}

// Containers lists the running containers (monitor.Source).
func (a *Agent) Containers(context.Context) ([]monitor.ContainerInfo, error) {
	var out []monitor.ContainerInfo
	for _, c := range a.List() {
		if c.State != StateRunning {
			continue
		}
		cg := a.cgroupOf(c)
		out = append(out, monitor.ContainerInfo{
			ID: c.ID, Name: c.Name, CgroupPath: cg, Limits: c.Limits, Revocable: c.Revocable,
			StartedAt: c.StartedAt, Labels: c.Labels, Stopping: a.over != nil && a.over.isKilling(c.ID),
		})
	}
	return out, nil
}

// Usage samples a running container by ID (monitor.Source). Errors wrap
// ErrNotFound or ErrNotRunning.
func (a *Agent) Usage(ctx context.Context, id string) (*isolator.Statistics, error) {
	_, st, err := a.Stats(ctx, id)
	return st, err
}

var _ monitor.Source = (*Agent)(nil)

// DefaultUser is the user of containers when neither the launch nor
// Options.DefaultUser names one.
const DefaultUser = "nobody"

// CheckUser reports whether containers may run as user on an agent with
// allowRoot, in a user namespace of range userns when it is not nil:
// cmd/brim checks --default-user with it before creating anything.
// Errors wrap ErrInvalidArgument or ErrRootNotAllowed.
func CheckUser(user string, allowRoot bool, userns *subid.Range) error {
	_, err := resolveUser(user, allowRoot, userns)
	return err
}

// resolveUser resolves user in the host's user database. Without a user
// namespace (userns nil) root (uid 0) needs allowRoot; in one, user's IDs
// must fall inside the range, and root is allowed (it is the range's
// first host uid). Errors wrap ErrInvalidArgument or ErrRootNotAllowed.
func resolveUser(user string, allowRoot bool, userns *subid.Range) (hostuser.ID, error) {
	return resolveUserIn(hostUser, user, allowRoot, userns)
}

// hostUser resolves a user in the host's user database.
func hostUser(user string) (hostuser.ID, error) { return hostuser.Lookup("/", user) }

// resolveUserIn is resolveUser in the user database lookup reads (an
// image's, for a container of the image).
func resolveUserIn(lookup func(string) (hostuser.ID, error), user string, allowRoot bool, userns *subid.Range) (hostuser.ID, error) {
	id, err := lookup(user)
	if err != nil {
		return hostuser.ID{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if userns != nil {
		if !userns.Contains(id.UID, id.GID) {
			return hostuser.ID{}, fmt.Errorf("%w: user %q (%s) is outside the user namespace's %d IDs (--userns-range %s)",
				ErrInvalidArgument, user, id, userns.Size, userns)
		}
		return id, nil
	}
	if id.Root() && !allowRoot {
		return hostuser.ID{}, fmt.Errorf("user %q is uid 0: %w; a task from the master needs the run_as_root ACL, or a user namespace", user, ErrRootNotAllowed)
	}
	return id, nil
}
