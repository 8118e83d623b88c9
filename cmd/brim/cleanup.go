package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/brimnode/brim/agent/agentd"
	"github.com/brimnode/brim/cli"
)

// newAgentCleanupCommand is `brim agent cleanup`: agentd.Cleanup with the
// agent's own flags and --config, so that it finds what the agent made
// where the agent made it.
func newAgentCleanupCommand() *cobra.Command {
	c := newAgentFlags()
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Tear down what a stopped or dead agent left on the host: containers, cgroups, network, state",
		Long: `Tear down what an agent left on this host when it will not come back (after a
kill -9, before removing the package, to decommission the node). Give it the
agent's configuration (--config, default /etc/brim/agent.toml when present,
and the same flags) so that it finds the same state dir, cgroup parent and
network. It kills the containers through their cgroups and removes their
cgroups and the parent in every hierarchy, the shims left, the containers'
directories and runtime state, the network (nftables table brim-<bridge>,
veths, netns mounts, address records, IFBs, the bridge; IPv4 forwarding as it
was before --network-nat) and the checkpoint, printing each. The agent's ID
stays. Run again, it says there is nothing to clean up (exit 0). While an
agent holds the state dir it refuses (exit 1, naming the agent's PID).`,
		Args: cli.UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.load(cmd.Flags()); err != nil {
				return err
			}
			if os.Geteuid() != 0 {
				return cli.ExitError{Code: 1, Msg: "brim agent cleanup must run as root"}
			}
			out := cmd.OutOrStdout()
			n, err := agentd.Cleanup(cmd.Context(), c.cfg, func(line string) { fmt.Fprintln(out, line) })
			var ce *agentd.ConfigError
			switch {
			case errors.As(err, &ce):
				return cli.ExitError{Code: 2, Msg: err.Error()}
			case err != nil:
				return cli.ExitError{Code: 1, Msg: "agent cleanup: " + err.Error()}
			case n == 0:
				fmt.Fprintf(out, "nothing to clean up (state dir %s, cgroup parent %s)\n", c.cfg.StateDir, c.cfg.CgroupParent)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.cfg.Socket, "socket", c.cfg.Socket, "unix socket of the local API (0600)")
	c.register(f)
	cli.MarkUsageErrors(cmd)
	return cmd
}
