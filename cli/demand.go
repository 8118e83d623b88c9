package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/brimnode/brim/client"
	"github.com/brimnode/brim/internal/cliout"
	"github.com/brimnode/brim/master/api"
)

// newDemandCommand is `brim demand submit|ls|show|cancel`: the master's
// /demands API (docs/demands.md).
func newDemandCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demand",
		Short: "Submit, list, show, update and cancel time-aware demands (docs/demands.md)",
		Args:  UsageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(demandSubmit(), demandList(), demandShow(), demandUpdate(), demandCancel())
	return cmd
}

// readDocument reads -f FILE (- : stdin); a file that cannot be read is
// a usage error (exit 2).
func readDocument(cmd *cobra.Command, file string) ([]byte, error) {
	if file == "" {
		return nil, ExitError{Code: 2, Msg: "-f FILE is required"}
	}
	var doc []byte
	var err error
	if file == "-" {
		doc, err = io.ReadAll(cmd.InOrStdin())
	} else {
		doc, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, ExitError{Code: 2, Msg: fmt.Sprintf("-f: %v", err)}
	}
	return doc, nil
}

func demandUpdate() *cobra.Command {
	var (
		o      operatorFlags
		file   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "update ID -f FILE",
		Short: "Give a demand not handed over yet a new document (window, size, deadline); - reads stdin",
		Long: `Give a demand not handed over yet (ACCEPTED, ALLOCATING) a new document:
the master plans it again by the rules of a submission. Its DemandID may
be left out; given, it must be ID. The same document again changes
nothing. Exit status 1 with the master's message on bad input, on a
demand handed over already, or on a strict start the plan cannot hold
in its new window (the demand stays as it was); 2 for a file that
cannot be read.`,
		Args: UsageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := readDocument(cmd, file)
			if err != nil {
				return err
			}
			var d *api.Demand
			if err := o.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				d, err = c.UpdateDemand(ctx, args[0], doc)
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
	cmd.Flags().StringVarP(&file, "file", "f", "", "demand document (JSON; - for stdin)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON")
	MarkUsageErrors(cmd)
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
A document submitted again as it stands returns the stored demand.
Exit status 1 with the master's message naming the field on bad input
(nothing is stored) or for an ID in use by another document, 2 for a
file that cannot be read.`,
		Args: UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := readDocument(cmd, file)
			if err != nil {
				return err
			}
			var ds []api.Demand
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
			var ds []api.Demand
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
			var d *api.Demand
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
			var d *api.Demand
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
