package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/containerd/console"
	"github.com/spf13/cobra"

	"github.com/brimnode/brim/agent/agentclient"
	"github.com/brimnode/brim/agent/agentpb"
)

// terminal is the client's side of -t: stdin in raw mode (keys go to the
// container's terminal as typed, ctrl-c included), and the window's size
// sent at the start and on each SIGWINCH.
type terminal struct {
	con    console.Console // nil: stdin is no terminal
	resize chan *agentpb.TerminalSize
	stop   func()
}

// openTerminal puts in in raw mode when raw and it is a terminal, and
// follows the window's size (of in, else of out). A tty needs a terminal
// only for input (needIn): -t with -i on a pipe is refused, as docker
// does.
func openTerminal(in io.Reader, out io.Writer, raw, needIn bool) (*terminal, error) {
	t := &terminal{resize: make(chan *agentpb.TerminalSize, 1), stop: func() {}}
	if f, ok := in.(*os.File); ok {
		if c, err := console.ConsoleFromFile(f); err == nil {
			t.con = c
		}
	}
	if t.con == nil {
		if needIn {
			return nil, ExitError{Code: 2, Msg: "the input is not a terminal: -t with -i needs one (drop -t to pipe input)"}
		}
		if f, ok := out.(*os.File); ok {
			if c, err := console.ConsoleFromFile(f); err == nil {
				t.con = c
			}
		}
	}
	if t.con == nil {
		return t, nil
	}
	if raw && needIn {
		if err := t.con.SetRaw(); err != nil {
			return nil, fmt.Errorf("terminal raw mode: %w", err)
		}
	}
	winch := make(chan os.Signal, 1)
	if len(resizeSignals) > 0 { // none: Notify would relay every signal
		signal.Notify(winch, resizeSignals...)
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-done:
				return
			case <-winch:
				if sz := t.size(); sz != nil {
					select {
					case <-t.resize:
					default:
					}
					t.resize <- sz
				}
			}
		}
	}()
	t.stop = func() {
		signal.Stop(winch)
		close(done)
		<-ended
		if raw && needIn {
			_ = t.con.Reset()
		}
	}
	return t, nil
}

// size is the terminal's size now; nil without one.
func (t *terminal) size() *agentpb.TerminalSize {
	if t.con == nil {
		return nil
	}
	ws, err := t.con.Size()
	if err != nil || ws.Width == 0 {
		return nil
	}
	return &agentpb.TerminalSize{Width: uint32(ws.Width), Height: uint32(ws.Height)}
}

// exitOf is the command's exit code for a process's exit: its code, or
// 128 + the signal that killed it.
func exitOf(e *agentpb.ExitStatus) error {
	switch {
	case e == nil:
		return ExitError{Code: 1, Msg: "no exit status"}
	case e.Code > 0:
		return ExitError{Code: int(e.Code)}
	case e.Signal != 0:
		return ExitError{Code: 128 + int(e.Signal)}
	case e.Code < 0:
		return ExitError{Code: 1, Msg: "exit status unknown: " + e.Message}
	}
	return nil
}

func newContainerExec(cl *agentClient) *cobra.Command {
	var (
		interactive, tty bool
		user, cwd        string
		env              []string
	)
	cmd := &cobra.Command{
		Use:   "exec [-i] [-t] [--user U] [--env K=V]… [--cwd DIR] ID|NAME -- CMD [ARG…]",
		Short: "Run a command in a running container; exits with its exit code",
		Long: `Run a command in a running container: in its namespaces, cgroups and
confinement (capabilities, seccomp filter, no_new_privs, masked paths),
never more privileged than the container's own process. --user root is
refused unless the container runs as root or in a user namespace.
-i sends stdin (its end closes the command's stdin); -t gives the
command a terminal (stdin in raw mode, window-size changes followed;
stdout and stderr are then one stream). When the session ends before
the command (this command interrupted or killed, the agent restarted),
the command is hung up and killed with what it started in its session;
it is killed with the container too. A paused container is refused.
Users are the container's: its image's for a container of an image.
Exit status: the command's, 128+n when killed by signal n.`,
		Args: UsageArgs(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, e := range env {
				if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
					return ExitError{Code: 2, Msg: fmt.Sprintf("--env %q: want KEY=VALUE", e)}
				}
			}
			t, err := openTerminal(cmd.InOrStdin(), cmd.OutOrStdout(), tty, tty && interactive)
			if err != nil {
				return err
			}
			api, err := cl.dial()
			if err != nil {
				t.stop()
				return err
			}
			command := args[1:]
			if command[0] == "--" { // ID -- CMD: flags stopped at ID, so "--" is still here
				command = command[1:]
			}
			if len(command) == 0 {
				return ExitError{Code: 2, Msg: cmd.CommandPath() + ": no command after --"}
			}
			start := &agentpb.ExecStart{
				Id: args[0], Command: command, Env: env, Cwd: cwd, User: user, Tty: tty, Stdin: interactive,
			}
			if tty {
				start.Size = t.size()
			}
			s := &agentclient.Session{StdinEnd: true, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
			if interactive {
				s.Stdin = cmd.InOrStdin()
			}
			if tty {
				s.Resize = t.resize
			}
			st, err := runSession(cmd.Context(), s, t, func(ctx context.Context) (agentclient.StdioStream, error) { return api.Exec(ctx) },
				&agentpb.StdioInput{Msg: &agentpb.StdioInput_Exec{Exec: start}})
			if err != nil {
				return cl.rpcError(err)
			}
			return exitOf(st)
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false) // everything after ID is the command
	f.BoolVarP(&interactive, "interactive", "i", false, "send stdin to the command")
	f.BoolVarP(&tty, "tty", "t", false, "give the command a terminal")
	f.StringVarP(&user, "user", "u", "", "run as NAME, UID, NAME:GROUP or UID:GID of the host, or of the image for a container of an image (default: the container's user)")
	f.StringVar(&cwd, "cwd", "", "working directory inside the container (default: the container's)")
	f.StringArrayVarP(&env, "env", "e", nil, "environment variable KEY=VALUE, added to the container's (repeatable)")
	return cmd
}

func newContainerAttach(cl *agentClient) *cobra.Command {
	var noStdin bool
	cmd := &cobra.Command{
		Use:   "attach [--no-stdin] ID|NAME",
		Short: "Attach to a running container's output, and its stdin and terminal (run with -i or -t)",
		Long: `Attach to a running container: its output as it comes (from its log) and,
for a container run with -i or -t, stdin and the terminal (raw mode,
window size followed). Ctrl-p ctrl-q detaches (the container runs on), as
does ctrl-c without a terminal; the end of stdin only stops sending input.
When the container exits, so does this command, with its exit code.`,
		Args: UsageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := cl.dial()
			if err != nil {
				return err
			}
			c, err := api.Get(cmd.Context(), &agentpb.GetRequest{Id: args[0]})
			if err != nil {
				return cl.rpcError(err)
			}
			withStdin := (c.Stdin || c.Tty) && !noStdin
			return attach(cmd, cl, api, c, withStdin, false, false)
		},
	}
	cmd.Flags().BoolVar(&noStdin, "no-stdin", false, "output only: do not send stdin")
	return cmd
}

// attach connects to container c: output, and stdin and terminal when
// withStdin. fromStart passes its whole log (run -it), stdinEnd closes
// the container's stdin at the end of ours (run -i).
func attach(cmd *cobra.Command, cl *agentClient, api agentpb.AgentClient, c *agentpb.Container, withStdin, fromStart, stdinEnd bool) error {
	t, err := openTerminal(cmd.InOrStdin(), cmd.OutOrStdout(), c.Tty, c.Tty && withStdin)
	if err != nil {
		return err
	}
	start := &agentpb.AttachStart{Id: c.Id, Stdin: withStdin, FromStart: fromStart}
	s := &agentclient.Session{Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(), StdinEnd: stdinEnd}
	if withStdin {
		s.Stdin, s.DetachKeys = cmd.InOrStdin(), agentclient.DefaultDetachKeys
		if c.Tty {
			start.Size, s.Resize = t.size(), t.resize
		}
	}
	st, err := runSession(cmd.Context(), s, t, func(ctx context.Context) (agentclient.StdioStream, error) { return api.Attach(ctx) },
		&agentpb.StdioInput{Msg: &agentpb.StdioInput_Attach{Attach: start}})
	if errors.Is(err, agentclient.ErrDetached) || (err == nil && st == nil) || errors.Is(err, context.Canceled) {
		fmt.Fprintf(cmd.ErrOrStderr(), "\r\ndetached from %s; it runs on\r\n", c.Id)
		return nil
	}
	if err != nil {
		return cl.rpcError(err)
	}
	return exitOf(st)
}

// runSession opens a stream and runs s over it, the terminal restored
// before it returns.
func runSession(ctx context.Context, s *agentclient.Session, t *terminal, open func(context.Context) (agentclient.StdioStream, error), first *agentpb.StdioInput) (*agentpb.ExitStatus, error) {
	defer t.stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := open(ctx)
	if err != nil {
		return nil, err
	}
	return s.Run(ctx, stream, first)
}
