package cli

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/internal/cliout"
)

// eachContainer runs do for every ID|NAME argument, printing the argument
// of each that succeeded (as Docker's stop, rm, pause do) and going on
// past failures, which it returns together (exit 1).
func eachContainer(cmd *cobra.Command, cl *agentClient, args []string, do func(api agentpb.AgentClient, ref string) error) error {
	api, err := cl.dial()
	if err != nil {
		return err
	}
	var msgs []string
	for _, ref := range args {
		if err := do(api, ref); err != nil {
			err = cl.rpcError(err)
			var ee ExitError
			if len(args) == 1 || !errors.As(err, &ee) {
				return err
			}
			msgs = append(msgs, ee.Msg)
			continue
		}
		fmt.Fprintln(cmd.OutOrStdout(), ref)
	}
	if len(msgs) > 0 {
		return ExitError{Code: 1, Msg: strings.Join(msgs, "\nbrim: ")}
	}
	return nil
}

// graceFlag is -t/--time, Docker's seconds before SIGKILL.
type graceFlag struct{ seconds int }

func (g *graceFlag) register(cmd *cobra.Command) {
	cmd.Flags().IntVarP(&g.seconds, "time", "t", 0, "seconds between SIGTERM and SIGKILL (default: the agent's --kill-grace)")
}

// nanos is the grace to send: the agent's default (-1) unless given.
func (g *graceFlag) nanos(cmd *cobra.Command) (int64, error) {
	if !cmd.Flags().Changed("time") {
		return -1, nil
	}
	if g.seconds < 0 {
		return 0, ExitError{Code: 2, Msg: fmt.Sprintf("--time %d: must not be negative", g.seconds)}
	}
	return int64(time.Duration(g.seconds) * time.Second), nil
}

func newContainerStop(cl *agentClient) *cobra.Command {
	var g graceFlag
	cmd := &cobra.Command{
		Use:   "stop [-t SECONDS] ID|NAME…",
		Short: "Stop running containers: SIGTERM, then SIGKILL after the grace period; prints each once it has exited",
		Long: `Stop running containers: SIGTERM, then SIGKILL after -t seconds (default:
the agent's --kill-grace); a paused container is thawed first. Each is
printed once it has exited; the exit status is 1 when one could not be
stopped (not running, not found, or still exiting 30 s after its SIGKILL:
a process in uninterruptible sleep, the kill goes on). kill is the same
with --grace as a duration.`,
		Args:              UsageArgs(cobra.MinimumNArgs(1)),
		ValidArgsFunction: cl.containerArgs(runningOnly, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			grace, err := g.nanos(cmd)
			if err != nil {
				return err
			}
			return eachContainer(cmd, cl, args, func(api agentpb.AgentClient, ref string) error {
				_, err := api.Kill(cmd.Context(), &agentpb.KillRequest{Id: ref, GraceNanos: grace})
				return err
			})
		},
	}
	g.register(cmd)
	return cmd
}

func newContainerRestart(cl *agentClient) *cobra.Command {
	var g graceFlag
	cmd := &cobra.Command{
		Use:   "restart [-t SECONDS] ID|NAME…",
		Short: "Stop containers (as stop) and run them again: same ID, name, spec and sandbox; a new process",
		Long: `Restart containers as Docker does: a running one is stopped (SIGTERM, then
SIGKILL after -t seconds), then its spec runs again under the same ID
and name, with the same sandbox (its files and logs kept): a new
process, pid and start time (and address, with --network). An exited
container is started again. Its resources are admitted again: when they
were taken meanwhile the restart fails and the container stays exited
(reason restart-failed). inspect counts the restarts. A container of a
master's task is refused: its framework runs its tasks again.`,
		Args:              UsageArgs(cobra.MinimumNArgs(1)),
		ValidArgsFunction: cl.containerArgs(anyState, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			grace, err := g.nanos(cmd)
			if err != nil {
				return err
			}
			return eachContainer(cmd, cl, args, func(api agentpb.AgentClient, ref string) error {
				_, err := api.Restart(cmd.Context(), &agentpb.RestartRequest{Id: ref, GraceNanos: grace})
				return err
			})
		},
	}
	g.register(cmd)
	return cmd
}

// newContainerPause is pause, or unpause with un.
func newContainerPause(cl *agentClient, un bool) *cobra.Command {
	use, short, state := "pause ID|NAME…", "Freeze every process of running containers (the cgroup freezer) until unpause", runningOnly
	long := `Freeze every process of running containers (the cgroup freezer) until
unpause. A pause outlives an agent restart, wins over the QoS
controller (its thaws leave a paused container frozen) and is lifted by
a kill, stop or rm -f, which thaw the container first.`
	if un {
		use, short, state = "unpause ID|NAME…", "Thaw paused containers", pausedOnly
		long = `Thaw paused containers. One that a QoS correction froze too stays frozen
until the controller thaws it (ls shows it "frozen"; stderr says so).`
	}
	return &cobra.Command{
		Use: use, Short: short, Long: long,
		Args:              UsageArgs(cobra.MinimumNArgs(1)),
		ValidArgsFunction: cl.containerArgs(state, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return eachContainer(cmd, cl, args, func(api agentpb.AgentClient, ref string) error {
				if !un {
					_, err := api.Pause(cmd.Context(), &agentpb.PauseRequest{Id: ref})
					return err
				}
				c, err := api.Unpause(cmd.Context(), &agentpb.PauseRequest{Id: ref})
				if err == nil && c.QosFrozen {
					fmt.Fprintf(cmd.ErrOrStderr(), "brim: %s: still frozen by a QoS correction until the controller thaws it (brim agent explain)\n", ref)
				}
				return err
			})
		},
	}
}

func newContainerTop(cl *agentClient) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "top ID|NAME",
		Short: "List the processes in a running container (its cgroup), as ps: PID, USER, TIME, CMD",
		Long: `List the processes in a running container's cgroup as the host sees them
(host pids, host user names, as docker top): PID, PPID, USER, STAT, TIME
(cpu time, [DD-]HH:MM:SS) and CMD ([comm] for a process with no command
line, a zombie).`,
		Args:              UsageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: cl.containerArgs(runningOnly, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := cl.dial()
			if err != nil {
				return err
			}
			r, err := api.Top(cmd.Context(), &agentpb.TopRequest{Id: args[0]})
			if err != nil {
				return cl.rpcError(err)
			}
			if asJSON {
				return cliout.JSON(cmd.OutOrStdout(), r.Processes)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PID\tPPID\tUSER\tSTAT\tTIME\tCMD")
			for _, p := range r.Processes {
				user := p.User
				if user == "" {
					user = fmt.Sprint(p.Uid)
				}
				cmdline := strings.Join(p.Args, " ")
				if cmdline == "" {
					cmdline = "[" + p.Comm + "]"
				}
				fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\n", p.Pid, p.Ppid, user, p.State, psTime(time.Duration(p.CpuNanos)), cmdline)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// psTime formats cpu time as ps's TIME: [DD-]HH:MM:SS.
func psTime(d time.Duration) string {
	s := int64(d / time.Second)
	days, h, m, sec := s/86400, s/3600%24, s/60%60, s%60
	if days > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, h, m, sec)
	}
	return fmt.Sprintf("%02d:%02d:%02d", h, m, sec)
}
