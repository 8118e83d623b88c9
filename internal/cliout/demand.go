package cliout

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/brimnode/brim/master/api"
)

// stamp is t in RFC 3339 UTC, or "-" for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// state is a demand's state, marked late when it is (a loose demand
// planned or running past its window or deadline).
func state(d *api.Demand) string {
	if d.Late {
		return d.State + " (late)"
	}
	return d.State
}

// Demands writes brim demand ls's table.
func Demands(w io.Writer, ds []api.Demand) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "DEMAND\tSTATE\tFRAMEWORK\tSTART\tEND\tAGENTS\tREASON\n")
	for i := range ds {
		d := &ds[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", d.ID, state(d), d.Framework, stamp(d.Start), stamp(d.End), len(d.Placement), dash(d.Reason))
	}
	return tw.Flush()
}

// Demand writes brim demand show's view: the document, the plan and every
// transition.
func Demand(w io.Writer, d *api.Demand) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "demand\t%s\nstate\t%s\t%s\nframework\t%s (role %s)\ndocument\t%s\nplanned\t%s .. %s\n",
		d.ID, state(d), dash(d.Reason), d.Framework, d.Role, d.Doc, stamp(d.Start), stamp(d.End))
	for _, s := range d.Placement {
		fmt.Fprintf(tw, "  on\t%s\t%d tasks\n", s.Agent, s.Tasks)
	}
	fmt.Fprintf(tw, "\nAT\tFROM\tTO\tREASON\tMESSAGE\n")
	for _, h := range d.History {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", stamp(h.At), h.From, h.To, dash(string(h.Reason)), h.Message)
	}
	return tw.Flush()
}
