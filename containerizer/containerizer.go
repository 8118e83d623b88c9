package containerizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/brimnode/brim/internal/atomicfile"
	"github.com/brimnode/brim/internal/containerlog"
	"github.com/brimnode/brim/internal/errdefs"
	"github.com/brimnode/brim/internal/exitstatus"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/internal/dirquota"
	"github.com/brimnode/brim/internal/subid"
	"github.com/brimnode/brim/isolator"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrNotFound is returned for a container ID the containerizer does
	// not know.
	// It is agent.ErrNotFound too (internal/errdefs).
	ErrNotFound = errdefs.ErrContainerNotFound
	// ErrExist is returned by Launch for an ID already in use.
	ErrExist = errors.New("container already exists")
	// ErrNotRunning is returned for an operation that needs a running
	// container after it has exited.
	ErrNotRunning = errors.New("container not running")
	// ErrCommandNotFound is returned by Launch when the command does not
	// exist (or is not executable) in the container's root filesystem.
	ErrCommandNotFound = executor.ErrCommandNotFound
	// ErrNoWorkDir is returned by Launch when the working directory does
	// not exist in the read-only root filesystem and cannot be made.
	ErrNoWorkDir = errors.New("no such working directory")
	// ErrNotSupported is returned on hosts that cannot run containers.
	ErrNotSupported = executor.ErrNotSupported
	// ErrUserNS is returned by Launch when a container's user namespace
	// cannot be set up: a range that does not hold the user, or a state
	// dir the namespace's root cannot reach.
	ErrUserNS = errors.New("user namespace cannot be set up")
)

// DefaultHidePaths are the host paths an agent masks from containers on
// the host root unless its operator configures another list: password
// hashes, root's home, the ssh host keys, brim's own state and the run
// directory (sockets of brim, systemd, the container runtimes).
var DefaultHidePaths = []string{"/etc/shadow", "/etc/gshadow", "/root", "/etc/ssh", "/var/lib/brim", "/run"}

// DefaultKillGrace is the time a container gets between SIGTERM and
// SIGKILL when Config.KillGrace is zero.
const DefaultKillGrace = 3 * time.Second

// Config configures a Containerizer.
type Config struct {
	// StateDir holds the containers' directories and libcontainer's state
	// (e.g. /var/lib/brim/agent). Required, absolute.
	StateDir string
	// RunDir, when set, holds the containers' runtime state instead of
	// StateDir: their directories (bundle, record, shim pid and log, exit
	// record, mount points) and libcontainer's state, while each
	// container's sandbox and output stay in StateDir/containers/<id>.
	// It belongs on a memory file system (/run under systemd, as runc's
	// and containerd's runtime state): that state ends with the containers
	// at a reboot, and every launch makes and removes about twenty files
	// there. Absolute, not below StateDir's containers.
	RunDir string
	// Isolators prepare, isolate, resize, measure and clean up containers;
	// one of them must set the cgroup path (isolator/cgroups).
	Isolators []isolator.Isolator
	// ShimBinary is the binary started as the shim (`brim shim` or
	// `brim-shim shim`); default: brim-shim next to os.Executable() when it
	// exists (it starts faster, see cmd/brim-shim), else os.Executable().
	ShimBinary string
	// KillGrace is the default grace period of Kill; default
	// DefaultKillGrace.
	KillGrace time.Duration
	// WarmShims is how many shims are kept started ahead of launches,
	// each waiting for a container: a launch that finds one skips the
	// shim's process start-up (a burst of launches falls back to cold
	// starts); a taken shim is replaced once its launch is done. 0 means
	// 1; negative means none.
	WarmShims int
	// NoRecycleShims makes every shim exit after its container. By
	// default a warm shim whose container has ended, once it has left the
	// container's directory as it found it, becomes a warm shim again
	// (executor.RunOptions.Recycle): a launch then costs no shim process
	// start and exit. Up to WarmShims+recycledSpare shims wait so;
	// without warm shims (WarmShims negative) none is recycled.
	NoRecycleShims bool
	// NoShimPrepare keeps warm shims from making, while they wait, the
	// next container's network, IPC and UTS namespaces and its /dev,
	// /tmp and /sys mounts (executor.RunOptions.Prepare: a container without a
	// user namespace then finds them made, ≈ 1.5 ms off a cold launch);
	// libcontainer then makes them at every launch.
	NoShimPrepare bool
	// ShimTimeout is how long a call to a shim may wait for its answer
	// beyond the work asked for; a shim that stays silent longer is
	// escalated (see Kill). Default executor.DefaultCallTimeout.
	ShimTimeout time.Duration
	// LaunchTimeout bounds a launch's handshake with its shim (from the
	// shim's start to "running"); default DefaultLaunchTimeout.
	LaunchTimeout time.Duration
	// WarmSandboxes is the most warm sandboxes kept ready per shape (see
	// pool_linux.go): containers made ahead of launches, which a launch
	// of the same root and user namespace takes instead of making one.
	// How many are kept follows the launch rate, down to none when idle.
	// 0 means DefaultWarmSandboxes; negative means none. Only with
	// isolators that are all isolator.Sandboxers (isolator/cgroups is).
	WarmSandboxes int
	// WarmSandboxIdle is how long a shape without launches keeps warm
	// sandboxes; default DefaultWarmSandboxIdle.
	WarmSandboxIdle time.Duration
	// WarmSandboxMemory bounds what the warm sandboxes hold (their
	// measured proportional set size); default DefaultWarmSandboxBytes.
	WarmSandboxMemory int64
	// WarmSandboxMinAvailable is the host's available memory
	// (MemAvailable) under which no warm sandbox is kept; default a
	// twentieth of the host's memory.
	WarmSandboxMinAvailable int64
	// WarmClaimTimeout bounds a launch's claim of a warm sandbox, from
	// the rename to the shim's "running": a sandbox whose shim or
	// trampoline has not answered by then is destroyed (never offered
	// again) and the launch goes cold. Far below LaunchTimeout, so that
	// a stuck sandbox costs a launch seconds, not minutes; default
	// DefaultWarmClaimTimeout.
	WarmClaimTimeout time.Duration
	// HidePaths are host paths masked from containers on the host root,
	// besides StateDir which always is (see executor.Bundle.HidePaths):
	// cmd/brim gives the agent socket's directory, the netns directory and
	// the operator's list (DefaultHidePaths unless configured).
	HidePaths []string
	// LogMaxSize and LogMaxFiles bound the output of a container whose
	// Spec leaves them 0 (see containerlog.Limits); defaults
	// containerlog.DefaultMaxSize and DefaultMaxFiles.
	LogMaxSize  int64
	LogMaxFiles int
	// LogRate bounds how fast a shim writes its container's log, in
	// bytes per second (containerlog.Limits.Rate): beyond it the
	// container blocks on its output. 0: containerlog.DefaultRate;
	// negative: no bound.
	LogRate int64
	// Log receives the containerizer's log; default discards.
	Log *slog.Logger
	// Images makes and removes the roots of containers launched from an
	// image (Spec.Image): the image store. nil: such launches fail.
	Images Snapshotter
}

// Defaults of Config's warm sandbox fields.
const (
	DefaultWarmSandboxes    = 4
	DefaultWarmSandboxIdle  = 30 * time.Second
	DefaultWarmSandboxBytes = 256 << 20
	// DefaultWarmClaimTimeout is Config.WarmClaimTimeout's default: a
	// claim takes a few milliseconds (tens on a loaded host); a shim
	// that has not answered in seconds is stuck, and a cold launch costs
	// less than waiting for it.
	DefaultWarmClaimTimeout = 5 * time.Second
)

// SandboxPrefix starts the name of every warm sandbox: its directory in
// the state dir's containers/, its cgroups and its libcontainer ID until
// a launch claims it. They are the agent's own (made ahead of launches,
// removed when it stops, by the next agent's Recover after a crash, and
// by `brim agent cleanup`); no container ID may start with it.
const SandboxPrefix = "warm-"

// DefaultLaunchTimeout is Config.LaunchTimeout's default: far beyond a
// launch on a loaded host (tens of ms to seconds), short enough that a
// hung shim does not hold a launch for ever.
const DefaultLaunchTimeout = 2 * time.Minute

// shimMisses is how many probes in a row a shim may leave unanswered while
// the containerizer waits for its container before it is escalated: one
// slow answer on a loaded host kills nothing.
const shimMisses = 3

// Spec describes a container to launch.
type Spec struct {
	// ID is unique on the host: letters, digits and _ + - . only.
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// Command is the user process; Command[0] is looked up in PATH (from
	// Env, or the default PATH) in the root filesystem.
	Command []string `json:"command"`
	Env     []string `json:"env,omitempty"`
	Cwd     string   `json:"cwd,omitempty"`
	// Rootfs is a root filesystem directory, mounted read-only; "" runs on
	// the host root, read-only, with a private /tmp.
	Rootfs string `json:"rootfs,omitempty"`
	// Image runs the container on an image's root instead: the image ID
	// (its config digest) in Config.Images, which leases it to the
	// container and gives it its own upper dir, released at Destroy. The
	// caller resolves the image's defaults into Command, Env, Cwd and
	// User (a numeric UID:GID from the image's user database).
	Image string `json:"image,omitempty"`
	// ReadWrite makes an image root writable (its writes, up to
	// Limits.DiskBytes, land in the upper dir); false: read-only like the
	// host root.
	ReadWrite bool `json:"read_write,omitempty"`
	// User runs the process: NAME, UID, NAME:GROUP or UID:GID resolved
	// in the host's /etc/passwd and /etc/group (internal/hostuser); the
	// sandbox is owned by it. "" is root: the agent applies its default
	// user and refuses root unless allowed, the containerizer does not.
	User string `json:"user,omitempty"`
	// UserNS runs the container in a user namespace mapping its IDs onto
	// the range: User is then resolved as the container's IDs, which must
	// fall inside it, and the sandbox is owned by their host IDs. nil:
	// none.
	UserNS *subid.Range      `json:"userns,omitempty"`
	Limits isolator.Limits   `json:"limits"`
	Labels map[string]string `json:"labels,omitempty"`
	// LogMaxSize and LogMaxFiles bound the container's output on disk
	// (containerlog.Limits); 0: Config's. Launch records the values in
	// force.
	LogMaxSize  int64 `json:"log_max_size,omitempty"`
	LogMaxFiles int   `json:"log_max_files,omitempty"`
	// Sandbox and LogDir, when set, are a previous run's sandbox and log
	// directories (kept by a restart), moved into place instead of new
	// ones, the log going on where it ended, and moved back when the
	// launch fails.
	Sandbox string `json:"-"`
	LogDir  string `json:"-"`
	// Stdin gives the container a stdin to attach to; Tty a terminal (of
	// TtySize when set) whose output is logged as stdout.
	Stdin   bool               `json:"stdin,omitempty"`
	Tty     bool               `json:"tty,omitempty"`
	TtySize *executor.TermSize `json:"tty_size,omitempty"`
}

// State is a container's lifecycle state.
type State string

// States.
const (
	StateRunning State = "running"
	StateExited  State = "exited"
)

// ExitStatus records how a container ended: exit code or signal, and
// whether the memory limit was hit (OOMKilled, Reason "memory-limit").
// It is internal/exitstatus.Status, the one definition.
type ExitStatus = exitstatus.Status

// Reasons in ExitStatus.Reason (internal/exitstatus, the one vocabulary).
const (
	ReasonMemoryLimit = exitstatus.ReasonMemoryLimit
	ReasonKilled      = exitstatus.ReasonKilled
	ReasonShimLost    = exitstatus.ReasonShimLost
	// ReasonShimUnresponsive: the shim stopped answering; the
	// containerizer killed it and the container's processes.
	ReasonShimUnresponsive = exitstatus.ReasonShimUnresponsive
)

// Info describes a container.
type Info struct {
	ID, Name   string
	Spec       Spec
	State      State
	Pid        int // the init's pid on the host
	ShimPid    int
	StartedAt  time.Time
	Exit       *ExitStatus // set once State is StateExited
	SandboxDir string
	// LogDir holds the container's output (internal/containerlog); a
	// container launched before it had stdout and stderr files in
	// SandboxDir instead (LogMaxFiles 0 in its Spec).
	LogDir string
	// Address is the container's IPv4 address while it has networking;
	// kept (as launched) after its exit, when the address is free again.
	Address string
	// CgroupPath is the container's cgroup path below each hierarchy's
	// root: the cgroup isolator's "<parent>/<id>", but for a container
	// made from a warm sandbox on cgroup v2, which keeps the sandbox's
	// group ("<parent>/warm-<hex>").
	CgroupPath string
}

// Containerizer launches and supervises containers. It is safe for
// concurrent use. Dropping it (or the agent dying) leaves the containers
// running; a new Containerizer on the same StateDir reattaches with
// Recover.
type Containerizer struct {
	cfg      Config
	log      *slog.Logger
	dir      string // RunDir/containers (StateDir/containers without a RunDir)
	dataRoot string // StateDir/containers: sandboxes and logs (dir without a RunDir)
	runcRoot string // RunDir/runc (StateDir/runc without a RunDir)
	// spares are ended containers' data directories kept for the next
	// (nil without a RunDir: the data directory is the container's).
	spares *dataSpares

	// shimExe is a sealed memfd copy of ShimBinary (nil: run the file).
	shimExe *os.File
	// shimStatic: ShimBinary needs no dynamic loader (see staticBinary).
	shimStatic bool
	// fillHold, set by tests before the first launch, is called at each
	// phase of a warm sandbox's making (fillPhase).
	fillHold func(phase string)

	poolMu     sync.Mutex
	warm       []*shimProc
	trimTimer  *time.Timer // ends recycled shims left idle (trimIdle)
	filling    int
	poolClosed bool
	poolWG     sync.WaitGroup

	pool *pool // warm sandboxes

	mu         sync.Mutex
	containers map[string]*container

	// quota is the project quotas of the upper dirs' file system, nil
	// where it has none (opened at the first image launch).
	quotaOnce sync.Once
	quota     atomic.Pointer[dirquota.Projects]
}

// container is the in-memory record of one container; fields other than
// exit and destroying are fixed once it is in the map.
type container struct {
	spec Spec
	dir  string
	// data holds the sandbox and the log: dir, or StateDir/containers/<id>
	// with a RunDir.
	data    string
	sandbox string // the warm sandbox it was made from (libcontainer's ID), "" for none
	// cgroupPath is the container's cgroup path (config.json's): on
	// cgroup v2 a claimed container's is its sandbox's.
	cgroupPath string
	// steps time the launch (the containerizer's steps, then the shim's
	// as its report gave them, "shim: " before their names), for
	// profiles; nil for a recovered container.
	steps     []executor.Step
	stepAt    time.Time // the end of the last step
	pid       int
	shimPid   int
	startedAt time.Time
	// shimDone is closed when a shim this process started has been reaped;
	// nil for recovered shims (not our children).
	shimDone chan struct{}
	// shimFreed is closed when a recycled shim (shimProc.recycle) has
	// reported its container ended and its directory left: it is a warm
	// shim again. nil for a shim that exits.
	shimFreed chan struct{}
	// shim is that recycled shim (its handshake pipes).
	shim *shimProc

	// escMu serialises the ways the containerizer records an exit itself
	// (escalate, markLost), so that only one does.
	escMu sync.Mutex

	mu         sync.Mutex
	exit       *ExitStatus
	destroying bool
	released   bool   // the isolators' Release ran (see release)
	address    string // from config.json
}

// runBase is the directory of the containers' runtime state: RunDir, or
// StateDir without one.
func (cfg *Config) runBase() string {
	if cfg.RunDir != "" {
		return cfg.RunDir
	}
	return cfg.StateDir
}

// layout returns the containers' directories (runtime state), their
// data directories' root (sandboxes and logs: StateDir/containers, dir
// itself without a RunDir) and libcontainer's state root.
func (cfg *Config) layout() (dir, dataRoot, runcRoot string) {
	return filepath.Join(cfg.runBase(), "containers"), filepath.Join(cfg.StateDir, "containers"), filepath.Join(cfg.runBase(), "runc")
}

// settleRunDir checks cfg's RunDir (CheckRunDir) and clears one that is
// the StateDir itself: the one directory, as without a RunDir.
func (cfg *Config) settleRunDir() error {
	if err := CheckRunDir(cfg.StateDir, cfg.RunDir); err != nil {
		return err
	}
	if cfg.RunDir != "" && filepath.Clean(cfg.RunDir) == filepath.Clean(cfg.StateDir) {
		cfg.RunDir = ""
	}
	return nil
}

// CheckRunDir refuses a RunDir that is relative, or whose containers/ or
// runc/ holds or sits in the state dir's containers/ (a container's
// runtime directory and its data directory would be one path, and
// removing one the other). RunDir "" or StateDir itself is fine.
func CheckRunDir(stateDir, runDir string) error {
	if runDir == "" || filepath.Clean(runDir) == filepath.Clean(stateDir) {
		return nil
	}
	if !filepath.IsAbs(runDir) || filepath.Clean(runDir) == "/" {
		return fmt.Errorf("run dir %q is not an absolute path below the root", runDir)
	}
	data, run := filepath.Join(stateDir, "containers"), filepath.Clean(runDir)
	for _, d := range []string{filepath.Join(run, "containers"), filepath.Join(run, "runc")} {
		if within(d, data) || within(data, d) {
			return fmt.Errorf("run dir %q: its %s and the state dir's containers/ overlap", runDir, filepath.Base(d))
		}
	}
	return nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && filepath.IsLocal(rel)
}

// newContainer returns the record of a container (or warm sandbox) named
// id, with its directories' paths.
func (c *Containerizer) newContainer(id string) *container {
	ct := &container{spec: Spec{ID: id}, dir: filepath.Join(c.dir, id)}
	if c.dataRoot != c.dir {
		ct.data = filepath.Join(c.dataRoot, id)
	}
	return ct
}

// record is config.json: what was launched.
type record struct {
	Version    int    `json:"version"`
	Spec       Spec   `json:"spec"`
	CgroupPath string `json:"cgroup_path,omitempty"`
	// Address is the container's IPv4 address, kept for inspect after the
	// network isolator released it at the exit.
	Address string `json:"address,omitempty"`
	// Sandbox is the warm sandbox the container was made from: its
	// libcontainer ID (runc/<Sandbox>). Empty for a cold launch (the ID).
	Sandbox   string    `json:"sandbox,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

const (
	recordVersion = 1
	recordFile    = "config.json"
	shimPidFile   = "shim.pid"
)

// New returns a Containerizer keeping its state under cfg.StateDir. It
// does not look at existing containers: call Recover for that.
func New(cfg Config) (*Containerizer, error) {
	if cfg.StateDir == "" || !filepath.IsAbs(cfg.StateDir) {
		return nil, fmt.Errorf("new containerizer: state dir %q is not absolute", cfg.StateDir)
	}
	if err := cfg.settleRunDir(); err != nil {
		return nil, fmt.Errorf("new containerizer: %w", err)
	}
	if cfg.ShimBinary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("new containerizer: find shim binary: %w", err)
		}
		cfg.ShimBinary = exe
		if small := filepath.Join(filepath.Dir(exe), "brim-shim"); isExecutable(small) {
			cfg.ShimBinary = small
		}
	}
	for _, p := range cfg.HidePaths {
		if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
			return nil, fmt.Errorf("new containerizer: hidden path %q is not an absolute path below the root", p)
		}
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.ShimTimeout <= 0 {
		cfg.ShimTimeout = executor.DefaultCallTimeout
	}
	if cfg.LaunchTimeout <= 0 {
		cfg.LaunchTimeout = DefaultLaunchTimeout
	}
	if cfg.LogMaxSize == 0 {
		cfg.LogMaxSize = containerlog.DefaultMaxSize
	}
	if cfg.LogMaxFiles == 0 {
		cfg.LogMaxFiles = containerlog.DefaultMaxFiles
	}
	switch {
	case cfg.LogRate == 0:
		cfg.LogRate = containerlog.DefaultRate
	case cfg.LogRate < 0:
		cfg.LogRate = 0
	}
	if err := (containerlog.Limits{MaxSize: cfg.LogMaxSize, MaxFiles: cfg.LogMaxFiles, Rate: cfg.LogRate}).Validate(); err != nil {
		return nil, fmt.Errorf("new containerizer: %w", err)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.warmDefaults()
	c := &Containerizer{
		cfg:        cfg,
		log:        cfg.Log.With("component", "containerizer"),
		containers: make(map[string]*container),
	}
	c.dir, c.dataRoot, c.runcRoot = cfg.layout()
	for _, d := range []string{c.dir, c.dataRoot, c.runcRoot} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, fmt.Errorf("new containerizer: %w", err)
		}
	}
	if c.dataRoot != c.dir {
		spares, err := newDataSpares(c.dataRoot)
		if err != nil {
			return nil, fmt.Errorf("new containerizer: %w", err)
		}
		c.spares = spares
	}
	c.shimStatic = staticBinary(cfg.ShimBinary)
	if exe, err := cloneShimBinary(cfg.ShimBinary, cfg.StateDir); err == nil {
		c.shimExe = exe
	} else {
		c.log.Warn("running shims from the binary file: each start seals its own copy", "err", err)
	}
	c.refill()
	c.pool = newPool(c)
	return c, nil
}

// warmDefaults fills in the defaults of the warm shims' and sandboxes'
// fields.
func (cfg *Config) warmDefaults() {
	switch {
	case cfg.WarmShims == 0:
		cfg.WarmShims = 1
	case cfg.WarmShims < 0:
		cfg.WarmShims = 0
	}
	if cfg.WarmSandboxes == 0 {
		cfg.WarmSandboxes = DefaultWarmSandboxes
	}
	if cfg.WarmSandboxIdle <= 0 {
		cfg.WarmSandboxIdle = DefaultWarmSandboxIdle
	}
	if cfg.WarmSandboxMemory == 0 {
		cfg.WarmSandboxMemory = DefaultWarmSandboxBytes
	}
	if cfg.WarmSandboxMinAvailable == 0 {
		cfg.WarmSandboxMinAvailable = memTotal() / 20
	}
	if cfg.WarmClaimTimeout <= 0 {
		cfg.WarmClaimTimeout = DefaultWarmClaimTimeout
	}
}

// Close releases the containerizer's resources: the warm sandboxes and
// warm shims (never given a container) and the sealed copy of the shim
// binary. Containers
// and their shims keep running. Call it once no call is in flight.
func (c *Containerizer) Close() error {
	c.pool.close()
	c.closePool()
	if q := c.quota.Load(); q != nil {
		_ = q.Close() // an fd of the file system only
	}
	if c.shimExe != nil {
		return c.shimExe.Close()
	}
	return nil
}

// mark ends the launch step since the last one as name.
func (ct *container) mark(name string) {
	now := time.Now()
	if !ct.stepAt.IsZero() {
		ct.steps = append(ct.steps, executor.Step{Name: name, Micros: now.Sub(ct.stepAt).Microseconds()})
	}
	ct.stepAt = now
}

// addShimSteps ends the launch's "shim" step (sent: when the shim was
// given its directory) with rep's steps: the hand-off to the shim, the
// shim's own steps, the hand-off of its report.
func (ct *container) addShimSteps(sent time.Time, rep *executor.Report) {
	ct.mark("shim")
	if rep.Start > 0 && rep.Sent > 0 {
		ct.steps = append(ct.steps, executor.Step{Name: "shim: hand-off to the shim", Micros: (rep.Start - sent.UnixNano()) / 1000})
	}
	for _, st := range rep.Steps {
		ct.steps = append(ct.steps, executor.Step{Name: "shim: " + st.Name, Micros: st.Micros})
	}
	if rep.Sent > 0 {
		ct.steps = append(ct.steps, executor.Step{Name: "shim: hand-off of its report", Micros: (ct.stepAt.UnixNano() - rep.Sent) / 1000})
	}
}

// runtimeID is libcontainer's ID of ct: its warm sandbox's name, or its
// own ID.
func (ct *container) runtimeID() string {
	if ct.sandbox != "" {
		return ct.sandbox
	}
	return ct.spec.ID
}

func (c *Containerizer) get(id string) (*container, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ct, ok := c.containers[id]
	if !ok || ct == nil {
		return nil, fmt.Errorf("container %q: %w", id, ErrNotFound)
	}
	return ct, nil
}

// exitStatus returns the container's exit status if it has exited (cached,
// or from exit.json), nil while it runs.
func (ct *container) exitStatus() *ExitStatus {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.exit == nil {
		if st, err := executor.ReadExit(ct.dir); err == nil {
			ct.exit = st
		}
	}
	return ct.exit
}

// dataDir is the directory of ct's sandbox and log.
func (ct *container) dataDir() string {
	if ct.data != "" {
		return ct.data
	}
	return ct.dir
}

func (ct *container) setExit(st *ExitStatus) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.exit == nil {
		ct.exit = st
	}
}

func (ct *container) info() *Info {
	ct.mu.Lock()
	spec, addr := ct.spec, ct.address
	ct.mu.Unlock()
	info := &Info{
		ID: spec.ID, Name: spec.Name, Spec: spec,
		State: StateRunning, Pid: ct.pid, ShimPid: ct.shimPid, StartedAt: ct.startedAt,
		SandboxDir: filepath.Join(ct.dataDir(), executor.SandboxDir), LogDir: filepath.Join(ct.dataDir(), executor.LogDir), Address: addr,
		CgroupPath: ct.cgroupPath,
	}
	if st := ct.exitStatus(); st != nil {
		info.State = StateExited
		info.Exit = st
	}
	return info
}

// writeRecord replaces dir's record. No fsync, like the bundle's files
// (executor.WriteBundle): the record describes processes that do not
// survive the machine, recovery removes a container whose record is
// unreadable, and it is written on every launch and update.
func writeRecord(dir string, rec *record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode %s: %w", recordFile, err)
	}
	return atomicfile.WriteFileNoSync(filepath.Join(dir, recordFile), data, 0o600)
}

func readRecord(dir string) (*record, error) {
	data, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", recordFile, err)
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("decode %s: %w", filepath.Join(dir, recordFile), err)
	}
	return &rec, nil
}

// isExecutable reports whether path is a regular file with an execute bit.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// PoolStats describes the warm sandboxes.
type PoolStats struct {
	// Enabled is false when warm sandboxes are off (Config.WarmSandboxes
	// negative, or an isolator cannot serve them).
	Enabled bool
	// Ready and Filling count the sandboxes ready and being made.
	Ready, Filling int
	// MemoryBytes is what the ready sandboxes hold: the proportional set
	// size of their shims and inits, measured once each is made.
	MemoryBytes int64
	// Claimed and Missed count the launches of a shape warm sandboxes
	// serve that took one and that found none (cold launches).
	Claimed, Missed uint64
	// Shapes are the shapes launched lately, with their K.
	Shapes []ShapeStats
}

// ShapeStats is one shape's part of PoolStats.
type ShapeStats struct {
	Shape  string
	Ready  int
	Target int
}
