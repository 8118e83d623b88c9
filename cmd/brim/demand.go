package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/brimnode/brim/client"
	"github.com/brimnode/brim/demand"
	"github.com/spf13/cobra"
)

var _ = registerSubcommand(newDemandCommand)

// newDemandCommand is `brim demand submit|ls|show|cancel`: the master's
// /demands API (docs/demands.md).
func newDemandCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demand",
		Short: "Submit, list, show and cancel time-aware demands (docs/demands.md)",
		Args:  usageArgs(cobra.NoArgs),
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
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return exitError{code: 2, msg: "-f FILE is required"}
			}
			var doc []byte
			var err error
			if file == "-" {
				doc, err = io.ReadAll(cmd.InOrStdin())
			} else {
				doc, err = os.ReadFile(file)
			}
			if err != nil {
				return exitError{code: 2, msg: fmt.Sprintf("-f: %v", err)}
			}
			var ds []demand.Demand
			if err := o.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				ds, err = c.SubmitDemands(ctx, doc)
				return err
			}); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), ds)
			}
			return printDemands(cmd.OutOrStdout(), ds)
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVarP(&file, "file", "f", "", "demand document (JSON; - for stdin)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON")
	markUsageErrors(cmd)
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
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ds []demand.Demand
			if err := o.call(cmd, func(ctx context.Context, c *client.Client) (err error) { ds, err = c.Demands(ctx); return err }); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), ds)
			}
			return printDemands(cmd.OutOrStdout(), ds)
		},
	}
	o.flags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON")
	markUsageErrors(cmd)
	return cmd
}

func demandShow() *cobra.Command {
	var (
		o      operatorFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one demand: its document, plan and every transition",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d *demand.Demand
			if err := o.call(cmd, func(ctx context.Context, c *client.Client) (err error) { d, err = c.Demand(ctx, args[0]); return err }); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			return printDemand(cmd.OutOrStdout(), d)
		},
	}
	o.flags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON")
	markUsageErrors(cmd)
	return cmd
}

func demandCancel() *cobra.Command {
	var (
		o      operatorFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a demand: FAILED (cancelled), its capacity released, its tasks killed",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d *demand.Demand
			if err := o.call(cmd, func(ctx context.Context, c *client.Client) (err error) {
				d, err = c.CancelDemand(ctx, args[0])
				return err
			}); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			return printDemand(cmd.OutOrStdout(), d)
		},
	}
	o.flags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON")
	markUsageErrors(cmd)
	return cmd
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func printDemands(w io.Writer, ds []demand.Demand) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "DEMAND\tSTATE\tFRAMEWORK\tSTART\tEND\tAGENTS\tREASON\n")
	for _, d := range ds {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", d.ID, d.State, d.Framework, stamp(d.Start), stamp(d.End), len(d.Placement), dash(string(d.Reason)))
	}
	return tw.Flush()
}

func printDemand(w io.Writer, d *demand.Demand) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "demand\t%s\nstate\t%s\t%s\nframework\t%s (role %s)\ndocument\t%s\nplanned\t%s .. %s\n",
		d.ID, d.State, dash(string(d.Reason)), d.Framework, d.Role, d.Doc, stamp(d.Start), stamp(d.End))
	for _, s := range d.Placement {
		fmt.Fprintf(tw, "  on\t%s\t%d tasks\n", s.Agent, s.Tasks)
	}
	fmt.Fprintf(tw, "\nAT\tFROM\tTO\tREASON\tMESSAGE\n")
	for _, h := range d.History {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", stamp(h.At), h.From, h.To, dash(string(h.Reason)), h.Message)
	}
	return tw.Flush()
}
