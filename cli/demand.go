package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/brimnode/brim/client"
	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/internal/cliout"
)

// newDemandCommand is `brim demand submit|ls|show|cancel`: the master's
// /demands API (docs/demands.md).
func newDemandCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demand",
		Short: "Submit, list, show and cancel time-aware demands (docs/demands.md)",
		Args:  UsageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(demandSubmit(), demandList(), demandShow(), demandCancel())
	return cmd
}

func demandSubmit() *cobra.Command {
	var (
		o      operatorFlags
		file   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "submit -f FILE",
		Short: "Submit a demand document, or a JSON list of them (all or nothing); - reads stdin",
		Long: `Submit a demand document, or a JSON list of them (all or nothing).
Exit status 1 with the master's message naming the field on bad input
(nothing is stored), 2 for a file that cannot be read.`,
		Args: UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return ExitError{Code: 2, Msg: "-f FILE is required"}
			}
			var doc []byte
			var err error
			if file == "-" {
				doc, err = io.ReadAll(cmd.InOrStdin())
			} else {
				doc, err = os.ReadFile(file)
			}
			if err != nil {
				return ExitError{Code: 2, Msg: fmt.Sprintf("-f: %v", err)}
			}
			var ds []demand.Demand
			if err := o.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				ds, err = c.SubmitDemands(ctx, doc)
				return err
			}); err != nil {
				return err
			}
			if asJSON {
				return cliout.JSON(cmd.OutOrStdout(), ds)
			}
			return cliout.Demands(cmd.OutOrStdout(), ds)
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVarP(&file, "file", "f", "", "demand document (JSON; - for stdin)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON")
	MarkUsageErrors(cmd)
	return cmd
}

func demandList() *cobra.Command {
	var (
		o      operatorFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List demands with their state and plan",
		Args:    UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ds []demand.Demand
			if err := o.call(cmd, func(ctx context.Context, c *client.Client) (err error) { ds, err = c.Demands(ctx); return err }); err != nil {
				return err
			}
			if asJSON {
				return cliout.JSON(cmd.OutOrStdout(), ds)
			}
			return cliout.Demands(cmd.OutOrStdout(), ds)
		},
	}
	o.flags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON")
	MarkUsageErrors(cmd)
	return cmd
}

func demandShow() *cobra.Command {
	var (
		o      operatorFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:               "show ID",
		Short:             "Show one demand: its document, plan and every transition",
		Args:              UsageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: oneArg(o.masterCompletion(demandIDs, 0)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d *demand.Demand
			if err := o.call(cmd, func(ctx context.Context, c *client.Client) (err error) { d, err = c.Demand(ctx, args[0]); return err }); err != nil {
				return err
			}
			if asJSON {
				return cliout.JSON(cmd.OutOrStdout(), d)
			}
			return cliout.Demand(cmd.OutOrStdout(), d)
		},
	}
	o.flags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON")
	MarkUsageErrors(cmd)
	return cmd
}

func demandCancel() *cobra.Command {
	var (
		o      operatorFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:               "cancel ID",
		Short:             "Cancel a demand: FAILED (cancelled), its capacity released, its tasks killed",
		Args:              UsageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: oneArg(o.masterCompletion(demandIDs, 0)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d *demand.Demand
			if err := o.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				d, err = c.CancelDemand(ctx, args[0])
				return err
			}); err != nil {
				return err
			}
			if asJSON {
				return cliout.JSON(cmd.OutOrStdout(), d)
			}
			return cliout.Demand(cmd.OutOrStdout(), d)
		},
	}
	o.flags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON")
	MarkUsageErrors(cmd)
	return cmd
}
