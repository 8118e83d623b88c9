package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/brimnode/brim/agent/agentd"
	"github.com/brimnode/brim/cli"
)

var _ = registerSubcommand(newDevCommand)

func newDevCommand() *cobra.Command {
	// The agent of brim dev is agentd.DevConfig fed through the same flags
	// and assembly as brim agent's.
	cfg := agentd.DevConfig()
	var (
		mf           masterFlags
		base, socket string
		join         string
		lf           logFlags
		lo           linkOptions
		cf           configFile
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a master and an agent in one process: the quick start",
		Long: `Run a master (on --listen) and an agent linked to it in one process, with
their state under --state-dir (master/ and agent/). With --join ADDR, run only
the agent, linked to the master at ADDR: several "brim dev --join" processes
with their own --state-dir and --cgroup-parent make a cluster on one host.
Frameworks connect to --listen: brim run --master ADDR -- CMD…

The agent takes the flags of "brim agent" (--network…, --estimator, --qos,
--sandbox-retention, …) with dev defaults: with e.g. --estimator fixed
--estimator-opt resources=cpus:1;mem:512 the master offers revocable
resources to frameworks that accept them (brim run --revocable), and the
QoS controller's corrections show in "brim state".`,
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			conf, err := cf.load(cmd.Flags())
			if err != nil {
				return err
			}
			cfg.ConfigFile = conf
			log, level, err := lf.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if !path.IsAbs(base) {
				return cli.ExitError{Code: 2, Msg: fmt.Sprintf("--state-dir %q: must be an absolute path", base)}
			}
			cfg.StateDir = filepath.Join(base, "agent")
			cfg.Socket = socket
			if socket == "" {
				cfg.Socket = filepath.Join(base, "agent.sock")
			}
			if lo.tls.CAFile != "" && join == "" {
				return cli.ExitError{Code: 2, Msg: "--master-ca needs --join: the master brim dev runs itself has no TLS"}
			}
			if err := lo.resolve(&cfg.Link); err != nil {
				return err
			}
			// The master's address is known once it listens; the agent
			// is checked (and its plugins opened) before the master
			// creates anything.
			if join, cfg.Link.Discover, err = cli.ResolveMasters(cmd.Context(), join); err != nil {
				return err
			}
			cfg.Link.Master = join
			if join == "" {
				cfg.Link.Master = mf.listen
			}
			d, err := newDaemon(cfg, log, level, reloadFrom(newDevCommand, cmd.Flags(), conf))
			if err != nil {
				return err
			}
			if os.Geteuid() != 0 {
				d.Close()
				return cli.ExitError{Code: 1, Msg: "brim dev runs containers and must run as root"}
			}
			// The master and the agent are one group: either failing
			// stops the other.
			g, ctx := errgroup.WithContext(cmd.Context())
			if join == "" {
				mf.stateDir = filepath.Join(base, "master")
				_, addr, waitMaster, err := startMaster(ctx, &mf, log)
				if err != nil {
					d.Close()
					return err
				}
				d.SetMaster(addr.String())
				g.Go(waitMaster)
			}
			g.Go(func() error {
				err := runDaemon(ctx, d, log)
				if err == nil && ctx.Err() == nil {
					err = errors.New("agent stopped")
				}
				return err
			})
			return g.Wait()
		},
	}
	f := cmd.Flags()
	mf.register(f, "")
	f.StringVar(&base, "state-dir", agentd.DevStateDir, "state of the master (DIR/master) and the agent (DIR/agent)")
	f.StringVar(&socket, "socket", "", "unix socket of the agent's local API (default STATE-DIR/agent.sock)")
	f.StringVar(&join, "join", "", "run only the agent, linked to the master at this address")
	registerAgentFlags(f, &cfg)
	lf.register(f)
	lo.register(f)
	cf.register(f, "")
	cli.MarkUsageErrors(cmd)
	return cmd
}
