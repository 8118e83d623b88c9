package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/brimnode/brim/agent/agentd"
	"github.com/brimnode/brim/cli"
	"github.com/brimnode/brim/estimator"
	"github.com/brimnode/brim/internal/logging"
	"github.com/brimnode/brim/qos"
)

var _ = registerSubcommand(newAgentCommand)

func newAgentCommand() *cobra.Command {
	af := newAgentFlags()
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: containers, checkpointing, the local API",
		Long: `Run the node agent. It serves the local API on --socket (root only), keeps
its checkpoint in --state-dir, and puts containers' cgroups under
--cgroup-parent. Stopping it (SIGTERM, SIGINT) never stops containers: a new
agent with the same --state-dir reattaches to them. Every flag is also a key
of the --config file (TOML; flags win); SIGHUP reads the file again (the log
level, the estimator and QoS controller with their options, the secret file)
and never stops the agent.`,
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := af.load(cmd.Flags()); err != nil {
				return err
			}
			log, level, err := af.lf.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := af.lo.resolve(&af.cfg.Link); err != nil {
				return err
			}
			d, err := newDaemon(af.cfg, log, level, reloadFrom(newAgentCommand, cmd.Flags(), af.cfg.ConfigFile))
			if err != nil {
				return err
			}
			if os.Geteuid() != 0 {
				d.Close()
				return cli.ExitError{Code: 1, Msg: "brim agent must run as root"}
			}
			return runDaemon(cmd.Context(), d, log)
		},
	}
	cmd.PersistentFlags().StringVar(&af.cfg.Socket, "socket", af.cfg.Socket, "unix socket of the local API (0600)")
	af.register(cmd.Flags())
	cmd.AddCommand(cli.AgentCommands(&af.cfg.Socket)...)
	cmd.AddCommand(newAgentCleanupCommand())
	cmd.AddCommand(
		newConfigCommand("agent", func(f *pflag.FlagSet) (func() error, *configFile) {
			c := newAgentFlags()
			f.StringVar(&c.cfg.Socket, "socket", c.cfg.Socket, "unix socket of the local API (0600)")
			c.register(f)
			return c.check, &c.cf
		}))
	cli.MarkUsageErrors(cmd)
	return cmd
}

// agentFlags are every flag of `brim agent`, bound to an agentd.Config.
type agentFlags struct {
	cfg agentd.Config
	lf  logFlags
	lo  linkOptions
	cf  configFile
}

func newAgentFlags() *agentFlags { return &agentFlags{cfg: agentd.DefaultConfig()} }

// register adds the daemon's flags to f (--socket is the caller's: it is
// a persistent flag of `brim agent`).
func (af *agentFlags) register(f *pflag.FlagSet) {
	f.StringVar(&af.cfg.StateDir, "state-dir", af.cfg.StateDir, "agent state: ID, checkpoint, containers' sandboxes")
	registerAgentFlags(f, &af.cfg)
	af.lf.register(f)
	f.StringVar(&af.cfg.Link.Master, "master", "", "master address host:port, or the masters of a highly available cluster, comma-separated (the agent follows the leader); empty: standalone (local API only)")
	af.lo.register(f)
	af.cf.register(f, defaultAgentConfig)
}

// load applies the configuration file to the parsed flags f.
func (af *agentFlags) load(f *pflag.FlagSet) error {
	p, err := af.cf.load(f)
	af.cfg.ConfigFile = p
	return err
}

// check validates the configuration as the daemon would, creating nothing.
func (af *agentFlags) check() error {
	if _, _, err := af.lf.logger(io.Discard); err != nil {
		return err
	}
	if err := af.cfg.Validate(); err != nil {
		return cli.ExitError{Code: 2, Msg: err.Error()}
	}
	return nil
}

// registerAgentFlags binds the agent daemon's flags that `brim agent` and
// `brim dev` share to cfg's fields, with cfg's values (the preset) as
// defaults.
func registerAgentFlags(f *pflag.FlagSet, cfg *agentd.Config) {
	f.StringVar(&cfg.RunDir, "run-dir", cfg.RunDir, "containers' runtime state (their directories and libcontainer's state; their sandboxes and output stay in the state dir): best on a memory file system such as /run/brim-agent (not under the socket's /run/brim, 0700: user namespaces could not reach it), lost at a reboot as the containers are; empty: the state dir; the package sets /run/brim-agent")
	f.StringVar(&cfg.CgroupParent, "cgroup-parent", cfg.CgroupParent, "cgroup under which containers' cgroups are made (in every hierarchy)")
	f.StringVar(&cfg.Resources, "resources", cfg.Resources, `resources to hand out, Mesos syntax, e.g. "cpus:4;mem:8192" (default: the host's cpus and memory minus 1 GiB)`)
	f.BoolVar(&cfg.Overcommit, "overcommit", cfg.Overcommit, "accept --resources naming more cpus or memory than the host has (refused otherwise)")
	f.StringVar(&cfg.CPULimitMode, "cpu-limit-mode", cfg.CPULimitMode, "how a container's --cpus limit it when its launch names no mode: shares (a proportional weight; idle cpu is used), quota (a CFS quota at --cpus: Docker's --cpus), both")
	f.StringVar(&cfg.Retention, "sandbox-retention", cfg.Retention, `finished containers kept: "N", "DURATION" or "N,DURATION"`)
	f.DurationVar(&cfg.KillGrace, "kill-grace", cfg.KillGrace, "default grace period between SIGTERM and SIGKILL (positive)")
	f.StringVar(&cfg.Logs.MaxSize, "log-max-size", cfg.Logs.MaxSize, "rotate a container's log (its stdout and stderr) at this size: 10MiB, 512k, … (at least 64KiB; container run --log-max-size overrides)")
	f.IntVar(&cfg.Logs.MaxFiles, "log-max-files", cfg.Logs.MaxFiles, "log files kept per container, the oldest removed: the log takes --log-max-size × this at most (1 to 1000; container run --log-max-files overrides)")
	f.StringVar(&cfg.Logs.Rate, "log-rate", cfg.Logs.Rate, "bytes of log a container's shim writes per second at most (0: no bound); beyond it the container waits on its output")
	f.IntVar(&cfg.Warm.Sandboxes, "warm-sandboxes", cfg.Warm.Sandboxes, "warm sandboxes (containers made ahead of launches, taken by a launch of the same root and user namespace) kept per shape at most; how many follows the launch rate, none when idle (0 to 64; 0: none)")
	f.DurationVar(&cfg.Warm.Idle, "warm-sandbox-idle", cfg.Warm.Idle, "a shape without launches for this long keeps no warm sandbox (positive)")
	f.BoolVar(&cfg.Warm.PrepareShims, "shim-prepare", cfg.Warm.PrepareShims, "a warm shim makes the next container's network, IPC and UTS namespaces and its /dev, /tmp and /sys mounts while it waits (containers without a user namespace); false: they are made at every launch")
	f.BoolVar(&cfg.Warm.RecycleShims, "shim-recycle", cfg.Warm.RecycleShims, "a shim whose container has ended, once it has left that container's directory as it found it, runs the next containers (no shim process start and exit per container); false: every shim exits with its container")
	f.StringVar(&cfg.Warm.Memory, "warm-sandbox-memory", cfg.Warm.Memory, "memory all warm sandboxes may hold at most (their measured proportional set size): 256MiB, …; none is kept either while the host's available memory is under a twentieth of its total")
	f.DurationVar(&cfg.SocketIdleTimeout, "socket-idle-timeout", cfg.SocketIdleTimeout, "close a local API connection with no call in progress after this long (clients reconnect by themselves; 0: never)")
	f.IntVar(&cfg.SocketMaxConns, "socket-max-connections", cfg.SocketMaxConns, "open local API connections at most; one more is closed at once (0: no bound)")
	f.DurationVar(&cfg.Link.RetryMin, "status-retry-min", cfg.Link.RetryMin, "first retry of an unacknowledged status update (positive; doubles each time)")
	f.DurationVar(&cfg.Link.RetryMax, "status-retry-max", cfg.Link.RetryMax, "longest wait between status update retries (at least --status-retry-min)")
	f.Float64Var(&cfg.Link.PerfScore, "perf-score", cfg.Link.PerfScore, "machine performance score sent to the master for --sorter medrf (positive; 0: measure it at start with a CPU benchmark of under a second)")

	n := &cfg.Network
	f.BoolVar(&n.Enabled, "network", n.Enabled, "enable the network isolator: containers run with --network get a netns, an address on --network-bridge and HTB shaping (net_bw)")
	f.StringVar(&n.Bridge, "network-bridge", n.Bridge, "host bridge of the containers' veths (at most 12 bytes)")
	f.StringVar(&n.Subnet, "network-subnet", n.Subnet, "IPv4 container subnet (/16 to /30); the bridge takes its first address")
	f.Int64Var(&n.HostRateMbit, "network-host-rate", n.HostRateMbit, "uplink rate in Mbit/s: the parent of every container's HTB class, best-effort ceiling")
	f.BoolVar(&n.NAT, "network-nat", n.NAT, "masquerade the subnet to the outside (nftables table brim-<bridge>) and turn on IPv4 forwarding")
	f.StringSliceVar(&n.AllowHost, "network-allow-host", n.AllowHost, "host ports containers may reach on the host's addresses, PORT[/tcp|/udp] comma-separated (e.g. 53/udp,53/tcp); everything else is rejected")
	f.BoolVar(&n.Isolate, "network-isolate", n.Isolate, "containers cannot reach each other (isolated bridge ports); port mappings still work from the host and other machines")
	f.StringVar(&n.NetNSDir, "network-netns-dir", n.NetNSDir, "directory of the containers' netns files (default /run/brim/netns/<bridge>)")
	f.StringVar(&n.PortRange, "network-port-range", n.PortRange, "host ports that port mappings (container run -p) may use, START-END; a mapping of a port outside it, or of one a host process holds, is refused")

	sec := &cfg.Security
	f.StringVar(&sec.DefaultUser, "default-user", sec.DefaultUser, "user of tasks that name none: NAME, UID, NAME:GROUP or UID:GID from the host's /etc/passwd and /etc/group")
	f.BoolVar(&sec.AllowRoot, "allow-root-tasks", sec.AllowRoot, "let tasks run as root (uid 0) when they ask (container run --user root) or as --default-user")
	f.Int64Var(&sec.DefaultPids, "default-pids", sec.DefaultPids, "pids.max of a container that asks for no pids limit (0: unlimited)")
	f.BoolVar(&sec.UserNS, "userns", sec.UserNS, "run every task in a user namespace mapped onto --userns-range (container run --userns and a task's userns do it per task)")
	f.StringVar(&sec.UserNSRange, "userns-range", sec.UserNSRange, "host IDs user namespaces map container IDs 0..COUNT-1 onto: START:COUNT, or a NAME in --subuid-file and --subgid-file (docs/security.md)")
	f.StringVar(&sec.SubUIDFile, "subuid-file", sec.SubUIDFile, "subordinate uid file (NAME:START:COUNT lines) for a --userns-range NAME (default /etc/subuid)")
	f.StringVar(&sec.SubGIDFile, "subgid-file", sec.SubGIDFile, "subordinate gid file for a --userns-range NAME (default /etc/subgid)")
	f.StringSliceVar(&sec.HidePaths, "hide-paths", sec.HidePaths, "host paths masked from tasks on the host root (comma-separated; the state dir, the socket's directory and the netns directory always are)")

	o := &cfg.Oversub
	f.StringVar(&o.Estimator, "estimator", o.Estimator, `resource estimator: noop, fixed, usage, idle or "plugin:/path/to/bin [args]"`)
	f.StringArrayVar(&o.EstimatorOpts, "estimator-opt", o.EstimatorOpts, "estimator option key=value (repeatable), e.g. resources=cpus:1;mem:512 for fixed")
	f.DurationVar(&o.EstimatorInterval, "estimator-interval", o.EstimatorInterval, "how often the estimator runs (at least 1s)")
	f.StringVar(&o.QoS, "qos", o.QoS, `QoS controller: noop, load, interference or "plugin:/path/to/bin [args]"`)
	f.StringArrayVar(&o.QoSOpts, "qos-opt", o.QoSOpts, "QoS controller option key=value (repeatable), e.g. cooldown=2s")
	f.DurationVar(&o.QoSInterval, "qos-interval", o.QoSInterval, "QoS round interval, at least 100ms (rounds also run on every monitor sample and latency report)")
	f.DurationVar(&o.MonitorInterval, "monitor-interval", o.MonitorInterval, "container and host sampling interval (at least 100ms)")
	f.StringVar(&o.MetricsListen, "metrics-listen", o.MetricsListen, "serve Prometheus /metrics over HTTP on this address, e.g. 127.0.0.1:9105 (default off)")
	f.BoolVar(&o.NoBPF, "no-bpf", o.NoBPF, "measure run-queue latency from schedstat (mean waits) instead of loading the eBPF monitor")
	registerSafetyFlags(f, &cfg.Safety)
	registerImageFlags(f, &cfg.Image)
}

// logFlags are --log-level and --log-format.
type logFlags struct{ level, format string }

func (lf *logFlags) register(f *pflag.FlagSet) {
	f.StringVar(&lf.level, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&lf.format, "log-format", "text", "text or json")
}

// logger builds the daemon's logger; its level can be changed later (the
// reload on SIGHUP). A bad flag exits 2.
func (lf *logFlags) logger(w io.Writer) (*slog.Logger, *slog.LevelVar, error) {
	level := new(slog.LevelVar)
	log, err := logging.New(w, lf.level, lf.format, level)
	if err != nil {
		return nil, nil, cli.ExitError{Code: 2, Msg: err.Error()}
	}
	return log, level, nil
}

// newDaemon assembles the agent daemon from cfg with the plugin registries
// (the only place that names the built-in estimators and QoS controllers).
// A bad setting exits 2 with nothing created.
func newDaemon(cfg agentd.Config, log *slog.Logger, level *slog.LevelVar, reload func() (agentd.Reloadable, error)) (*agentd.Daemon, error) {
	cfg.Version = version
	ereg := estimator.NewRegistry()
	estimator.RegisterBuiltins(ereg)
	qreg := qos.NewRegistry()
	qos.RegisterBuiltins(qreg)
	d, err := agentd.New(cfg, agentd.Deps{Estimators: ereg, QoS: qreg, Log: log, Level: level, Reload: reload})
	var ce *agentd.ConfigError
	if errors.As(err, &ce) {
		return nil, cli.ExitError{Code: 2, Msg: err.Error()}
	}
	return d, err
}

// runDaemon runs d until ctx ends; a master's refusal of the agent exits 1
// with its reason.
func runDaemon(ctx context.Context, d *agentd.Daemon, log *slog.Logger) error {
	logging.RouteLogrus(log)
	return cli.MasterRefusal("agent", d.Run(ctx))
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	return logging.New(w, level, format, nil)
}
