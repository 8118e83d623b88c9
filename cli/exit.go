package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ExitError makes a command exit with Code (e.g. the exit code of a
// container for `--wait`), printing Msg when it is not empty.
type ExitError struct {
	Code int
	Msg  string
}

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Commands are the client commands, ready to be added to brim's root.
func Commands() []*cobra.Command {
	return []*cobra.Command{
		newContainerCommand(), newImageCommand(), newStateCommand(), newReserveCommand(false), newReserveCommand(true),
		newQuotaCommand(), newWeightsCommand(), newDemandCommand(), newRunCommand(), newTaskCommand(), newExperimentCommand(),
		newDocsCommand(),
	}
}

// MarkUsageErrors makes flag errors exit with status 2, recursively.
func MarkUsageErrors(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return ExitError{Code: 2, Msg: fmt.Sprintf("%s: %v (see --help)", c.CommandPath(), err)}
	})
	for _, c := range cmd.Commands() {
		MarkUsageErrors(c)
	}
}

// UsageArgs turns an argument validation error into exit status 2.
func UsageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return ExitError{Code: 2, Msg: fmt.Sprintf("%s: %v (see --help)", cmd.CommandPath(), err)}
		}
		return nil
	}
}

// MasterRefusal turns the master's refusal of who ("agent",
// "framework": codes.Unauthenticated or PermissionDenied anywhere in err's
// chain) into a one-line message and exit code 1; other errors are
// returned as they are.
func MasterRefusal(who string, err error) error {
	var gs interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &gs) {
		return err
	}
	var what string
	switch st := gs.GRPCStatus(); st.Code() {
	case codes.Unauthenticated:
		what = "unauthenticated"
	case codes.PermissionDenied:
		what = "permission denied"
	default:
		return err
	}
	return ExitError{Code: 1, Msg: "the master refused the " + who + ": " + what + ": " + gs.GRPCStatus().Message()}
}
