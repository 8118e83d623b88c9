package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/bpf"
	"github.com/brimnode/brim/containerizer"
	"github.com/brimnode/brim/estimator"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/isolator/network"
	"github.com/brimnode/brim/masterlink"
	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/qos"
	"github.com/brimnode/brim/resources"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// Defaults of `brim agent`.
const (
	defaultStateDir     = "/var/lib/brim/agent"
	defaultCgroupParent = "brim"
	defaultRetention    = "100,168h"
	// memReserve is left to the host when --resources is not given.
	memReserveMiB = 1024
)

var _ = registerSubcommand(newAgentCommand)

func newAgentCommand() *cobra.Command {
	var (
		socket, stateDir, parent string
		resText, retention       string
		logLevel, logFormat      string
		killGrace                time.Duration
		ov                       oversubFlags
		nf                       networkFlags
		lo                       linkOptions
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: containers, checkpointing, the local API",
		Long: `Run the node agent. It serves the local API on --socket (root only), keeps
its checkpoint in --state-dir, and puts containers' cgroups under
--cgroup-parent. Stopping it (SIGTERM, SIGINT) never stops containers: a new
agent with the same --state-dir reattaches to them.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(cmd.ErrOrStderr(), logLevel, logFormat)
			if err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			total, err := agentResources(resText)
			if err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			ret, err := agent.ParseRetention(retention)
			if err != nil {
				return exitError{code: 2, msg: "--sandbox-retention: " + err.Error()}
			}
			cgParent, err := cgroupParent(parent)
			if err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			if !path.IsAbs(stateDir) {
				return exitError{code: 2, msg: fmt.Sprintf("--state-dir %q: must be an absolute path", stateDir)}
			}
			if err := ov.validate(); err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			if err := lo.credentials(); err != nil {
				return err
			}
			netCfg, err := nf.config(stateDir)
			if err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			if err := checkNetworkState(stateDir, nf.enabled); err != nil {
				return err
			}
			// Build the estimator and QoS controller before anything is
			// created: a bad name or option exits 2 with nothing behind.
			plugins, err := ov.open(log)
			if err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			defer plugins.close(log)
			if os.Geteuid() != 0 {
				return exitError{code: 1, msg: "brim agent must run as root"}
			}
			routeLogrus(log)
			// Take the socket first: a second agent fails before it creates
			// anything.
			l, err := agent.Listen(socket)
			if err != nil {
				return err
			}
			defer l.Close()
			cgCfg, err := cgroupConfig(cgParent, log)
			if err != nil {
				return err
			}
			cg, err := cgroups.New(cgCfg)
			if err != nil {
				return fmt.Errorf("cgroup isolator: %w", err)
			}
			over, err := plugins.oversub(cg, log)
			if err != nil {
				return err
			}
			isos := []isolator.Isolator{cg}
			if nf.enabled {
				// Before the containerizer: its warm shims must start after
				// the netns dir is a shared mount. Close, never Uninstall:
				// the containers outlive the agent.
				netIso, err := network.New(netCfg)
				if err != nil {
					return fmt.Errorf("network isolator: %w", err)
				}
				defer netIso.Close()
				isos = append(isos, netIso)
			}
			cz, err := containerizer.New(containerizer.Config{
				StateDir:  stateDir,
				Isolators: isos,
				KillGrace: killGrace,
				Log:       log,
			})
			if err != nil {
				return fmt.Errorf("containerizer: %w", err)
			}
			a, err := agent.New(agent.Options{
				StateDir:     stateDir,
				Runtime:      runtimeAdapter{cz},
				Resources:    total,
				Network:      nf.enabled,
				KillGrace:    killGrace,
				Retention:    ret,
				Log:          log,
				Version:      version,
				CgroupParent: cgParent,
				Oversub:      over,
			})
			if err != nil {
				return err
			}
			stopMetrics, err := plugins.serveMetrics(a, log)
			if err != nil {
				a.Close()
				return err
			}
			defer stopMetrics()
			plugins.watchOOM(cmd.Context(), a, log)
			if lo.master != "" {
				return serveLinkedAgent(cmd.Context(), a, l, socket, total, stateDir, lo, log)
			}
			return a.Serve(cmd.Context(), l)
		},
	}
	f := cmd.Flags()
	cmd.PersistentFlags().StringVar(&socket, "socket", defaultSocket, "unix socket of the local API (0600)")
	f.StringVar(&stateDir, "state-dir", defaultStateDir, "agent state: ID, checkpoint, containers' sandboxes")
	f.StringVar(&parent, "cgroup-parent", defaultCgroupParent, "cgroup under which containers' cgroups are made (in every hierarchy)")
	f.StringVar(&resText, "resources", "", `resources to hand out, Mesos syntax, e.g. "cpus:4;mem:8192" (default: the host's cpus and memory minus 1 GiB)`)
	f.StringVar(&retention, "sandbox-retention", defaultRetention, `finished containers kept: "N", "DURATION" or "N,DURATION"`)
	f.DurationVar(&killGrace, "kill-grace", agent.DefaultKillGrace, "default grace period between SIGTERM and SIGKILL")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", "text", "text or json")
	ov.register(f)
	nf.register(f)
	f.StringVar(&lo.master, "master", "", "master address host:port; empty: standalone (local API only)")
	f.DurationVar(&lo.retryMin, "status-retry-min", masterlink.DefaultRetryMin, "first retry of an unacknowledged status update (doubles each time)")
	f.DurationVar(&lo.retryMax, "status-retry-max", masterlink.DefaultRetryMax, "longest wait between status update retries")
	lo.registerAuth(f)
	cmd.AddCommand(newAgentInfo(&socket), newAgentExplain(&socket), newAgentReportLatency(&socket))
	markUsageErrors(cmd)
	return cmd
}

func newAgentInfo(socket *string) *cobra.Command {
	cl := &agentClient{socket: socket}
	return &cobra.Command{
		Use:   "info",
		Short: "Describe the running agent: ID, resources total/used/free, revocable pool, estimate, corrections in force",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := cl.dial()
			if err != nil {
				return err
			}
			in, err := api.AgentInfo(cmd.Context(), &agentpb.AgentInfoRequest{})
			if err != nil {
				return cl.rpcError(err)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "id\t%s\nversion\t%s\nstate dir\t%s\ncgroup parent\t%s\n", in.Id, in.Version, in.StateDir, in.CgroupParent)
			fmt.Fprintf(tw, "resources total\t%s\nresources used\t%s\nresources free\t%s\n", in.ResourcesTotal, in.ResourcesUsed, in.ResourcesFree)
			fmt.Fprintf(tw, "containers\t%d running, %d exited\n", in.ContainersRunning, in.ContainersExited)
			if in.Estimator != "" {
				fmt.Fprintf(tw, "estimator\t%s\nqos controller\t%s\nrun-queue source\t%s\n", in.Estimator, in.QosController, orNone(in.RunqueueSource))
				fmt.Fprintf(tw, "revocable total\t%s\nrevocable used\t%s\nrevocable free\t%s\n", in.RevocableTotal, in.RevocableUsed, in.RevocableFree)
				fmt.Fprintf(tw, "corrections active\t%d\n", in.CorrectionsActive)
				ex, err := api.Explain(cmd.Context(), &agentpb.ExplainRequest{})
				if err != nil {
					return cl.rpcError(err)
				}
				if e := ex.Current; e != nil {
					fmt.Fprintf(tw, "revocable estimate\t%s (%s: %s)\n", orNone(e.Revocable), e.Estimator, e.Summary)
				}
				for _, c := range ex.Active {
					t := c.Trigger
					if t == nil {
						t = &agentpb.Trigger{}
					}
					fmt.Fprintf(tw, "correction\t%s %s: %s %.4g (baseline %.4g, threshold %.4g) of %s\n",
						c.Type, c.ContainerId, t.Signal, t.Value, t.Baseline, t.Threshold, orNone(t.Victim))
				}
			}
			return tw.Flush()
		},
	}
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// agentResources parses --resources, or measures the host.
func agentResources(text string) (agent.Resources, error) {
	if strings.TrimSpace(text) == "" {
		var si unix.Sysinfo_t
		if err := unix.Sysinfo(&si); err != nil {
			return agent.Resources{}, fmt.Errorf("measure host memory: %w", err)
		}
		memMiB := int64(si.Totalram) * int64(si.Unit) >> 20
		return agent.Resources{
			MilliCPUs: int64(runtime.NumCPU()) * 1000,
			MemMiB:    max(memMiB-memReserveMiB, memMiB/2),
		}, nil
	}
	r, err := resources.Parse(text)
	if err != nil {
		return agent.Resources{}, fmt.Errorf("--resources %q: %w", text, err)
	}
	r = r.NonRevocable()
	out := agent.Resources{MilliCPUs: int64(r.CPUs()), MemMiB: int64(r.Mem()) / 1000, NetMbit: int64(r.NetBandwidth()) / 1000}
	if out.MilliCPUs <= 0 || out.MemMiB <= 0 {
		return agent.Resources{}, fmt.Errorf("--resources %q: need positive cpus and mem", text)
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
		return "", fmt.Errorf("--cgroup-parent %q: want a cgroup path such as brim", p)
	}
	return p, nil
}

// cgroupConfig is the cgroup isolator's configuration. On a cgroup v2 host
// where the parent lies inside the agent's own cgroup (a systemd unit with
// Delegate=yes, --cgroup-parent /system.slice/brim-agent.service/containers)
// the agent first moves itself into the leaf <unit>/agent, so that the unit
// holds no process and may pass controllers on, and the isolator enables
// them from the unit down to the parent, nowhere above it.
func cgroupConfig(parent string, log *slog.Logger) (cgroups.Config, error) {
	cfg := cgroups.Config{Parent: parent}
	if _, err := os.Stat(filepath.Join(cgroups.DefaultRoot, "cgroup.controllers")); err != nil {
		return cfg, nil // v1 or hybrid
	}
	own, err := cgroups.OwnV2(0)
	if err != nil {
		return cfg, nil
	}
	if path.Base(own) == agentLeaf {
		own = path.Dir(own) // restarted inside the leaf
	}
	if own == "/" || !strings.HasPrefix(parent, own+"/") {
		return cfg, nil
	}
	unit, err := cgroups.EnterLeafV2(cgroups.DefaultRoot, 0, agentLeaf)
	if err != nil {
		return cfg, fmt.Errorf("cgroup delegation: %w", err)
	}
	log.Info("cgroup v2 delegation", "unit", unit, "agent", path.Join(unit, agentLeaf), "parent", parent)
	cfg.Delegated = unit
	return cfg, nil
}

// agentLeaf is the leaf of its delegated unit the agent moves into.
const agentLeaf = "agent"

// routeLogrus sends libcontainer's global logrus output into log, once.
func routeLogrus(log *slog.Logger) {
	logrus.SetOutput(io.Discard)
	logrus.SetLevel(logrus.DebugLevel)
	logrus.AddHook(logrusHook{log.With("component", "libcontainer")})
}

type logrusHook struct{ log *slog.Logger }

func (logrusHook) Levels() []logrus.Level { return logrus.AllLevels }

func (h logrusHook) Fire(e *logrus.Entry) error {
	lv := slog.LevelDebug
	switch {
	case e.Level <= logrus.ErrorLevel:
		lv = slog.LevelError
	case e.Level == logrus.WarnLevel:
		lv = slog.LevelWarn
	case e.Level == logrus.InfoLevel:
		lv = slog.LevelInfo
	}
	args := make([]any, 0, 2*len(e.Data))
	for k, v := range e.Data {
		args = append(args, k, v)
	}
	h.log.Log(context.Background(), lv, e.Message, args...)
	return nil
}

// runtimeAdapter lets the agent drive the containerizer (agent.Runtime),
// translating types and sentinels.
type runtimeAdapter struct{ c *containerizer.Containerizer }

var _ agent.Runtime = runtimeAdapter{}

// mapErr makes the containerizer's sentinels match the agent's, keeping
// the containerizer's message.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, containerizer.ErrNotFound):
		return sentinelError{agent.ErrNotFound, err}
	case errors.Is(err, containerizer.ErrNotRunning):
		return sentinelError{agent.ErrNotRunning, err}
	case errors.Is(err, containerizer.ErrCommandNotFound):
		return sentinelError{agent.ErrCommandNotFound, err}
	}
	return err
}

type sentinelError struct{ sentinel, err error }

func (e sentinelError) Error() string   { return e.err.Error() }
func (e sentinelError) Unwrap() []error { return []error{e.sentinel, e.err} }

func exitOf(st *containerizer.ExitStatus) *agent.ExitStatus {
	if st == nil {
		return nil
	}
	sig := 0
	if st.Signal != "" {
		sig = int(unix.SignalNum(st.Signal))
	}
	return &agent.ExitStatus{Code: st.Code, Signal: sig, OOMKilled: st.OOMKilled, Reason: st.Reason, Message: st.Message, FinishedAt: st.FinishedAt}
}

func infoOf(in *containerizer.Info) *agent.RuntimeInfo {
	return &agent.RuntimeInfo{
		ID: in.Spec.ID, Running: in.State == containerizer.StateRunning, Pid: in.Pid,
		StartedAt: in.StartedAt, Exit: exitOf(in.Exit), SandboxDir: in.SandboxDir,
	}
}

func (r runtimeAdapter) Launch(ctx context.Context, s agent.LaunchSpec) (*agent.RuntimeInfo, error) {
	in, err := r.c.Launch(ctx, containerizer.Spec{
		ID: s.ID, Name: s.Name, Command: s.Command, Env: s.Env, Cwd: s.Cwd,
		Rootfs: s.Rootfs, Limits: s.Limits, Labels: s.Labels,
	})
	if err != nil {
		return nil, mapErr(err)
	}
	return infoOf(in), nil
}

func (r runtimeAdapter) Wait(ctx context.Context, id string) (*agent.ExitStatus, error) {
	st, err := r.c.Wait(ctx, id)
	if err != nil {
		return nil, mapErr(err)
	}
	return exitOf(st), nil
}

func (r runtimeAdapter) Kill(ctx context.Context, id string, grace time.Duration) error {
	// The agent has already applied its default; for the containerizer 0
	// means "the default" and a negative grace "at once".
	if grace <= 0 {
		grace = -1
	}
	return mapErr(r.c.Kill(ctx, id, grace))
}

func (r runtimeAdapter) Update(ctx context.Context, id string, l isolator.Limits) error {
	return mapErr(r.c.Update(ctx, id, l))
}

func (r runtimeAdapter) Usage(ctx context.Context, id string) (*isolator.Statistics, error) {
	st, err := r.c.Usage(ctx, id)
	return st, mapErr(err)
}

func (r runtimeAdapter) Destroy(ctx context.Context, id string) error {
	return mapErr(r.c.Destroy(ctx, id))
}

func (r runtimeAdapter) Recover(ctx context.Context) ([]*agent.RuntimeInfo, error) {
	infos, err := r.c.Recover(ctx)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]*agent.RuntimeInfo, 0, len(infos))
	for _, in := range infos {
		out = append(out, infoOf(in))
	}
	return out, nil
}

// Limits of the oversubscription flags.
const (
	minEstimatorInterval = time.Second
	minLoopInterval      = 100 * time.Millisecond
	metricsShutdown      = 5 * time.Second
)

// oversubFlags are the monitor, estimator, QoS and metrics flags of `brim
// agent` (brim dev may register them too).
type oversubFlags struct {
	estimator, qos         string
	estimatorOpts, qosOpts []string
	estimatorInterval      time.Duration
	qosInterval            time.Duration
	monitorInterval        time.Duration
	metricsListen          string
	noBPF                  bool
}

func (o *oversubFlags) register(f *pflag.FlagSet) {
	f.StringVar(&o.estimator, "estimator", "noop", `resource estimator: noop, fixed, usage or "plugin:/path/to/bin [args]"`)
	f.StringArrayVar(&o.estimatorOpts, "estimator-opt", nil, "estimator option key=value (repeatable), e.g. resources=cpus:1;mem:512 for fixed")
	f.DurationVar(&o.estimatorInterval, "estimator-interval", estimator.DefaultInterval, "how often the estimator runs (at least 1s)")
	f.StringVar(&o.qos, "qos", "noop", `QoS controller: noop, load, interference or "plugin:/path/to/bin [args]"`)
	f.StringArrayVar(&o.qosOpts, "qos-opt", nil, "QoS controller option key=value (repeatable), e.g. cooldown=2s")
	f.DurationVar(&o.qosInterval, "qos-interval", time.Second, "QoS round interval (rounds also run on every monitor sample and latency report)")
	f.DurationVar(&o.monitorInterval, "monitor-interval", time.Second, "container and host sampling interval")
	f.StringVar(&o.metricsListen, "metrics-listen", "", "serve Prometheus /metrics over HTTP on this address, e.g. 127.0.0.1:9105 (default off)")
	f.BoolVar(&o.noBPF, "no-bpf", false, "measure run-queue latency from schedstat (mean waits) instead of loading the eBPF monitor")
}

// validate checks the values that need no registry.
func (o *oversubFlags) validate() error {
	if o.estimatorInterval < minEstimatorInterval {
		return fmt.Errorf("--estimator-interval %s: must be at least %s", o.estimatorInterval, minEstimatorInterval)
	}
	if o.qosInterval < minLoopInterval {
		return fmt.Errorf("--qos-interval %s: must be at least %s", o.qosInterval, minLoopInterval)
	}
	if o.monitorInterval < minLoopInterval {
		return fmt.Errorf("--monitor-interval %s: must be at least %s", o.monitorInterval, minLoopInterval)
	}
	if o.metricsListen != "" {
		if _, port, err := net.SplitHostPort(o.metricsListen); err != nil || port == "" {
			return fmt.Errorf("--metrics-listen %q: want host:port, e.g. 127.0.0.1:9105", o.metricsListen)
		}
	}
	if strings.TrimSpace(o.estimator) == "" {
		return fmt.Errorf("--estimator: empty (want noop, fixed, usage or plugin:/path)")
	}
	if strings.TrimSpace(o.qos) == "" {
		return fmt.Errorf("--qos: empty (want noop, load, interference or plugin:/path)")
	}
	for _, f := range []struct{ flag, spec string }{{"--estimator", o.estimator}, {"--qos", o.qos}} {
		if err := checkPlugin(f.spec); err != nil {
			return fmt.Errorf("%s %q: %w", f.flag, f.spec, err)
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

// oversubPlugins are the opened estimator and controller, and later the
// run-queue source; close releases them.
type oversubPlugins struct {
	flags *oversubFlags
	est   estimator.Estimator
	ctrl  qos.Controller
	rq    monitor.RunQueueSource
	sig   *monitor.RunQueueSignal
}

// open builds the estimator and the QoS controller from their registries
// (the only place that names the built-ins). Errors are the operator's.
func (o *oversubFlags) open(log *slog.Logger) (*oversubPlugins, error) {
	eopts, err := estimator.ParseOptions(o.estimatorOpts)
	if err != nil {
		return nil, fmt.Errorf("--estimator-opt: %w", err)
	}
	qopts, err := qos.ParseOptions(o.qosOpts)
	if err != nil {
		return nil, fmt.Errorf("--qos-opt: %w", err)
	}
	ereg := estimator.NewRegistry()
	estimator.RegisterBuiltins(ereg)
	est, err := estimator.Open(ereg, o.estimator, eopts, log.With("component", "estimator"))
	if err != nil {
		if errors.Is(err, estimator.ErrUnknown) {
			return nil, fmt.Errorf("--estimator %q: unknown (want one of %s, or plugin:/path)", o.estimator, strings.Join(ereg.Names(), ", "))
		}
		return nil, fmt.Errorf("--estimator %q: %w", o.estimator, err)
	}
	qreg := qos.NewRegistry()
	qos.RegisterBuiltins(qreg)
	ctrl, err := qos.Open(qreg, o.qos, qopts, log.With("component", "qos"))
	if err != nil {
		closeOversubPlugin(est, log)
		if errors.Is(err, qos.ErrUnknown) {
			return nil, fmt.Errorf("--qos %q: unknown (want one of %s, or plugin:/path)", o.qos, strings.Join(qreg.Names(), ", "))
		}
		return nil, fmt.Errorf("--qos %q: %w", o.qos, err)
	}
	return &oversubPlugins{flags: o, est: est, ctrl: ctrl}, nil
}

// oversub opens the run-queue latency source (eBPF, or schedstat with
// --no-bpf or when BPF cannot load here) and returns the agent's
// oversubscription options.
func (p *oversubPlugins) oversub(cg agent.CgroupActuator, log *slog.Logger) (*agent.Oversub, error) {
	rq, err := monitor.OpenRunQueueSource(p.flags.noBPF, bpf.Options{}, log)
	if err != nil {
		return nil, fmt.Errorf("run-queue latency: %w", err)
	}
	p.rq, p.sig = rq, monitor.NewRunQueueSignal(rq)
	return &agent.Oversub{
		MonitorInterval:   p.flags.monitorInterval,
		Signals:           []monitor.SignalSource{p.sig},
		Estimator:         p.est,
		EstimatorName:     p.flags.estimator,
		EstimatorInterval: p.flags.estimatorInterval,
		Controller:        p.ctrl,
		QoSName:           p.flags.qos,
		QoSInterval:       p.flags.qosInterval,
		Cgroups:           cg,
		RunQueueSource:    p.sig.Source(),
	}, nil
}

// serveMetrics serves the agent's metrics (and the run-queue source's) on
// --metrics-listen; the returned function stops the server.
func (p *oversubPlugins) serveMetrics(a *agent.Agent, log *slog.Logger) (func(), error) {
	reg := a.Metrics()
	if reg == nil {
		return func() {}, nil
	}
	if p.sig != nil {
		if err := reg.Register(p.sig.Metrics()); err != nil {
			return nil, fmt.Errorf("register run-queue metrics: %w", err)
		}
	}
	if p.flags.metricsListen == "" {
		return func() {}, nil
	}
	l, err := net.Listen("tcp", p.flags.metricsListen)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", monitor.Handler(reg))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", l.Addr().String(), "path", "/metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), metricsShutdown)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

func (p *oversubPlugins) close(log *slog.Logger) {
	closeOversubPlugin(p.est, log)
	closeOversubPlugin(p.ctrl, log)
	if p.rq != nil {
		if err := p.rq.Close(); err != nil {
			log.Warn("close run-queue source", "err", err)
		}
	}
}

func closeOversubPlugin(v any, log *slog.Logger) {
	if c, ok := v.(io.Closer); ok {
		if err := c.Close(); err != nil {
			log.Warn("close plugin", "err", err)
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// explainJSON is `brim agent explain --json`.
type explainJSON struct {
	Enabled        bool             `json:"enabled"`
	Current        *estimateJSON    `json:"current,omitempty"`
	Forwarded      *estimateJSON    `json:"forwarded,omitempty"`
	Blocking       string           `json:"blocking,omitempty"`
	RevocableTotal string           `json:"revocableTotal,omitempty"`
	RevocableUsed  string           `json:"revocableUsed,omitempty"`
	RevocableFree  string           `json:"revocableFree,omitempty"`
	QoS            string           `json:"qos,omitempty"`
	RunQueueSource string           `json:"runqueueSource,omitempty"`
	Active         []correctionJSON `json:"active"`
	Recent         []correctionJSON `json:"recent"`
}

type estimateJSON struct {
	Estimator  string     `json:"estimator"`
	Summary    string     `json:"summary"`
	Revocable  string     `json:"revocable"`
	CPUs       float64    `json:"cpus"`
	MemMiB     float64    `json:"memMiB"`
	ComputedAt time.Time  `json:"computedAt"`
	Terms      []termJSON `json:"terms"`
}

type termJSON struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
	Note  string  `json:"note,omitempty"`
}

type correctionJSON struct {
	Type      string      `json:"type"`
	Container string      `json:"container"`
	CPUQuota  float64     `json:"cpuQuota,omitempty"`
	Reason    string      `json:"reason"`
	Trigger   triggerJSON `json:"trigger"`
	At        *time.Time  `json:"at,omitempty"`
	Error     string      `json:"error,omitempty"`
}

type triggerJSON struct {
	Signal    string  `json:"signal"`
	Victim    string  `json:"victim,omitempty"`
	Value     float64 `json:"value"`
	Baseline  float64 `json:"baseline"`
	Threshold float64 `json:"threshold"`
}

func estimateOf(e *agentpb.Estimate) *estimateJSON {
	if e == nil {
		return nil
	}
	out := &estimateJSON{Estimator: e.Estimator, Summary: e.Summary, Revocable: e.Revocable, Terms: []termJSON{}}
	if e.ComputedAtUnixNano != 0 {
		out.ComputedAt = time.Unix(0, e.ComputedAtUnixNano).UTC()
	}
	if r, err := resources.Parse(e.Revocable); err == nil {
		out.CPUs, out.MemMiB = r.CPUs().Float64(), r.Mem().Float64()
	}
	for _, t := range e.Terms {
		out.Terms = append(out.Terms, termJSON{Name: t.Name, Value: t.Value, Unit: t.Unit, Note: t.Note})
	}
	return out
}

func correctionOf(c *agentpb.Correction) correctionJSON {
	out := correctionJSON{Type: c.Type, Container: c.ContainerId, CPUQuota: float64(c.CpuQuotaMilli) / 1000, Reason: c.Reason, Error: c.Error}
	if t := c.Trigger; t != nil {
		out.Trigger = triggerJSON{Signal: t.Signal, Victim: t.Victim, Value: t.Value, Baseline: t.Baseline, Threshold: t.Threshold}
	}
	if c.AtUnixNano != 0 {
		at := time.Unix(0, c.AtUnixNano).UTC()
		out.At = &at
	}
	return out
}

func newAgentExplain(socket *string) *cobra.Command {
	cl := &agentClient{socket: socket}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Show the revocable estimate with the terms of its computation, and the QoS corrections",
		Long: `Show the estimator's current estimate of the revocable resources this node
may offer, with the terms of its computation, the last estimate forwarded,
the revocable pool (estimate plus revocable resources in use) and its use,
and the QoS corrections in force and recently applied, each with the signal
that triggered it (value, the victim's baseline, the threshold).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := cl.dial()
			if err != nil {
				return err
			}
			r, err := api.Explain(cmd.Context(), &agentpb.ExplainRequest{})
			if err != nil {
				return cl.rpcError(err)
			}
			ex := explainJSON{
				Enabled: r.Enabled, Current: estimateOf(r.Current), Forwarded: estimateOf(r.Forwarded),
				Blocking: r.Blocking, RevocableTotal: r.RevocableTotal, RevocableUsed: r.RevocableUsed,
				RevocableFree: r.RevocableFree, QoS: r.QosController, RunQueueSource: r.RunqueueSource,
				Active: []correctionJSON{}, Recent: []correctionJSON{},
			}
			for _, c := range r.Active {
				ex.Active = append(ex.Active, correctionOf(c))
			}
			for _, c := range r.Recent {
				ex.Recent = append(ex.Recent, correctionOf(c))
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(ex)
			}
			return printExplain(w, ex)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printExplain(w io.Writer, ex explainJSON) error {
	if !ex.Enabled {
		_, err := fmt.Fprintln(w, "oversubscription is not enabled on this agent")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if e := ex.Current; e != nil {
		fmt.Fprintf(tw, "estimator\t%s\nestimate\t%s\t(computed %s)\nsummary\t%s\n", e.Estimator, orNone(e.Revocable), e.ComputedAt.Format(time.RFC3339), e.Summary)
		for _, t := range e.Terms {
			fmt.Fprintf(tw, "  %s\t%s %s\t%s\n", t.Name, strconv.FormatFloat(t.Value, 'g', 6, 64), t.Unit, t.Note)
		}
	}
	if e := ex.Forwarded; e != nil {
		fmt.Fprintf(tw, "last forwarded\t%s\t(computed %s)\n", orNone(e.Revocable), e.ComputedAt.Format(time.RFC3339))
	} else {
		fmt.Fprintf(tw, "last forwarded\tnone\n")
	}
	if ex.Blocking != "" {
		fmt.Fprintf(tw, "blocked\t%s\n", ex.Blocking)
	}
	fmt.Fprintf(tw, "revocable pool\t%s\nrevocable used\t%s\nrevocable free\t%s\n", ex.RevocableTotal, ex.RevocableUsed, ex.RevocableFree)
	fmt.Fprintf(tw, "qos controller\t%s\nrun-queue source\t%s\n", ex.QoS, orNone(ex.RunQueueSource))
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, part := range []struct {
		title string
		cs    []correctionJSON
	}{{"active corrections", ex.Active}, {"recent corrections", ex.Recent}} {
		fmt.Fprintf(w, "\n%s: %d\n", part.title, len(part.cs))
		if len(part.cs) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TYPE\tCONTAINER\tSIGNAL\tVALUE\tBASELINE\tTHRESHOLD\tVICTIM\tAT\tREASON")
		for _, c := range part.cs {
			at := ""
			if c.At != nil {
				at = c.At.Format("15:04:05.000")
			}
			reason := c.Reason
			if c.Error != "" {
				reason += " (failed: " + c.Error + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.4g\t%.4g\t%.4g\t%s\t%s\t%s\n", c.Type, c.Container, c.Trigger.Signal,
				c.Trigger.Value, c.Trigger.Baseline, c.Trigger.Threshold, c.Trigger.Victim, at, reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func newAgentReportLatency(socket *string) *cobra.Command {
	cl := &agentClient{socket: socket}
	var p50, p99, p999 time.Duration
	cmd := &cobra.Command{
		Use:   "report-latency CONTAINER --p99 DURATION [--p50 DURATION] [--p999 DURATION]",
		Short: "Report a latency the application in a container measured (QoS signal app-latency)",
		Long: `Report the latency the application in a (non-revocable) container measured
over its last window, e.g. its request p99. The monitor attaches it to the
container's samples while fresh (3 monitor intervals) and the QoS controller
compares it with the container's learned baseline (signal app-latency).`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if p99 <= 0 {
				return exitError{code: 2, msg: "brim agent report-latency: --p99 must be positive (see --help)"}
			}
			api, err := cl.dial()
			if err != nil {
				return err
			}
			_, err = api.ReportLatency(cmd.Context(), &agentpb.ReportLatencyRequest{
				Id: args[0], P50Nanos: int64(p50), P99Nanos: int64(p99), P999Nanos: int64(p999),
			})
			return cl.rpcError(err)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&p50, "p50", 0, "median latency, e.g. 800us")
	f.DurationVar(&p99, "p99", 0, "99th percentile latency (required), e.g. 2ms")
	f.DurationVar(&p999, "p999", 0, "99.9th percentile latency (default: p99)")
	return cmd
}

// cgroupIDs returns the ids of a container's cgroup that an OOM event may
// name: its memory and cpu directories on cgroup v1, the unified one on v2.
func cgroupIDs(p string) ([]uint64, error) {
	dirs := []string{filepath.Join("/sys/fs/cgroup/memory", p), filepath.Join("/sys/fs/cgroup/cpu", p)}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		dirs = []string{filepath.Join("/sys/fs/cgroup", p)}
	}
	ids := make([]uint64, 0, len(dirs))
	for _, d := range dirs {
		id, err := bpf.CgroupID(d)
		if err != nil {
			return nil, fmt.Errorf("cgroup id of %s: %w", d, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// watchOOM attributes the eBPF monitor's OOM kill events to a's containers
// until ctx ends (counted in a's metrics and statuses). Without the eBPF
// monitor (--no-bpf, or BPF unavailable) the cgroup OOM counters read at
// exit remain the only source.
func (p *oversubPlugins) watchOOM(ctx context.Context, a *agent.Agent, log *slog.Logger) {
	m, ok := p.rq.(*bpf.Monitor)
	if !ok {
		return
	}
	w := agent.NewOOMWatcher(a, m, cgroupIDs, 0, log)
	if reg := a.Metrics(); reg != nil {
		if err := reg.Register(w); err != nil {
			log.Warn("register oom metrics", "err", err)
		}
	}
	go func() {
		if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("oom watcher ended", "err", err)
		}
	}()
}
