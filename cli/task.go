package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/scheduler"
)

// newTaskCommand is `brim task`: a master's tasks, reached through the
// master.
func newTaskCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "task",
		Short: "Reach a running task through the master (exec)",
		Args:  UsageArgs(cobra.NoArgs),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTaskExec())
	MarkUsageErrors(cmd)
	return cmd
}

func newTaskExec() *cobra.Command {
	var (
		addr, framework       string
		principal, secret     string
		secretFile, user, cwd string
		env                   []string
		interactive, tty      bool
		mtls                  MasterTLS
	)
	cmd := &cobra.Command{
		Use:   "exec --framework ID [-i] [-t] [--user U] [--env K=V]… [--cwd DIR] TASK_ID -- CMD [ARG…]",
		Short: "Run a command in a running task's container, through the master; exits with its exit code",
		Long: `Run a command in a running task's container through the master, as
brim container exec does on the agent (the task's confinement, never more
privileged than the task's own process; root only where the task runs as
root or in a user namespace). The master allows it to the principal that
subscribed the task's framework, and to principals its exec_tasks ACL
allows for the task's role (docs/master.md). -i sends stdin, -t gives the
command a terminal. When the session ends first, the command is killed
with what it started in its session.
Exit status: the command's (128+n when killed by signal n); 1 when the
master refuses (the reason is printed) or the command could not run.`,
		Args: UsageArgs(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			command := args[1:]
			if command[0] == "--" {
				command = command[1:]
			}
			if len(command) == 0 {
				return ExitError{Code: 2, Msg: cmd.CommandPath() + ": no command after --"}
			}
			if framework == "" {
				return ExitError{Code: 2, Msg: cmd.CommandPath() + ": --framework is required (the task's framework ID)"}
			}
			for _, e := range env {
				if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
					return ExitError{Code: 2, Msg: fmt.Sprintf("--env %q: want KEY=VALUE", e)}
				}
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
			d, err := scheduler.New(scheduler.Options{Master: addr, Discover: discover, Principal: principal, Secret: secret, DialOptions: dial})
			if err != nil {
				return ExitError{Code: 2, Msg: err.Error()}
			}
			defer func() { _ = d.Close() }()
			t, err := openTerminal(cmd.InOrStdin(), cmd.OutOrStdout(), tty, tty && interactive)
			if err != nil {
				return err
			}
			start := &pb.ExecTaskStart{FrameworkId: framework, TaskId: args[0], Command: command, Env: env, Cwd: cwd, User: user, Tty: tty, Stdin: interactive}
			sio := scheduler.ExecIO{Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
			if interactive {
				sio.Stdin = cmd.InOrStdin()
			}
			if tty {
				if sz := t.size(); sz != nil {
					start.Size = &pb.TerminalSize{Width: sz.Width, Height: sz.Height}
				}
				sio.Resize = relaySizes(cmd.Context(), t)
			}
			exit, err := d.ExecTask(cmd.Context(), start, sio)
			t.stop()
			if err != nil {
				return taskExecError(err)
			}
			switch {
			case exit.Signal != 0:
				return ExitError{Code: 128 + int(exit.Signal)}
			case exit.Code != 0:
				return ExitError{Code: int(exit.Code)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false) // everything after TASK_ID is the command
	f.StringVar(&addr, "master", DefaultMaster, "master address host:port, or the masters of a highly available cluster, comma-separated")
	f.StringVar(&framework, "framework", "", "the task's framework ID")
	f.StringVar(&principal, "principal", "", "principal to authenticate as (needed when the master has --credentials)")
	f.StringVar(&secret, "secret", "", "the principal's secret (prefer --secret-file or $BRIM_SECRET)")
	f.StringVar(&secretFile, "secret-file", "", "file holding the principal's secret")
	mtls.Register(f)
	f.BoolVarP(&interactive, "interactive", "i", false, "send stdin to the command")
	f.BoolVarP(&tty, "tty", "t", false, "give the command a terminal")
	f.StringVarP(&user, "user", "u", "", "run as NAME, UID, NAME:GROUP or UID:GID of the agent's host, or of the image for a task of an image (default: the task's user)")
	f.StringVar(&cwd, "cwd", "", "working directory inside the container (default: the task's)")
	f.StringArrayVarP(&env, "env", "e", nil, "environment variable KEY=VALUE, added to the task's (repeatable)")
	return cmd
}

// relaySizes passes the terminal's sizes on in the master's wire type.
func relaySizes(ctx context.Context, t *terminal) <-chan *pb.TerminalSize {
	out := make(chan *pb.TerminalSize, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case sz := <-t.resize:
				select {
				case out <- &pb.TerminalSize{Width: sz.Width, Height: sz.Height}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// taskExecError is a one-line message, exit 1, for the master's refusal
// or the agent's failure to run the command.
func taskExecError(err error) error {
	if errors.Is(err, scheduler.ErrExec) {
		return ExitError{Code: 1, Msg: err.Error()}
	}
	if st, ok := status.FromError(err); ok {
		what := strings.ToLower(strings.ReplaceAll(st.Code().String(), "PermissionDenied", "permission denied"))
		if st.Code() == codes.PermissionDenied || st.Code() == codes.Unauthenticated {
			return ExitError{Code: 1, Msg: "the master refused the exec: " + what + ": " + st.Message()}
		}
		return ExitError{Code: 1, Msg: "exec: " + st.Message()}
	}
	return err
}
