package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/containerizer"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/masterlink"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
)

const defaultDevStateDir = "/var/lib/brim/dev"

var _ = registerSubcommand(newDevCommand)

func newDevCommand() *cobra.Command {
	var (
		mf                   masterFlags
		base, socket, parent string
		resText, join        string
		logLevel, logFormat  string
		killGrace            time.Duration
		lo                   linkOptions
		ov                   oversubFlags
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a master and an agent in one process: the quick start",
		Long: `Run a master (on --listen) and an agent linked to it in one process, with
their state under --state-dir (master/ and agent/). With --join ADDR, run only
the agent, linked to the master at ADDR: several "brim dev --join" processes
with their own --state-dir and --cgroup-parent make a cluster on one host.
Frameworks connect to --listen: brim run --master ADDR -- CMD…

The agent takes the oversubscription flags of "brim agent" (--estimator,
--qos, …): with e.g. --estimator fixed --estimator-opt resources=cpus:1;mem:512
the master offers revocable resources to frameworks that accept them
(brim run --revocable), and the QoS controller's corrections show in
"brim state".`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(cmd.ErrOrStderr(), logLevel, logFormat)
			if err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			if !path.IsAbs(base) {
				return exitError{code: 2, msg: fmt.Sprintf("--state-dir %q: must be an absolute path", base)}
			}
			total, err := agentResources(resText)
			if err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			cgParent, err := cgroupParent(parent)
			if err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			if err := ov.validate(); err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			if lo.tls.caFile != "" && join == "" {
				return exitError{code: 2, msg: "--master-ca needs --join: the master brim dev runs itself has no TLS"}
			}
			if err := lo.credentials(); err != nil {
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
				return exitError{code: 1, msg: "brim dev runs containers and must run as root"}
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			lo.master = join
			var waitMaster func() error
			if join == "" {
				mf.stateDir = filepath.Join(base, "master")
				_, addr, wait, err := startMaster(ctx, &mf, log)
				if err != nil {
					return err
				}
				waitMaster = wait
				lo.master = addr.String()
			}
			if socket == "" {
				socket = filepath.Join(base, "agent.sock")
			}
			agentErr := runLinkedAgent(ctx, filepath.Join(base, "agent"), socket, cgParent, total, killGrace, lo, plugins, log)
			cancel()
			if waitMaster != nil {
				agentErr = errors.Join(agentErr, waitMaster())
			}
			return agentErr
		},
	}
	mf.register(cmd, "")
	f := cmd.Flags()
	f.StringVar(&base, "state-dir", defaultDevStateDir, "state of the master (DIR/master) and the agent (DIR/agent)")
	f.StringVar(&socket, "socket", "", "unix socket of the agent's local API (default STATE-DIR/agent.sock)")
	f.StringVar(&parent, "cgroup-parent", "brim-dev", "cgroup under which containers' cgroups are made")
	f.StringVar(&resText, "resources", "", `resources the agent offers, e.g. "cpus:2;mem:2048" (default: the host's cpus and memory minus 1 GiB)`)
	f.StringVar(&join, "join", "", "run only the agent, linked to the master at this address")
	f.DurationVar(&killGrace, "kill-grace", 5*time.Second, "grace period between SIGTERM and SIGKILL")
	f.DurationVar(&lo.retryMin, "status-retry-min", masterlink.DefaultRetryMin, "first retry of an unacknowledged status update (doubles each time)")
	f.DurationVar(&lo.retryMax, "status-retry-max", masterlink.DefaultRetryMax, "longest wait between status update retries")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", "text", "text or json")
	lo.registerAuth(f)
	ov.register(f)
	markUsageErrors(cmd)
	return cmd
}

// runLinkedAgent runs an agent serving its local API on socket and linked
// to the master, until ctx ends, with the estimator and QoS controller of
// plugins. Containers keep running afterwards.
func runLinkedAgent(ctx context.Context, stateDir, socket, cgParent string, total agent.Resources, killGrace time.Duration, lo linkOptions,
	plugins *oversubPlugins, log *slog.Logger) error {
	routeLogrus(log)
	if err := os.MkdirAll(filepath.Dir(socket), 0o700); err != nil {
		return fmt.Errorf("create socket dir: %w", err)
	}
	l, err := agent.Listen(socket)
	if err != nil {
		return err
	}
	raiseFileLimit(log)
	cg, err := cgroups.New(cgroups.Config{Parent: cgParent, DefaultPids: devSecurity.defaultPids})
	if err != nil {
		l.Close()
		return fmt.Errorf("cgroup isolator: %w", err)
	}
	over, err := plugins.oversub(cg, log)
	if err != nil {
		l.Close()
		return err
	}
	cz, err := containerizer.New(containerizer.Config{StateDir: stateDir, Isolators: []isolator.Isolator{cg}, KillGrace: killGrace,
		HidePaths: devSecurity.hidePaths(socket, ""), Log: log})
	if err != nil {
		l.Close()
		return fmt.Errorf("containerizer: %w", err)
	}
	ret, _ := agent.ParseRetention(defaultRetention)
	a, err := agent.New(agent.Options{StateDir: stateDir, Runtime: runtimeAdapter{cz}, Resources: total, KillGrace: killGrace,
		Retention: ret, Log: log, Version: version, CgroupParent: cgParent, Oversub: over,
		DefaultUser: devSecurity.defaultUser})
	if err != nil {
		l.Close()
		return err
	}
	stopMetrics, err := plugins.serveMetrics(a, log)
	if err != nil {
		a.Close()
		l.Close()
		return err
	}
	defer stopMetrics()
	plugins.watchOOM(ctx, a, log)
	return serveLinkedAgent(ctx, a, l, socket, total, stateDir, lo, log)
}

// waitAgentReady waits until the agent at socket answers AgentInfo.
func waitAgentReady(ctx context.Context, socket string) error {
	cl := &agentClient{socket: &socket}
	api, err := cl.dial()
	if err != nil {
		return err
	}
	defer cl.conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := api.AgentInfo(ctx, &agentpb.AgentInfoRequest{}, grpc.WaitForReady(true)); err != nil {
		return fmt.Errorf("wait for the agent to recover: %w", err)
	}
	return nil
}
