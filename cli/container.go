package cli

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/brimnode/brim/agent/agentclient"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/internal/bytesize"
	"github.com/brimnode/brim/internal/cliout"
	"github.com/brimnode/brim/internal/containerlog"
)

// defaultSocket is where `brim agent` serves its local API.
const defaultSocket = "/run/brim/agent.sock"

func newContainerCommand() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:   "container",
		Short: "Run and manage containers on the local agent (through its unix socket)",
		Args:  UsageArgs(cobra.NoArgs),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var timeout time.Duration
	cmd.PersistentFlags().StringVar(&socket, "socket", defaultSocket, "the agent's local API socket")
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", DefaultAgentTimeout, "how long one call to the agent may take (kill: plus its --grace; wait and logs -f: no bound; 0: none) before the command fails")
	cl := &agentClient{socket: &socket, timeout: &timeout}
	cmd.AddCommand(
		newContainerRun(cl), newContainerLs(cl), newContainerInspect(cl), newContainerStats(cl),
		newContainerUpdate(cl), newContainerKill(cl), newContainerStop(cl), newContainerRestart(cl),
		newContainerPause(cl, false), newContainerPause(cl, true), newContainerTop(cl),
		newContainerLogs(cl), newContainerWait(cl), newContainerRm(cl), newContainerExec(cl), newContainerAttach(cl),
	)
	rl := newContainerReportLatency(&socket)
	rl.ValidArgsFunction = cl.containerArgs(runningOnly, true)
	cmd.AddCommand(rl)
	MarkUsageErrors(cmd)
	return cmd
}

// newContainerReportLatency is `brim agent report-latency` under
// `brim container`: the same flags and the same RPC.
func newContainerReportLatency(socket *string) *cobra.Command {
	cmd := newAgentReportLatency(socket)
	cmd.Short += " (alias of brim agent report-latency)"
	cmd.PreRunE = func(c *cobra.Command, _ []string) error {
		if p99, err := c.Flags().GetDuration("p99"); err == nil && p99 <= 0 {
			return ExitError{Code: 2, Msg: c.CommandPath() + ": --p99 must be positive (see --help)"}
		}
		return nil
	}
	return cmd
}

func newContainerRun(cl *agentClient) *cobra.Command {
	var (
		cpus            float64
		mem, pids       int64
		revocable, wait bool
		quota, network  bool
		netBw           int64
		rootfs, name    string
		user            string
		userns          bool
		cwd             string
		env, labels     []string
		publish         []string
		logSize         string
		logFiles        int
		img, pull       string
		readWrite       bool
		disk            int64
		cpuMode         string
		interactive     bool
		tty, detach     bool
	)
	cmd := &cobra.Command{
		Use:   "run [flags] [--image REF] -- CMD [ARG…]",
		Short: "Run a container; prints its ID (--wait, -i, -t: exits with its exit code)",
		Long: `Run a container; prints its ID (--wait: exits with its exit code).
Without --image it runs on the host root, read-only (or --rootfs). With
--image it runs on the image (pulled into the agent's cache as --pull
says): the image's entrypoint and cmd are the command (CMD replaces the
cmd, after the entrypoint), its env and working dir the defaults, its
user the default user (resolved in the image's /etc/passwd; root needs
the agent's --allow-root-tasks, or --userns). The root is read-only
unless --read-write, whose writes are limited by --disk (or the agent's
--image-upper-limit). The agent's own --timeout bound covers an implicit
pull: raise --timeout for a large image, or brim image pull it first.

With -i (stdin kept open) or -t (a terminal), stay in the foreground
attached to it, as docker run -it does: its output from the start, stdin
sent (its end closes the container's stdin), the terminal in raw mode and
its size followed; ctrl-p ctrl-q detaches (the container runs on; attach
again with brim container attach); the exit code is the container's.
With -d, print the ID and leave it running (attach later).
A container run with -t logs its terminal's output (stdout and stderr
are one stream, and what is typed is echoed there) as stdout.`,
		Args: UsageArgs(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if img == "" && len(args) == 0 {
				return ExitError{Code: 2, Msg: "container run: give a command (-- CMD [ARG…]) or an --image (see --help)"}
			}
			if img == "" && (readWrite || cmd.Flags().Changed("pull")) {
				return ExitError{Code: 2, Msg: "container run: --read-write and --pull need --image"}
			}
			if disk < 0 {
				return ExitError{Code: 2, Msg: fmt.Sprintf("container run: --disk %d: must not be negative", disk)}
			}
			if img == "" {
				pull = "" // the flag's default names no policy without an image
			}
			milli, err := milliCPUs(cpus)
			if err != nil {
				return ExitError{Code: 2, Msg: err.Error()}
			}
			if err := checkCPUMode(cpuMode, quota); err != nil {
				return err
			}
			lab := map[string]string{}
			for _, l := range labels {
				k, v, ok := strings.Cut(l, "=")
				if !ok || k == "" {
					return ExitError{Code: 2, Msg: fmt.Sprintf("--label %q: want KEY=VALUE", l)}
				}
				lab[k] = v
			}
			ports, err := agentclient.ParsePorts(publish)
			if err != nil {
				return ExitError{Code: 2, Msg: "-p: " + err.Error()}
			}
			logMax, err := logLimits(logSize, logFiles)
			if err != nil {
				return ExitError{Code: 2, Msg: err.Error()}
			}
			if detach && wait {
				return ExitError{Code: 2, Msg: "run: -d and --wait contradict each other"}
			}
			var size *agentpb.TerminalSize
			if tty && !detach {
				t, err := openTerminal(cmd.InOrStdin(), cmd.OutOrStdout(), false, interactive)
				if err != nil {
					return err
				}
				size = t.size()
				t.stop()
			}
			api, err := cl.dial()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := api.Run(ctx, &agentpb.RunRequest{
				Name: name, Command: args, Env: env, Cwd: cwd, Rootfs: rootfs, User: user, Userns: userns,
				MilliCpus: milli, MemMib: mem, Pids: pids, Revocable: revocable, CpuQuota: quota, Labels: lab,
				Network: network, NetBwMbit: netBw, Ports: ports, CpuLimitMode: cpuMode,
				LogMaxSizeBytes: logMax, LogMaxFiles: int32(logFiles),
				Image: img, Pull: pull, ReadWrite: readWrite, DiskMib: disk,
				Stdin: interactive, Tty: tty, Size: size,
			})
			if err != nil {
				return cl.rpcError(err)
			}
			if (interactive || tty) && !detach {
				return attach(cmd, cl, api, c, interactive, true, true)
			}
			fmt.Fprintln(cmd.OutOrStdout(), c.Id)
			if !wait {
				return nil
			}
			w, err := api.Wait(ctx, &agentpb.WaitRequest{Id: c.Id})
			if err != nil {
				return cl.rpcError(err)
			}
			return exitFor(w)
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false) // everything after the command is its arguments
	f.Float64Var(&cpus, "cpus", 0.1, "cpus, up to 3 decimals: a weight, a hard cap or both, as --cpu-limit-mode says")
	f.Int64Var(&mem, "mem", 128, "memory limit in MiB")
	f.Int64Var(&pids, "pids", 0, "maximum number of processes (0: no limit)")
	f.BoolVar(&quota, "cpu-quota", false, "cap the container at --cpus with a CFS quota besides its weight (--cpu-limit-mode both)")
	f.StringVar(&cpuMode, "cpu-limit-mode", "", cpuModeHelp)
	registerFlagCompletion(cmd, "cpu-limit-mode", cobra.FixedCompletions(cpuModes, cobra.ShellCompDirectiveNoFileComp))
	f.BoolVar(&revocable, "revocable", false, "run best-effort on revocable resources (low priority)")
	f.BoolVar(&network, "network", false, "own network namespace with an address on the agent's bridge (agent --network); without it: loopback only")
	f.Int64Var(&netBw, "net-bw", 0, "with --network: bandwidth limit in Mbit/s, both directions (net_bw; 0: no limit)")
	f.StringArrayVarP(&publish, "publish", "p", nil, "with --network: forward a host port to the container, [HOSTIP:]HOSTPORT:CONTAINERPORT[/tcp|/udp] (repeatable)")
	f.StringVar(&rootfs, "rootfs", "", "root filesystem directory (default: the host root, read-only)")
	f.StringVar(&user, "user", "", "run as NAME, UID, NAME:GROUP or UID:GID of the host, or of the image with --image (default: the image's user, else the agent's --default-user; root needs the agent's --allow-root-tasks, or --userns)")
	f.BoolVar(&userns, "userns", false, "run in a user namespace mapped onto the agent's --userns-range: the task's IDs, root included, are unprivileged host IDs")
	f.StringVar(&name, "name", "", "unique container name (default: its ID)")
	f.StringVar(&cwd, "cwd", "", "working directory inside the container")
	f.StringArrayVar(&env, "env", nil, "environment variable KEY=VALUE (repeatable)")
	f.StringArrayVar(&labels, "label", nil, "label KEY=VALUE (repeatable)")
	f.BoolVar(&wait, "wait", false, "wait for the container and exit with its exit code")
	f.BoolVarP(&interactive, "interactive", "i", false, "keep the container's stdin open (attach to it); in the foreground unless -d")
	f.BoolVarP(&tty, "tty", "t", false, "give the container a terminal; in the foreground unless -d")
	f.BoolVarP(&detach, "detach", "d", false, "with -i or -t: print the ID and leave the container running")
	f.StringVar(&logSize, "log-max-size", "", "rotate the container's log at this size (e.g. 10MiB, 512k; at least 64KiB; default: the agent's --log-max-size)")
	f.IntVar(&logFiles, "log-max-files", 0, "keep this many log files, the oldest removed (1 to 1000; 0: the agent's --log-max-files)")
	f.StringVar(&img, "image", "", "run on this image (a reference such as registry.example.com/app:1, or an image ID) instead of the host root")
	f.StringVar(&pull, "pull", "missing", "with --image: pull it when missing from the agent's cache, always, or never")
	f.BoolVar(&readWrite, "read-write", false, "with --image: a writable root (its writes are the container's, removed with it)")
	f.Int64Var(&disk, "disk", 0, "disk in MiB, accounted against the agent's disk; limits what a --read-write root writes")
	return cmd
}

// logLimits checks --log-max-size and --log-max-files; 0 leaves either to
// the agent.
func logLimits(size string, files int) (int64, error) {
	if files < 0 || files > containerlog.MaxMaxFiles {
		return 0, fmt.Errorf("--log-max-files %d: want 1 to %d (0: the agent's default)", files, containerlog.MaxMaxFiles)
	}
	if size == "" {
		return 0, nil
	}
	n, err := bytesize.Parse(size)
	if err != nil {
		return 0, fmt.Errorf("--log-max-size: %w", err)
	}
	if n != 0 && n < containerlog.MinMaxSize {
		return 0, fmt.Errorf("--log-max-size %s: want at least 64KiB (0: the agent's default)", size)
	}
	return n, nil
}

// maxMilliCPUs bounds --cpus far above any node (a billion cpus) and far
// below where the agent's int64 arithmetic on thousandths could overflow:
// what is above a node's cpus the agent refuses naming its total.
const maxMilliCPUs = 1e12

// cpuModes are --cpu-limit-mode's values.
var cpuModes = []string{"shares", "quota", "both"}

// cpuModeHelp documents --cpu-limit-mode beside --cpus and --cpu-quota.
const cpuModeHelp = `how --cpus limits the container: shares (a weight of 1024 per cpu: at least
its cpus under contention, any idle cpu otherwise), quota (a CFS quota at --cpus with the default
weight: Docker's --cpus), both (the weight and the quota: --cpu-quota); default: the agent's
--cpu-limit-mode (shares unless its operator set another)`

// checkCPUMode checks --cpu-limit-mode ("" leaves it to the agent) and
// its agreement with --cpu-quota, which is mode both.
func checkCPUMode(mode string, quota bool) error {
	switch mode {
	case "":
		return nil
	case "shares", "quota":
		if quota {
			return ExitError{Code: 2, Msg: fmt.Sprintf("--cpu-quota is --cpu-limit-mode both, not %s: give one", mode)}
		}
		return nil
	case "both":
		return nil
	}
	return ExitError{Code: 2, Msg: fmt.Sprintf("--cpu-limit-mode %q: want shares, quota or both", mode)}
}

func milliCPUs(cpus float64) (int64, error) {
	m := cpus * 1000
	switch {
	case math.IsNaN(m) || m <= 0:
		return 0, fmt.Errorf("--cpus %v: must be a positive number", cpus)
	case m > maxMilliCPUs:
		return 0, fmt.Errorf("--cpus %v: more than any node has (at most %g)", cpus, maxMilliCPUs/1000)
	case math.Abs(m-math.Round(m)) > 1e-6:
		return 0, fmt.Errorf("--cpus %v: at most 3 decimal places", cpus)
	}
	return int64(math.Round(m)), nil
}

// exitFor is the command's end for an exited container: its exit code,
// and on stderr why it ended when its code alone does not say (137 is
// any SIGKILL: the OOM killer's is named).
func exitFor(c *agentpb.Container) error {
	code := agentclient.ExitCode(c)
	if why := agentclient.ExitCause(c); why != "" {
		return ExitError{Code: code, Msg: why}
	}
	if code != 0 {
		return ExitError{Code: code}
	}
	return nil
}

func newContainerLs(cl *agentClient) *cobra.Command {
	var (
		asJSON, quiet bool
		filters       []string
		format        string
	)
	cmd := &cobra.Command{
		Use:     "ls [--filter KEY=VALUE]… [--format TEMPLATE|table TEMPLATE|json] [-q]",
		Aliases: []string{"list", "ps"},
		Short:   "List the agent's containers (running and finished)",
		Long: `List the agent's containers, running and finished, oldest first.

--filter KEY=VALUE selects, as docker ps does: filters of one key match
when any of them does, of different keys when all of theirs do; each
label filter must match. Keys: state (or status: running, paused,
frozen, exited), name (a regular expression searched in the name), label
(KEY or KEY=VALUE), id (an ID prefix), revocable (true, false), exited
(an exit code).

--format is a Go template, as Docker's: '{{.ID}} {{.Name}}' prints a line
per container, 'table {{.ID}}\t{{.State}}' a table with its header, json
one JSON object per line. Fields: ID, Name (Names), State, PID, CPUs,
CPUMode, Mem, Pids, Command, User, Revocable, Created (RunningFor),
CreatedAt, Exit, Restarts, Address, Ports, Labels, and Label "KEY";
functions json, join, lower, upper, split, truncate.`,
		Args: UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			filter, err := agentclient.ParseFilters(filters)
			if err != nil {
				return ExitError{Code: 2, Msg: err.Error()}
			}
			if quiet {
				format = "{{.ID}}"
			}
			f, err := compileFormat(cmd, format, "json", "quiet")
			if err != nil {
				return err
			}
			api, err := cl.dial()
			if err != nil {
				return err
			}
			all, err := agentpb.ListAll(cmd.Context(), api) // page by page: no message-size cliff
			if err != nil {
				return cl.rpcError(err)
			}
			var list []*agentpb.Container
			for _, c := range all {
				if filter.Match(c) {
					list = append(list, c)
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				js := make([]agentclient.View, 0, len(list))
				for _, c := range list {
					js = append(js, agentclient.ViewOf(c))
				}
				return cliout.JSON(out, js)
			}
			if err := cliout.Containers(out, f, list, time.Now()); err != nil {
				return ExitError{Code: 2, Msg: err.Error()}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&asJSON, "json", false, "print a JSON array of the containers (inspect's form)")
	fl.StringArrayVarP(&filters, "filter", "f", nil, "select containers: state=, name=, label=KEY[=VALUE], id=, revocable=, exited= (repeatable)")
	fl.StringVar(&format, "format", "", "Go template, 'table TEMPLATE' or json (see --help)")
	fl.BoolVarP(&quiet, "quiet", "q", false, "print the IDs only")
	return cmd
}

// compileFormat compiles --format, refused beside another output flag
// of cmd (others) given too.
func compileFormat(cmd *cobra.Command, format string, others ...string) (*cliout.Format, error) {
	var given []string
	for _, f := range append(others, "format") {
		if cmd.Flags().Changed(f) {
			given = append(given, "--"+f)
		}
	}
	if len(given) > 1 {
		return nil, ExitError{Code: 2, Msg: fmt.Sprintf("%s: %s: give one", cmd.Name(), strings.Join(given, " and "))}
	}
	f, err := cliout.ParseFormat(format)
	if err != nil {
		return nil, ExitError{Code: 2, Msg: err.Error()}
	}
	return f, nil
}

func newContainerInspect(cl *agentClient) *cobra.Command {
	return &cobra.Command{
		Use:               "inspect ID|NAME",
		Short:             "Print a container as JSON",
		Args:              UsageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: cl.containerArgs(anyState, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := cl.dial()
			if err != nil {
				return err
			}
			c, err := api.Get(cmd.Context(), &agentpb.GetRequest{Id: args[0]})
			if err != nil {
				return cl.rpcError(err)
			}
			return cliout.JSON(cmd.OutOrStdout(), agentclient.ViewOf(c))
		},
	}
}

func newContainerUpdate(cl *agentClient) *cobra.Command {
	var (
		cpus             float64
		mem, pids, netBw int64
		cpuMode          string
	)
	cmd := &cobra.Command{
		Use:               "update [--cpus N] [--mem MiB] [--pids N] [--net-bw MBIT] [--cpu-limit-mode M] ID|NAME",
		Short:             "Resize a running container",
		Args:              UsageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: cl.containerArgs(runningOnly, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &agentpb.UpdateRequest{Id: args[0], MemMib: mem, Pids: pids, NetBwMbit: netBw}
			f := cmd.Flags()
			if f.Changed("cpu-limit-mode") {
				if err := checkCPUMode(cpuMode, false); err != nil || cpuMode == "" {
					return ExitError{Code: 2, Msg: fmt.Sprintf("update: --cpu-limit-mode %q: want shares, quota or both", cpuMode)}
				}
				req.CpuLimitMode = cpuMode
			}
			if f.Changed("cpus") {
				m, err := milliCPUs(cpus)
				if err != nil {
					return ExitError{Code: 2, Msg: err.Error()}
				}
				req.MilliCpus = m
			}
			// A flag given is checked as given: "--mem 0" is a bad
			// value, not a missing flag (0 means "unchanged" on the wire).
			for _, c := range []struct {
				flag, unit string
				v          int64
			}{{"mem", " MiB", mem}, {"pids", "", pids}, {"net-bw", " Mbit/s", netBw}} {
				if f.Changed(c.flag) && c.v <= 0 {
					return ExitError{Code: 2, Msg: fmt.Sprintf("update: --%s %d: must be a positive number%s", c.flag, c.v, c.unit)}
				}
			}
			if !f.Changed("cpus") && !f.Changed("mem") && !f.Changed("pids") && !f.Changed("net-bw") && !f.Changed("cpu-limit-mode") {
				return ExitError{Code: 2, Msg: "update: give at least one of --cpus, --mem, --pids, --net-bw, --cpu-limit-mode"}
			}
			api, err := cl.dial()
			if err != nil {
				return err
			}
			c, err := api.Update(cmd.Context(), req)
			if err != nil {
				return cl.rpcError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s cpus:%s mem:%dMiB cpu-limit-mode:%s\n", c.Id, cliout.CPUs(c.MilliCpus), c.MemMib, c.CpuLimitMode)
			return nil
		},
	}
	f := cmd.Flags()
	f.Float64Var(&cpus, "cpus", 0, "new cpus")
	f.StringVar(&cpuMode, "cpu-limit-mode", "", "new cpu limit mode: shares, quota or both")
	registerFlagCompletion(cmd, "cpu-limit-mode", cobra.FixedCompletions(cpuModes, cobra.ShellCompDirectiveNoFileComp))
	f.Int64Var(&mem, "mem", 0, "new memory limit in MiB")
	f.Int64Var(&pids, "pids", 0, "new pids limit")
	f.Int64Var(&netBw, "net-bw", 0, "new bandwidth limit in Mbit/s (container run with --network), applied live")
	return cmd
}

func newContainerKill(cl *agentClient) *cobra.Command {
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "kill [--grace D] ID|NAME",
		Short: "Stop a container: SIGTERM, then SIGKILL after the grace period",
		Long: "Stop a container: SIGTERM, then SIGKILL after the grace period (--grace, else the agent's --kill-grace).\n" +
			"It returns once the container has exited, or fails (exit 1, \"container has not exited yet\") when it has\n" +
			"not 30 s after the grace: a process SIGKILL cannot end yet (uninterruptible sleep on a hung disk).\n" +
			"The kill goes on, and the exit is recorded when it comes.",
		Args:              UsageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: cl.containerArgs(runningOnly, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			g := int64(-1) // the agent's default
			if cmd.Flags().Changed("grace") {
				if grace < 0 {
					return ExitError{Code: 2, Msg: "--grace must not be negative"}
				}
				g = int64(grace)
			}
			api, err := cl.dial()
			if err != nil {
				return err
			}
			c, err := api.Kill(cmd.Context(), &agentpb.KillRequest{Id: args[0], GraceNanos: g})
			if err != nil {
				return cl.rpcError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s exited %d\n", c.Id, agentclient.ExitCode(c))
			return nil
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 0, "grace period between SIGTERM and SIGKILL (default: the agent's --kill-grace)")
	return cmd
}

func newContainerLogs(cl *agentClient) *cobra.Command {
	var (
		follow, stamps     bool
		tail, since, until string
		stream             string
	)
	cmd := &cobra.Command{
		Use:   "logs [-f] [--tail N] [--since T] [--until T] [-t] [--stream stdout|stderr] ID|NAME",
		Short: "Print a container's stdout and stderr (-f: until it exits)",
		Long: `Print a container's output, across its rotated log files: stdout to stdout,
stderr to stderr, in the order the container wrote them.

--since and --until take an RFC 3339 time (2026-11-29T07:58:21Z,
2026-11-29T08:58:21+01:00, 2026-11-29), Unix seconds (1764403101.5) or a
duration before now (10m, 1h30m); a record's time is when the shim read
it. --tail N prints the last N records (lines, or 16 KiB pieces of
longer lines) of those selected, 0 none (with -f: only new output).
A container run with -t logs its terminal: one stream, stdout.`,
		Args:              UsageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: cl.containerArgs(anyState, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &agentpb.LogsRequest{Id: args[0], Follow: follow, Timestamps: stamps, Stream: stream}
			if err := logsFilters(req, tail, since, until, time.Now()); err != nil {
				return ExitError{Code: 2, Msg: "logs: " + err.Error()}
			}
			api, err := cl.dial()
			if err != nil {
				return err
			}
			logs, err := api.Logs(cmd.Context(), req)
			if err != nil {
				return cl.rpcError(err)
			}
			for {
				ch, err := logs.Recv()
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return cl.rpcError(err)
				}
				w := cmd.OutOrStdout()
				if ch.Stream == agentpb.LogChunk_STDERR {
					w = cmd.ErrOrStderr()
				}
				if _, err := w.Write(ch.Data); err != nil {
					return err
				}
			}
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "stream until the container exits (or --until passes)")
	f.StringVar(&tail, "tail", "all", "print only the last N records (lines) of those selected; 0: none, all: all")
	f.StringVar(&since, "since", "", "only records from this time on (RFC 3339, Unix seconds, or a duration ago such as 10m)")
	f.StringVar(&until, "until", "", "only records up to this time (as --since)")
	f.BoolVarP(&stamps, "timestamps", "t", false, "print each line's time (RFC 3339, UTC) before it")
	f.StringVar(&stream, "stream", "", "only stdout or only stderr (default: both)")
	return cmd
}

// logsFilters sets req's tail, since and until from the flags' text
// (times relative to now); the error names the flag.
func logsFilters(req *agentpb.LogsRequest, tail, since, until string, now time.Time) error {
	switch req.Stream {
	case "", "stdout", "stderr":
	default:
		return fmt.Errorf("--stream %q: want stdout or stderr", req.Stream)
	}
	switch n, err := strconv.Atoi(tail); {
	case tail == "all" || tail == "":
	case err != nil || n < 0 || n > math.MaxInt32:
		return fmt.Errorf("--tail %q: want a count of lines (0 or more) or all", tail)
	case n == 0:
		req.Tail = -1
	default:
		req.Tail = int32(n)
	}
	for _, b := range []struct {
		flag, text string
		to         *int64
	}{{"--since", since, &req.SinceUnixNano}, {"--until", until, &req.UntilUnixNano}} {
		if b.text == "" {
			continue
		}
		t, err := ParseTime(b.text, now)
		if err != nil {
			return fmt.Errorf("%s: %w", b.flag, err)
		}
		*b.to = t.UnixNano()
	}
	if req.SinceUnixNano != 0 && req.UntilUnixNano != 0 && req.UntilUnixNano < req.SinceUnixNano {
		return fmt.Errorf("--until %s is before --since %s", until, since)
	}
	return nil
}

// ParseTime reads a time as docker's --since does: RFC 3339 (with or
// without fractional seconds and zone: without one it is local), a date
// (local midnight), Unix seconds with an optional fraction, or a Go
// duration before now ("10m", "1h30m"; never in the future).
func ParseTime(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration before now must not be negative", s)
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02"} {
		loc := time.Local
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	if sec, frac, ok := strings.Cut(s, "."); sec != "" {
		n, err := strconv.ParseInt(sec, 10, 64)
		var ns int64
		if err == nil && ok {
			if len(frac) == 0 || len(frac) > 9 {
				err = strconv.ErrSyntax
			} else {
				ns, err = strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
			}
		}
		if err == nil && n >= 0 && n < 1<<33 {
			return time.Unix(n, ns), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want an RFC 3339 time (2026-11-29T07:58:21Z), a date (2026-11-29), Unix seconds or a duration ago (10m)", s)
}

func newContainerWait(cl *agentClient) *cobra.Command {
	return &cobra.Command{
		Use:               "wait ID|NAME",
		Short:             "Wait for a container to exit; prints and exits with its exit code",
		Args:              UsageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: cl.containerArgs(anyState, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := cl.dial()
			if err != nil {
				return err
			}
			c, err := api.Wait(cmd.Context(), &agentpb.WaitRequest{Id: args[0]})
			if err != nil {
				return cl.rpcError(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), agentclient.ExitCode(c))
			return exitFor(c)
		},
	}
}

func newContainerRm(cl *agentClient) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:     "rm [-f] ID|NAME…",
		Aliases: []string{"destroy"},
		Short:   "Destroy finished containers (-f: kill running ones first): cgroups, state, sandbox",
		Args:    UsageArgs(cobra.MinimumNArgs(1)),
		// any state: rm -f kills a running one
		ValidArgsFunction: cl.containerArgs(anyState, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return eachContainer(cmd, cl, args, func(api agentpb.AgentClient, ref string) error {
				_, err := api.Destroy(cmd.Context(), &agentpb.DestroyRequest{Id: ref, Force: force})
				return err
			})
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "kill a running container first (no grace)")
	return cmd
}
