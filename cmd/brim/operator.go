package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/brimnode/brim/master"
	"github.com/spf13/cobra"
)

var (
	_ = registerSubcommand(newStateCommand)
	_ = registerSubcommand(func() *cobra.Command { return newReserveCommand(false) })
	_ = registerSubcommand(func() *cobra.Command { return newReserveCommand(true) })
	_ = registerSubcommand(newQuotaCommand)
	_ = registerSubcommand(newWeightsCommand)
)

// operatorClient talks to the master's HTTP API.
type operatorClient struct {
	master, principal, secret, secretFile string
	tls                                   masterTLS
}

func (o *operatorClient) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.master, "master", defaultMasterListen, "master address")
	f.StringVar(&o.principal, "principal", "", "principal to authenticate as (HTTP basic)")
	f.StringVar(&o.secret, "secret", "", "the principal's secret (prefer --secret-file or $BRIM_SECRET)")
	f.StringVar(&o.secretFile, "secret-file", "", "file holding the principal's secret")
	o.tls.register(f)
}

// do sends a request and decodes a 200 answer into out; other codes
// become an exitError with the master's message.
func (o *operatorClient) do(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	tlsCfg, err := o.tls.config()
	if err != nil {
		return err
	}
	scheme := "http://"
	if tlsCfg != nil {
		scheme = "https://"
	}
	req, err := http.NewRequest(method, scheme+o.master+path, rd)
	if err != nil {
		return err
	}
	if o.principal != "" {
		secret := o.secret
		if secret == "" {
			secret = os.Getenv("BRIM_SECRET")
		}
		if o.secretFile != "" {
			b, err := os.ReadFile(o.secretFile)
			if err != nil {
				return exitError{code: 2, msg: fmt.Sprintf("--secret-file: %v", err)}
			}
			secret = strings.TrimSpace(string(b))
		}
		req.SetBasicAuth(o.principal, secret)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	cl := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	resp, err := cl.Do(req)
	if err != nil {
		return exitError{code: 1, msg: fmt.Sprintf("cannot reach the master at %s: %v", o.master, err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		if e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		return exitError{code: 1, msg: fmt.Sprintf("%s (HTTP %d)", e.Error, resp.StatusCode)}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

func newStateCommand() *cobra.Command {
	var (
		o      operatorClient
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Show the master's state: agents, frameworks, tasks, offers, DRF shares, quota",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st master.State
			if err := o.do(http.MethodGet, "/state", nil, &st); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(w, st)
			}
			return printState(w, &st)
		},
	}
	o.flags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON")
	markUsageErrors(cmd)
	return cmd
}

func printState(w io.Writer, st *master.State) error {
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
	fmt.Fprintf(tw, "\nROLE\tWEIGHT\tDOMINANT SHARE\tALLOCATED\tQUOTA GUARANTEE\tQUOTA LIMIT\n")
	for _, r := range st.Roles {
		q := st.Quota[r.Role]
		fmt.Fprintf(tw, "%s\t%g\t%.3f\t%s\t%s\t%s\n", r.Role, r.Weight, r.Share, dash(r.Allocated), dash(q.Guarantee), dash(q.Limit))
	}
	fmt.Fprintf(tw, "\noutstanding offers\t%d\n", len(st.Offers))
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newReserveCommand(unreserve bool) *cobra.Command {
	var (
		o       operatorClient
		agentID string
	)
	use, short, path := "reserve", "Dynamically reserve an agent's resources for a role", "/reserve"
	if unreserve {
		use, short, path = "unreserve", "Release dynamic reservations", "/unreserve"
	}
	cmd := &cobra.Command{
		Use:   use + " --agent ID RESOURCES",
		Short: short,
		Long: short + `. RESOURCES name the role, e.g. "cpus(ads):1;mem(ads):512"
(unreserve: the reservations as /state shows them, e.g. "cpus(ads,ops):1").
Exit status 1 with the master's message on 400 (bad arguments), 401
(unauthenticated), 403 (not permitted) or 409 (insufficient resources).`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if agentID == "" {
				return exitError{code: 2, msg: "--agent is required"}
			}
			if err := o.do(http.MethodPost, path, master.ReserveRequest{AgentID: agentID, Resources: args[0]}, nil); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ok")
			return nil
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVar(&agentID, "agent", "", "agent ID (see brim state)")
	markUsageErrors(cmd)
	return cmd
}

func newQuotaCommand() *cobra.Command {
	var (
		o                      operatorClient
		role, guarantee, limit string
		remove                 bool
	)
	cmd := &cobra.Command{
		Use:   "quota [--role R --guarantee RES --limit RES | --role R --remove]",
		Short: "Show or set roles' quota (guarantee and limit)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if role == "" {
				var q map[string]master.QuotaState
				if err := o.do(http.MethodGet, "/quota", nil, &q); err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintf(tw, "ROLE\tGUARANTEE\tLIMIT\n")
				for _, r := range sortedKeys(q) {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", r, dash(q[r].Guarantee), dash(q[r].Limit))
				}
				return tw.Flush()
			}
			if !remove && guarantee == "" && limit == "" {
				return exitError{code: 2, msg: "give --guarantee and/or --limit, or --remove"}
			}
			if err := o.do(http.MethodPost, "/quota", master.QuotaRequest{Role: role, Guarantee: guarantee, Limit: limit}, nil); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ok")
			return nil
		},
	}
	o.flags(cmd)
	f := cmd.Flags()
	f.StringVar(&role, "role", "", "role to set the quota of")
	f.StringVar(&guarantee, "guarantee", "", `guaranteed resources, e.g. "cpus:2;mem:4096"`)
	f.StringVar(&limit, "limit", "", "resources the role never exceeds")
	f.BoolVar(&remove, "remove", false, "remove the role's quota")
	markUsageErrors(cmd)
	return cmd
}

func newWeightsCommand() *cobra.Command {
	var o operatorClient
	cmd := &cobra.Command{
		Use:   "weights [ROLE=WEIGHT…]",
		Short: "Show or set roles' weights (a role's DRF share is divided by its weight)",
		Args:  usageArgs(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				var ws map[string]float64
				if err := o.do(http.MethodGet, "/weights", nil, &ws); err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintf(tw, "ROLE\tWEIGHT\n")
				for _, r := range sortedKeys(ws) {
					fmt.Fprintf(tw, "%s\t%g\n", r, ws[r])
				}
				return tw.Flush()
			}
			var req []master.WeightRequest
			for _, a := range args {
				role, w, ok := strings.Cut(a, "=")
				v, err := strconv.ParseFloat(w, 64)
				if !ok || role == "" || err != nil || !(v > 0) {
					return exitError{code: 2, msg: fmt.Sprintf("%q: want ROLE=WEIGHT with a positive weight", a)}
				}
				req = append(req, master.WeightRequest{Role: role, Weight: v})
			}
			if err := o.do(http.MethodPost, "/weights", req, nil); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ok")
			return nil
		},
	}
	o.flags(cmd)
	markUsageErrors(cmd)
	return cmd
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
