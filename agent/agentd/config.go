package agentd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/agent/agentserver"
	"github.com/brimnode/brim/containerizer"
	"github.com/brimnode/brim/estimator"
	"github.com/brimnode/brim/internal/bytesize"
	"github.com/brimnode/brim/internal/containerlog"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/isolator/network"
	"github.com/brimnode/brim/masterlink"
	"github.com/brimnode/brim/resources"
	"google.golang.org/grpc"
)

// Defaults of `brim agent`.
const (
	DefaultSocket       = "/run/brim/agent.sock"
	DefaultStateDir     = "/var/lib/brim/agent"
	DefaultCgroupParent = "brim"
	DefaultRetention    = "100,168h"
	// memReserveMiB is left to the host when Config.Resources is empty.
	memReserveMiB = 1024
)

// Limits of the oversubscription intervals.
const (
	MinEstimatorInterval = time.Second
	MinLoopInterval      = 100 * time.Millisecond
)

// Config is every setting of the agent daemon, one field per flag of
// `brim agent` (the flag is named in each field's comment). The zero value
// is not valid: start from DefaultConfig or DevConfig.
type Config struct {
	Socket   string // --socket: the local API's unix socket
	StateDir string // --state-dir: absolute
	// RunDir is --run-dir: the containers' runtime state (their
	// directories and libcontainer's state; not their sandboxes and
	// output), best on a memory file system; empty: StateDir.
	RunDir       string
	CgroupParent string // --cgroup-parent: made absolute, not "/"
	Resources    string // --resources, Mesos syntax; empty: the host's cpus and memory minus 1 GiB
	// Overcommit is --overcommit: --resources may name more cpus or
	// memory than the host has (refused otherwise).
	Overcommit bool
	// CPULimitMode is --cpu-limit-mode: how a container's cpus limit it
	// when its launch names no mode: "shares" (default), "quota", "both".
	CPULimitMode string
	Retention    string        // --sandbox-retention: "N", "DURATION" or "N,DURATION"
	KillGrace    time.Duration // --kill-grace: positive
	// SocketIdleTimeout is --socket-idle-timeout: a local API connection
	// with no call in progress is closed after it; 0 never, not negative.
	SocketIdleTimeout time.Duration
	// SocketMaxConns is --socket-max-connections: the local API's open
	// connections at most; 0 no bound, not negative.
	SocketMaxConns int
	// ConfigFile is --config: the TOML file the flags were read from, read
	// again on SIGHUP through Deps.Reload; empty: SIGHUP is logged and
	// nothing reloads.
	ConfigFile string
	Network    NetworkConfig
	Oversub    OversubConfig
	Security   SecurityConfig
	Safety     SafetyConfig // memory and IO safety of oversubscription (safety.go)
	Logs       LogConfig
	Image      ImageConfig // the image store (images.go)
	Warm       WarmConfig
	Link       LinkConfig
	// Version is reported by the local API.
	Version string
}

// SecurityConfig is the task-confinement flags (docs/security.md).
type SecurityConfig struct {
	DefaultUser string   // --default-user: NAME, UID, NAME:GROUP or UID:GID
	AllowRoot   bool     // --allow-root-tasks
	DefaultPids int64    // --default-pids: 0 unlimited, not negative
	HidePaths   []string // --hide-paths: absolute, below /
	UserNS      bool     // --userns: every task in a user namespace
	UserNSRange string   // --userns-range: START:COUNT or a NAME of the subid files
	SubUIDFile  string   // --subuid-file (default /etc/subuid)
	SubGIDFile  string   // --subgid-file (default /etc/subgid)
}

// WarmConfig is the --warm-sandbox* flags: containers made ahead of
// launches, per root and user namespace, which a launch takes instead of
// making one (docs/operators.md, "Warm sandboxes"). How many are kept
// follows the launch rate, none once idle.
type WarmConfig struct {
	// Sandboxes is --warm-sandboxes: the most kept per shape, 0 to 64;
	// 0 keeps none.
	Sandboxes int
	// Idle is --warm-sandbox-idle: how long a shape without launches
	// keeps its sandboxes; positive.
	Idle time.Duration
	// Memory is --warm-sandbox-memory: the most memory they may hold in
	// all (a size, their measured proportional set size); positive.
	Memory string
	// RecycleShims is --shim-recycle: a shim whose container has ended
	// takes the next containers (containerizer.Config.NoRecycleShims
	// when false).
	RecycleShims bool
	// PrepareShims is --shim-prepare: a warm shim makes the next
	// container's namespaces and /dev, /tmp and /sys mounts while it waits
	// (containerizer.Config.NoShimPrepare when false).
	PrepareShims bool
}

// maxWarmSandboxes bounds --warm-sandboxes.
const maxWarmSandboxes = 64

// resolve checks the warm sandbox flags and returns the memory bound.
func (w WarmConfig) resolve() (int64, error) {
	if w.Sandboxes < 0 || w.Sandboxes > maxWarmSandboxes {
		return 0, bad("--warm-sandboxes", "%d: want 0 (none) to %d", w.Sandboxes, maxWarmSandboxes)
	}
	if w.Idle <= 0 {
		return 0, bad("--warm-sandbox-idle", "%s: must be positive", w.Idle)
	}
	mem, err := bytesize.Parse(w.Memory)
	if err != nil {
		return 0, bad("--warm-sandbox-memory", "%w", err)
	}
	if mem <= 0 {
		return 0, bad("--warm-sandbox-memory", "%s: must be positive (--warm-sandboxes 0 keeps none)", w.Memory)
	}
	return mem, nil
}

// LogConfig is the --log-* flags of containers' output: every container's
// log is rotated files (internal/containerlog), bounded on disk and in
// the rate its shim writes at.
type LogConfig struct {
	MaxSize  string // --log-max-size: a size (10MiB, 512k), at least 64KiB; per container: container run --log-max-size
	MaxFiles int    // --log-max-files: 1 to 1000; per container: container run --log-max-files
	// Rate is --log-rate: what a shim writes of its container's log per
	// second at most (a size; 0: no bound); beyond it the container
	// waits on its output.
	Rate string
}

// NetworkConfig is the --network* flags.
type NetworkConfig struct {
	Enabled      bool   // --network
	Bridge       string // --network-bridge
	Subnet       string // --network-subnet
	HostRateMbit int64  // --network-host-rate: positive
	NAT          bool   // --network-nat
	NetNSDir     string // --network-netns-dir; empty: /run/brim/netns/<bridge>
	// AllowHost is --network-allow-host: the host ports containers may
	// reach, PORT[/tcp|/udp] each; everything else is rejected.
	AllowHost []string
	Isolate   bool // --network-isolate: containers cannot reach each other
	// PortRange is --network-port-range START-END: the host ports port
	// mappings may use.
	PortRange string
}

// OversubConfig is the monitor, estimator, QoS and metrics flags.
type OversubConfig struct {
	Estimator         string        // --estimator: a registry name or "plugin:/path [args]"
	EstimatorOpts     []string      // --estimator-opt key=value
	EstimatorInterval time.Duration // --estimator-interval: at least MinEstimatorInterval
	QoS               string        // --qos
	QoSOpts           []string      // --qos-opt key=value
	QoSInterval       time.Duration // --qos-interval: at least MinLoopInterval
	MonitorInterval   time.Duration // --monitor-interval: at least MinLoopInterval
	MetricsListen     string        // --metrics-listen host:port; empty: no metrics server
	NoBPF             bool          // --no-bpf
}

// LinkConfig is the master link flags.
type LinkConfig struct {
	Master string // --master host:port; empty: standalone (local API only)
	// Discover finds the masters again when every listed one has failed
	// (--master etcd://…, resolved in cmd); nil: the list is fixed.
	Discover func(context.Context) ([]string, error)
	// RetryMin and RetryMax are --status-retry-min (positive) and
	// --status-retry-max (at least RetryMin).
	RetryMin, RetryMax time.Duration
	Principal          string // --principal: no ':'
	Secret             string // from --secret-file or $BRIM_SECRET (resolved in cmd)
	// PerfScore is --perf-score, the machine performance score sent to the
	// master for its meDRF sorter: > 0 as given, 0 measured at start
	// (MeasurePerfScore, under a second); never negative.
	PerfScore float64
	// DialOptions reach the master (--master-ca, resolved in cmd).
	DialOptions []grpc.DialOption
}

// DefaultConfig is `brim agent` without flags.
func DefaultConfig() Config {
	return Config{
		Socket:            DefaultSocket,
		StateDir:          DefaultStateDir,
		CgroupParent:      DefaultCgroupParent,
		Retention:         DefaultRetention,
		KillGrace:         agent.DefaultKillGrace,
		SocketIdleTimeout: agentserver.DefaultIdleTimeout,
		SocketMaxConns:    agentserver.DefaultMaxConns,
		CPULimitMode:      string(isolator.CPUModeShares),
		Network: NetworkConfig{
			Bridge:       network.DefaultBridge,
			Subnet:       network.DefaultSubnet.String(),
			HostRateMbit: network.DefaultHostRateMbit,
			PortRange:    isolator.DefaultPortRange.String(),
		},
		Oversub: OversubConfig{
			Estimator:         "noop",
			EstimatorInterval: estimator.DefaultInterval,
			QoS:               "noop",
			QoSInterval:       time.Second,
			MonitorInterval:   time.Second,
		},
		Link: LinkConfig{RetryMin: masterlink.DefaultRetryMin, RetryMax: masterlink.DefaultRetryMax},
		Security: SecurityConfig{
			DefaultUser: agent.DefaultUser,
			DefaultPids: cgroups.DefaultPidsMax,
			HidePaths:   append([]string(nil), containerizer.DefaultHidePaths...),
		},
		Safety: DefaultSafety(),
		Warm: WarmConfig{
			Sandboxes: containerizer.DefaultWarmSandboxes,
			Idle:      containerizer.DefaultWarmSandboxIdle,
			Memory:    bytesize.Format(containerizer.DefaultWarmSandboxBytes),
			// On: a launch then starts no shim process (issue 35).
			RecycleShims: true,
			PrepareShims: true,
		},
		Logs: LogConfig{
			MaxSize:  bytesize.Format(containerlog.DefaultMaxSize),
			MaxFiles: containerlog.DefaultMaxFiles,
			Rate:     bytesize.Format(containerlog.DefaultRate),
		},
		Image: DefaultImageConfig(),
	}
}

// DevStateDir is `brim dev`'s default state dir; the agent's is its
// "agent" subdirectory.
const DevStateDir = "/var/lib/brim/dev"

// DevConfig is the agent of `brim dev` without flags: DefaultConfig with
// the state under DevStateDir (socket DevStateDir/agent.sock), its own
// cgroup parent and a short kill grace. `brim dev` sets Link.Master to
// the master it runs (or --join).
func DevConfig() Config {
	c := DefaultConfig()
	c.StateDir = filepath.Join(DevStateDir, "agent")
	c.Socket = filepath.Join(DevStateDir, "agent.sock")
	c.CgroupParent = "brim-dev"
	c.KillGrace = 5 * time.Second
	return c
}

// ConfigError is a bad setting, an operator's mistake found before
// anything is created. Flag names the flag (e.g. "--kill-grace").
type ConfigError struct {
	Flag string
	Err  error // its message starts with the flag
}

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// bad returns a *ConfigError for flag with the message "FLAG " + format.
func bad(flag, format string, args ...any) error {
	return &ConfigError{Flag: flag, Err: fmt.Errorf(flag+" "+format, args...)}
}

// resolved is a Config's parsed values.
type resolved struct {
	total     agent.Resources
	retention agent.Retention
	cgParent  string
	network   network.Config
	logs      containerlog.Limits
	cpuMode   isolator.CPUMode
	warmMem   int64 // --warm-sandbox-memory
}

// Validate checks every setting that needs no registry and no host access
// beyond stat-ing plugin paths; each error is a *ConfigError naming its
// flag. Values are never replaced by defaults: a zero or negative
// duration is refused.
func (c Config) Validate() error {
	_, err := c.resolve()
	return err
}

func (c Config) resolve() (resolved, error) {
	// Where the agent keeps things first, as `brim agent cleanup` checks
	// them (resolveWhere).
	r, err := c.resolveWhere()
	if err != nil {
		return r, err
	}
	if r.total, err = parseResources(c.Resources, c.Overcommit); err != nil {
		return r, err
	}
	if r.total, err = c.Image.offeredDisk(r.total); err != nil {
		return r, err
	}
	if r.cpuMode, err = isolator.ParseCPUMode(c.CPULimitMode); err != nil {
		return r, bad("--cpu-limit-mode", "%w", err)
	}
	if r.retention, err = agent.ParseRetention(c.Retention); err != nil {
		return r, bad("--sandbox-retention", "%q: %w", c.Retention, err)
	}
	if c.KillGrace <= 0 {
		return r, bad("--kill-grace", "%s: must be positive (the wait between SIGTERM and SIGKILL)", c.KillGrace)
	}
	if c.SocketIdleTimeout < 0 {
		return r, bad("--socket-idle-timeout", "%s: must not be negative (0: never close an idle connection)", c.SocketIdleTimeout)
	}
	if c.SocketMaxConns < 0 {
		return r, bad("--socket-max-connections", "%d: must not be negative (0: no bound)", c.SocketMaxConns)
	}
	if c.ConfigFile != "" && !path.IsAbs(c.ConfigFile) {
		return r, bad("--config", "%q: must be an absolute path (it is read again on SIGHUP)", c.ConfigFile)
	}
	if err := c.Security.validate(); err != nil {
		return r, err
	}
	if err := c.Safety.validate(); err != nil {
		return r, err
	}
	if r.logs, err = c.Logs.resolve(); err != nil {
		return r, err
	}
	if r.warmMem, err = c.Warm.resolve(); err != nil {
		return r, err
	}
	if err := c.Oversub.validate(); err != nil {
		return r, err
	}
	if err := c.Link.validate(); err != nil {
		return r, err
	}
	if _, err := c.Image.options(); err != nil {
		return r, err
	}
	return r, nil
}

// resolve parses the log flags.
func (l LogConfig) resolve() (containerlog.Limits, error) {
	var lim containerlog.Limits
	var err error
	if lim.MaxSize, err = bytesize.Parse(l.MaxSize); err != nil {
		return lim, bad("--log-max-size", "%w", err)
	}
	if lim.MaxSize < containerlog.MinMaxSize {
		return lim, bad("--log-max-size", "%s: want at least 64KiB (a few records of the longest line)", l.MaxSize)
	}
	lim.MaxFiles = l.MaxFiles
	if lim.MaxFiles < 1 || lim.MaxFiles > containerlog.MaxMaxFiles {
		return lim, bad("--log-max-files", "%d: want 1 to %d", l.MaxFiles, containerlog.MaxMaxFiles)
	}
	if lim.Rate, err = bytesize.Parse(l.Rate); err != nil {
		return lim, bad("--log-rate", "%w (0: no bound)", err)
	}
	return lim, nil
}

// parseResources parses --resources, or measures the host. Without
// overcommit, more cpus or memory than the host has is refused: a typo
// (cpus:100000) was accepted silently, and containers admitted against it
// never got what they were promised.
func parseResources(text string, overcommit bool) (agent.Resources, error) {
	if strings.TrimSpace(text) == "" {
		memMiB, err := hostMemMiB()
		if err != nil {
			return agent.Resources{}, fmt.Errorf("measure host memory: %w", err)
		}
		return agent.Resources{
			MilliCPUs: int64(runtime.NumCPU()) * 1000,
			MemMiB:    max(memMiB-memReserveMiB, memMiB/2),
		}, nil
	}
	r, err := resources.Parse(text)
	if err != nil {
		return agent.Resources{}, bad("--resources", "%q: %w", text, err)
	}
	if r.Ports() != nil {
		// Dropped before without a word; an operator used to Mesos
		// would take it for the ports containers may map.
		return agent.Resources{}, bad("--resources", "%q: ports: the agent offers no ports to the master; the host ports of port mappings are --network-port-range (default %s)", text, isolator.DefaultPortRange)
	}
	r = r.NonRevocable()
	out := agent.Resources{MilliCPUs: int64(r.CPUs()), MemMiB: int64(r.Mem()) / 1000, NetMbit: int64(r.NetBandwidth()) / 1000,
		DiskMiB: int64(r.Disk()) / 1000}
	if out.MilliCPUs <= 0 || out.MemMiB <= 0 {
		return agent.Resources{}, bad("--resources", "%q: need positive cpus and mem", text)
	}
	if overcommit {
		return out, nil
	}
	if host := int64(runtime.NumCPU()) * 1000; out.MilliCPUs > host {
		return agent.Resources{}, bad("--resources", "%q: cpus %s exceeds the host's %d cpus (--overcommit hands out more than the host has)",
			text, agent.FormatMilli(out.MilliCPUs), host/1000)
	}
	if host, err := hostMemMiB(); err == nil && out.MemMiB > host {
		return agent.Resources{}, bad("--resources", "%q: mem %d exceeds the host's %d MiB (--overcommit hands out more than the host has)",
			text, out.MemMiB, host)
	}
	return out, nil
}

// cgroupParent makes --cgroup-parent absolute: "brim" → "/brim". Relative
// cgroup paths would land under the agent's own cgroup.
func cgroupParent(p string) (string, error) {
	if !path.IsAbs(p) {
		p = "/" + p
	}
	p = path.Clean(p)
	if p == "/" {
		return "", bad("--cgroup-parent", "%q: want a cgroup path such as brim", p)
	}
	return p, nil
}

// resolveWhere checks and resolves where the agent keeps things: its
// socket, state dir, cgroup parent and network. `brim agent cleanup`
// needs these only; nothing else (an estimator plugin removed since, a
// user no longer there) may keep a node from being cleaned up.
func (c Config) resolveWhere() (resolved, error) {
	var r resolved
	if !path.IsAbs(c.Socket) {
		return r, bad("--socket", "%q: must be an absolute path", c.Socket)
	}
	if err := agentpb.CheckSocketPath(c.Socket); err != nil {
		return r, bad("--socket", "%w", err)
	}
	if !path.IsAbs(c.StateDir) {
		return r, bad("--state-dir", "%q: must be an absolute path", c.StateDir)
	}
	if err := containerizer.CheckRunDir(c.StateDir, c.RunDir); err != nil {
		return r, bad("--run-dir", "%w", err)
	}
	var err error
	if r.cgParent, err = cgroupParent(c.CgroupParent); err != nil {
		return r, err
	}
	if r.network, err = c.Network.resolve(c.StateDir); err != nil {
		return r, err
	}
	return r, nil
}

// resolve returns the isolator's Config (its New checks the rest).
func (n NetworkConfig) resolve(stateDir string) (network.Config, error) {
	subnet, err := netip.ParsePrefix(n.Subnet)
	if err != nil {
		return network.Config{}, bad("--network-subnet", "%q: %w", n.Subnet, err)
	}
	if n.HostRateMbit <= 0 {
		return network.Config{}, bad("--network-host-rate", "%d: must be positive", n.HostRateMbit)
	}
	ports, err := isolator.ParsePortRange(n.PortRange)
	if err != nil {
		return network.Config{}, bad("--network-port-range", "%w", err)
	}
	var allow []network.HostPort
	for _, s := range n.AllowHost {
		h, err := network.ParseHostPort(s)
		if err != nil {
			return network.Config{}, bad("--network-allow-host", "%w", err)
		}
		if slices.Contains(allow, h) {
			return network.Config{}, bad("--network-allow-host", "%s: listed twice", h)
		}
		allow = append(allow, h)
	}
	return network.Config{
		HostAllow:    allow,
		Isolate:      n.Isolate,
		Bridge:       n.Bridge,
		Subnet:       subnet,
		StateDir:     filepath.Join(stateDir, "network"),
		NetNSDir:     n.NetNSDir,
		HostRateMbit: n.HostRateMbit,
		NAT:          n.NAT,
		PortRange:    ports,
	}, nil
}

// checkNetworkState refuses to start an agent without --network over a
// state dir whose containers have networking: nothing would clean up their
// veths, namespaces and addresses.
func checkNetworkState(stateDir string, enabled bool) error {
	if enabled {
		return nil
	}
	recs, _ := filepath.Glob(filepath.Join(stateDir, "network", "*.json"))
	if len(recs) > 0 {
		return fmt.Errorf("%d containers in %s have networking: start the agent with --network (and the same --network-* flags)", len(recs), stateDir)
	}
	return nil
}

func (o OversubConfig) validate() error {
	if o.EstimatorInterval < MinEstimatorInterval {
		return bad("--estimator-interval", "%s: must be at least %s", o.EstimatorInterval, MinEstimatorInterval)
	}
	if o.QoSInterval < MinLoopInterval {
		return bad("--qos-interval", "%s: must be at least %s", o.QoSInterval, MinLoopInterval)
	}
	if o.MonitorInterval < MinLoopInterval {
		return bad("--monitor-interval", "%s: must be at least %s", o.MonitorInterval, MinLoopInterval)
	}
	if o.MetricsListen != "" {
		if _, port, err := net.SplitHostPort(o.MetricsListen); err != nil || port == "" {
			return bad("--metrics-listen", "%q: want host:port, e.g. 127.0.0.1:9105", o.MetricsListen)
		}
	}
	if strings.TrimSpace(o.Estimator) == "" {
		return &ConfigError{Flag: "--estimator", Err: errors.New("--estimator: empty (want noop, fixed, usage, idle or plugin:/path)")}
	}
	if strings.TrimSpace(o.QoS) == "" {
		return &ConfigError{Flag: "--qos", Err: errors.New("--qos: empty (want noop, load, interference or plugin:/path)")}
	}
	for _, f := range []struct{ flag, spec string }{{"--estimator", o.Estimator}, {"--qos", o.QoS}} {
		if err := checkPlugin(f.spec); err != nil {
			return bad(f.flag, "%q: %w", f.spec, err)
		}
	}
	return nil
}

// checkPlugin checks that a "plugin:/path [args]" spec names an executable
// file (plugins start lazily, so a typo would otherwise only show as an
// estimator or controller that never answers).
func checkPlugin(spec string) error {
	rest, ok := strings.CutPrefix(spec, "plugin:")
	if !ok {
		return nil
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return errors.New("no plugin path")
	}
	if !path.IsAbs(f[0]) {
		return fmt.Errorf("plugin path %q: must be absolute", f[0])
	}
	fi, err := os.Stat(f[0])
	if err != nil {
		return fmt.Errorf("plugin: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("plugin %s: not an executable file", f[0])
	}
	return nil
}

func (l LinkConfig) validate() error {
	if l.RetryMin <= 0 {
		return bad("--status-retry-min", "%s: must be positive", l.RetryMin)
	}
	if l.RetryMax < l.RetryMin {
		return bad("--status-retry-max", "%s: must be at least --status-retry-min (%s)", l.RetryMax, l.RetryMin)
	}
	if strings.Contains(l.Principal, ":") {
		return bad("--principal", "%q: must not contain ':'", l.Principal)
	}
	if l.PerfScore < 0 || math.IsNaN(l.PerfScore) || math.IsInf(l.PerfScore, 0) {
		return bad("--perf-score", "%v: must be a positive number, or 0 to measure it", l.PerfScore)
	}
	return nil
}

func (s SecurityConfig) validate() error {
	if s.DefaultPids < 0 {
		return bad("--default-pids", "%d: must not be negative (0: unlimited)", s.DefaultPids)
	}
	userns, err := s.usernsRange()
	if err != nil {
		return err
	}
	if !s.UserNS {
		userns = nil // the default user runs outside one
	}
	if err := agent.CheckUser(s.DefaultUser, s.AllowRoot, userns); err != nil {
		return bad("--default-user", "%q: %w", s.DefaultUser, err)
	}
	for _, p := range s.HidePaths {
		if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
			return bad("--hide-paths", "%q: want absolute paths below /", p)
		}
	}
	return nil
}

// hidePaths is what the containerizer masks besides the state dir: the
// operator's list, the directory of the local API's socket (a task that
// dials it gets ENOENT) and the netns directory.
func (s SecurityConfig) hidePaths(socket, netnsDir string) []string {
	if netnsDir == "" {
		netnsDir = network.DefaultNetNSDir
	}
	out := append([]string(nil), s.HidePaths...)
	for _, d := range []string{filepath.Dir(socket), netnsDir} {
		if filepath.IsAbs(d) && filepath.Clean(d) != "/" {
			out = append(out, d)
		}
	}
	return out
}
