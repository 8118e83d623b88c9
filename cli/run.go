package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/brimnode/brim/client"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"github.com/brimnode/brim/scheduler/runner"
)

func newRunCommand() *cobra.Command {
	var (
		addr, role, name, taskID string
		principal, secret        string
		secretFile               string
		cpus                     float64
		mem, netBw               int64
		revocable                bool
		env                      []string
		user                     string
		userns                   bool
		failover, killAfter      time.Duration
		instances, perOffer      int
		timeout                  time.Duration
		mtls                     MasterTLS
		img, pull                string
		readWrite                bool
		disk                     int64
	)
	cmd := &cobra.Command{
		Use:   "run [flags] [--image REF] -- CMD [ARG…]",
		Short: "Run one task through the master (a one-task framework, like mesos-execute)",
		Long: `Subscribe to the master as a framework, launch CMD on the first offer that
fits --cpus and --mem, print the task's state transitions, and exit with the
task's exit code (1 when the task ended without one, e.g. LOST). Ctrl-C kills
the task.

brim run says what it waits for (the master, an offer that fits) and gives up
after --timeout with exit status 1 and the reason: the master's address does
not answer (or serves TLS and --master-ca is missing), the master refuses the
task (an invalid task ID, or one in use), or no agent offers enough (the
largest free resources offered are named).

With --image the task runs on an OCI image the agent pulls (as with brim
container run --image): its entrypoint and cmd are the command (CMD, if
given, replaces the cmd), its env, working dir and user the defaults.`,
		Args: UsageArgs(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if img == "" && len(args) == 0 {
				return ExitError{Code: 2, Msg: "run: give a command (-- CMD [ARG…]) or an --image (see --help)"}
			}
			if img == "" && (readWrite || cmd.Flags().Changed("pull")) {
				return ExitError{Code: 2, Msg: "run: --read-write and --pull need --image"}
			}
			milli, err := milliCPUs(cpus)
			if err != nil {
				return ExitError{Code: 2, Msg: err.Error()}
			}
			if mem <= 0 {
				return ExitError{Code: 2, Msg: "--mem must be positive"}
			}
			want, err := runner.Want(milli, mem, netBw, revocable)
			if err != nil {
				return ExitError{Code: 2, Msg: "--net-bw: " + err.Error()}
			}
			if want, err = withDisk(want, disk, revocable); err != nil {
				return ExitError{Code: 2, Msg: err.Error()}
			}
			if instances < 1 {
				return ExitError{Code: 2, Msg: "--instances must be at least 1"}
			}
			if taskID == "" {
				taskID = "run-" + uuid.NewString()[:8]
			}
			if name == "" {
				name = taskID
			}
			if timeout < 0 {
				return ExitError{Code: 2, Msg: "--timeout must not be negative"}
			}
			ids := runner.TaskIDs(taskID, instances)
			var roles []string
			if role != "" {
				roles = []string{role}
			}
			secret, err := FrameworkSecret(principal, secret, secretFile)
			if err != nil {
				return ExitError{Code: 2, Msg: err.Error()}
			}
			dial, err := mtls.DialOptions()
			if err != nil {
				return err
			}
			addr, discover, err := ResolveMasters(cmd.Context(), addr)
			if err != nil {
				return err
			}
			d, err := scheduler.New(scheduler.Options{Master: addr, Discover: discover, Name: "brim-run", Roles: roles, Revocable: revocable, FailoverTimeout: failover,
				Principal: principal, Secret: secret, DialOptions: dial})
			if err != nil {
				return ExitError{Code: 2, Msg: err.Error()}
			}
			defer func() { _ = d.Close() }() // the run's outcome is the exit code
			task := &pb.TaskInfo{Name: name, Command: args, Env: env, User: user, Userns: userns, Image: img, ImagePull: pull, ImageReadWrite: readWrite}
			if img == "" {
				task.ImagePull = ""
			}
			cfg := runner.Config{Task: task, IDs: ids, Want: want, Role: role,
				PerOffer: perOffer, KillAfter: killAfter, Timeout: timeout, Master: addr, Out: cmd.OutOrStdout()}
			if dial == nil {
				cfg.Explain = client.ExplainTLS(addr)
			}
			return runExit(runner.Run(cmd.Context(), d, cfg))
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "master", DefaultMaster, "master address host:port, or the masters of a highly available cluster, comma-separated (the leader is found and followed)")
	f.Float64Var(&cpus, "cpus", 0.1, "cpus of the task")
	f.Int64Var(&mem, "mem", 64, "memory of the task, MiB")
	f.Int64Var(&netBw, "net-bw", 0, "bandwidth of the task, Mbit/s (net_bw): the task gets its own network namespace, shaped to it, on an agent with --network; 0: none, the host's network")
	f.StringVar(&principal, "principal", "", "principal to authenticate the framework as (needed when the master has --credentials)")
	f.StringVar(&secret, "secret", "", "the principal's secret (prefer --secret-file or $BRIM_SECRET)")
	f.StringVar(&secretFile, "secret-file", "", "file holding the principal's secret")
	mtls.Register(f)
	f.StringVar(&role, "role", "", "role to subscribe with (default: the master's default role)")
	registerFlagCompletion(cmd, "role", func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		o := operatorFlags{master: addr, principal: principal, secret: secret, secretFile: secretFile, tls: mtls}
		return o.masterCompletion(roles(""), 0)(c, args, toComplete)
	})
	f.BoolVar(&revocable, "revocable", false, "run on revocable (oversubscribed) resources")
	f.StringVar(&name, "name", "", "task name (default: the task ID)")
	f.StringVar(&taskID, "task-id", "", "task ID (default: run-<random>)")
	f.StringArrayVar(&env, "env", nil, "environment variable K=V (repeatable)")
	f.StringVar(&user, "user", "", "run the task as NAME, UID, NAME:GROUP or UID:GID of the agent's host, or of the image with --image (default: the image's user, else the agent's --default-user); root needs the master's run_as_root ACL for the principal and role, or --userns")
	f.BoolVar(&userns, "userns", false, "run the task in a user namespace (the agent needs --userns-range): its root is an unprivileged host uid")
	f.DurationVar(&failover, "failover-timeout", 10*time.Second, "how long the master keeps the framework after brim run exits")
	f.DurationVar(&killAfter, "kill-after", 0, "kill the task after this long (0: never)")
	f.IntVar(&perOffer, "tasks-per-offer", 0, "launch at most this many tasks per offer (0: as many as fit); 1 lets the allocator apply DRF task by task")
	f.DurationVar(&timeout, "timeout", 3*time.Minute, "give up (exit 1, saying why) after waiting this long for the master, or from the start for a first offer that fits (0: wait forever)")
	f.IntVar(&instances, "instances", 1, "run this many copies of the task (IDs TASK-ID-0…); exit with the first non-zero exit code")
	f.StringVar(&img, "image", "", "run the task on this OCI image (a reference such as registry.example.com/app:1), pulled by the agent")
	f.StringVar(&pull, "pull", "missing", "with --image: the agent pulls it when missing from its cache, always, or never")
	f.BoolVar(&readWrite, "read-write", false, "with --image: a writable root, its writes limited by --disk")
	f.Int64Var(&disk, "disk", 0, "disk of the task, MiB (the agent must offer disk); limits a --read-write root's writes")
	MarkUsageErrors(cmd)
	return cmd
}

// withDisk adds disk MiB to want; disk is never revocable.
func withDisk(want resources.Resources, disk int64, revocable bool) (resources.Resources, error) {
	switch {
	case disk < 0:
		return nil, fmt.Errorf("--disk %d: must not be negative", disk)
	case disk == 0:
		return want, nil
	case revocable:
		return nil, fmt.Errorf("--disk with --revocable: disk is never revocable")
	}
	d, err := resources.Parse(fmt.Sprintf("disk:%d", disk))
	if err != nil {
		return nil, err
	}
	return want.Add(d), nil
}

// refusal turns the master's refusal of the framework (authentication,
// ACL) into a one-line message; other errors are returned as they are.
func refusal(err error) error { return MasterRefusal("framework", err) }

// runExit turns runner.Run's outcome into brim run's exit: the failed
// task's exit code, 130 when interrupted, 1 with the reason when giving
// up or refused.
func runExit(err error) error {
	var te *runner.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		return ExitError{Code: te.Code}
	case errors.Is(err, runner.ErrInterrupted):
		return ExitError{Code: 130, Msg: "interrupted"}
	case errors.Is(err, runner.ErrTimeout), errors.Is(err, runner.ErrRefused), errors.Is(err, runner.ErrStopped):
		return ExitError{Code: 1, Msg: err.Error()}
	}
	return refusal(err)
}
