package cliout

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/brimnode/brim/master/api"
)

// State writes brim state's tables: agents (and their oversubscription),
// frameworks, tasks, the newest completed tasks, roles, offers.
func State(w io.Writer, st *api.State) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "AGENT\tHOSTNAME\tRESOURCES\tRESERVED\tCONNECTED\tTASKS\n")
	for _, a := range st.Agents {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%d\n", a.ID, a.Hostname, a.Resources, dash(a.Reserved), a.Connected, a.Tasks)
	}
	for _, a := range st.Agents {
		o := a.Oversubscription
		if o == nil {
			continue
		}
		fmt.Fprintf(tw, "\nAGENT %s\testimator %s\tqos %s\testimate %s\n", a.ID, o.Estimator, o.QoS, dash(o.Estimate))
		for _, c := range o.Corrections {
			fmt.Fprintf(tw, "  %s\t%s\ttask %s\t%s %.4g (baseline %.4g, threshold %.4g)\tactive %v\n",
				c.Type, c.ContainerID, dash(c.TaskID), c.Signal, c.Value, c.Baseline, c.Threshold, c.Active)
		}
	}
	fmt.Fprintf(tw, "\nFRAMEWORK\tNAME\tROLES\tCONNECTED\tTASKS\tOFFERS\n")
	for _, f := range st.Frameworks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%d\t%d\n", f.ID, f.Name, strings.Join(f.Roles, ","), f.Connected, f.Tasks, f.Offers)
	}
	fmt.Fprintf(tw, "\nTASK\tSTATE\tAGENT\tRESOURCES\tREASON\n")
	for _, t := range st.Tasks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.State, t.AgentID, t.Resources, dash(t.Reason))
	}
	if done := st.CompletedTasks; len(done) > 0 {
		const shown = 10
		fmt.Fprintf(tw, "\nCOMPLETED TASK\tSTATE\tFRAMEWORK\tAGENT\tREASON\t(newest %d of %d; --json for all)\n", min(shown, len(done)), len(done))
		for _, t := range done[max(0, len(done)-shown):] {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.State, t.FrameworkID, t.AgentID, dash(t.Reason))
		}
	}
	fmt.Fprintf(tw, "\nROLE\tWEIGHT\tDOMINANT SHARE\tALLOCATED\tQUOTA GUARANTEE\tQUOTA LIMIT\n")
	for _, r := range st.Roles {
		q := st.Quota[r.Role]
		fmt.Fprintf(tw, "%s\t%g\t%.3f\t%s\t%s\t%s\n", r.Role, r.Weight, r.Share, dash(r.Allocated), dash(q.Guarantee), dash(q.Limit))
	}
	if len(st.Demands) > 0 {
		fmt.Fprintf(tw, "\nDEMAND\tSTATE\tFRAMEWORK\tSTART\tREASON\n")
		for _, d := range st.Demands {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.ID, d.State, d.Framework, stamp(d.Start), dash(d.Reason))
		}
	}
	fmt.Fprintf(tw, "\noutstanding offers\t%d\n", len(st.Offers))
	return tw.Flush()
}

// Quota writes brim quota's table, by role.
func Quota(w io.Writer, q map[string]api.QuotaState) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ROLE\tGUARANTEE\tLIMIT\n")
	for _, r := range sortedKeys(q) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r, dash(q[r].Guarantee), dash(q[r].Limit))
	}
	return tw.Flush()
}

// Weights writes brim weights' table, by role.
func Weights(w io.Writer, ws map[string]float64) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ROLE\tWEIGHT\n")
	for _, r := range sortedKeys(ws) {
		fmt.Fprintf(tw, "%s\t%g\n", r, ws[r])
	}
	return tw.Flush()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
