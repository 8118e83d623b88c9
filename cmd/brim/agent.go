package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/containerizer"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/resources"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
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
			cg, err := cgroups.New(cgroups.Config{Parent: cgParent})
			if err != nil {
				return fmt.Errorf("cgroup isolator: %w", err)
			}
			cz, err := containerizer.New(containerizer.Config{
				StateDir:  stateDir,
				Isolators: []isolator.Isolator{cg},
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
				KillGrace:    killGrace,
				Retention:    ret,
				Log:          log,
				Version:      version,
				CgroupParent: cgParent,
			})
			if err != nil {
				return err
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
	cmd.AddCommand(newAgentInfo(&socket))
	markUsageErrors(cmd)
	return cmd
}

func newAgentInfo(socket *string) *cobra.Command {
	cl := &agentClient{socket: socket}
	return &cobra.Command{
		Use:   "info",
		Short: "Describe the running agent: ID, resources total/used/free",
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
	out := agent.Resources{MilliCPUs: int64(r.CPUs()), MemMiB: int64(r.Mem()) / 1000}
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
