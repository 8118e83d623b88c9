package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/brimnode/brim/client"
	"github.com/brimnode/brim/internal/cliout"
	"github.com/brimnode/brim/master/api"
)

// operatorFlags are the flags of the master's HTTP API clients.
type operatorFlags struct {
	master, principal, secret, secretFile string
	tls                                   MasterTLS
}

func (o *operatorFlags) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.master, "master", DefaultMaster, "master address host:port, or the masters of a highly available cluster, comma-separated (requests go to the leader)")
	f.StringVar(&o.principal, "principal", "", "principal to authenticate as (HTTP basic)")
	f.StringVar(&o.secret, "secret", "", "the principal's secret (prefer --secret-file or $BRIM_SECRET)")
	f.StringVar(&o.secretFile, "secret-file", "", "file holding the principal's secret")
	o.tls.Register(f)
}

// client returns the client the flags describe.
func (o *operatorFlags) client() (*client.Client, error) {
	return o.clientCtx(context.Background())
}

// clientCtx is client with the masters' discovery (--master etcd://…)
// bounded by ctx.
func (o *operatorFlags) clientCtx(ctx context.Context) (*client.Client, error) {
	master, _, err := ResolveMasters(ctx, o.master) // one request: no rediscovery
	if err != nil {
		return nil, err
	}
	cfg := client.Config{Master: master, Principal: o.principal}
	if o.principal != "" {
		cfg.Secret = o.secret
		if cfg.Secret == "" {
			cfg.Secret = os.Getenv("BRIM_SECRET")
		}
		if o.secretFile != "" {
			b, err := os.ReadFile(o.secretFile)
			if err != nil {
				return nil, ExitError{Code: 2, Msg: fmt.Sprintf("--secret-file: %v", err)}
			}
			cfg.Secret = strings.TrimSpace(string(b))
		}
	}
	tlsCfg, err := o.tls.Config()
	if err != nil {
		return nil, err
	}
	cfg.TLS = tlsCfg
	c, err := client.New(cfg)
	if err != nil {
		return nil, ExitError{Code: 2, Msg: err.Error()}
	}
	return c, nil
}

// call runs one request of the client the flags describe; the master's
// refusal or absence becomes exit status 1 with its message.
func (o *operatorFlags) call(cmd *cobra.Command, req func(context.Context, *client.Client) error) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	err = req(cmd.Context(), c)
	var ae *client.APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae), errors.Is(err, client.ErrUnreachable):
		return ExitError{Code: 1, Msg: err.Error()}
	case errors.Is(err, context.Canceled):
		return ExitError{Code: 130, Msg: "interrupted"}
	}
	return err
}

func newStateCommand() *cobra.Command {
	var (
		o      operatorFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Show the master's state: agents, frameworks, tasks, offers, DRF shares, quota",
		Args:  UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st *api.State
			if err := o.call(cmd, func(ctx context.Context, c *client.Client) (err error) { st, err = c.State(ctx); return err }); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return cliout.JSON(w, st)
			}
			return cliout.State(w, st)
		},
	}
	o.flags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON")
	MarkUsageErrors(cmd)
	return cmd
}

func newReserveCommand(unreserve bool) *cobra.Command {
	var (
		o       operatorFlags
		agentID string
	)
	use, short, call := "reserve", "Dynamically reserve an agent's resources for a role", (*client.Client).Reserve
	if unreserve {
		use, short, call = "unreserve", "Release dynamic reservations", (*client.Client).Unreserve
	}
	cmd := &cobra.Command{
		Use:   use + " --agent ID RESOURCES",
		Short: short,
		Long: short + `. RESOURCES name the role, e.g. "cpus(ads):1;mem(ads):512"
(unreserve: the reservations as /state shows them, e.g. "cpus(ads,ops):1").
Exit status 1 with the master's message on 400 (bad arguments), 401
(unauthenticated), 403 (not permitted) or 409 (insufficient resources).`,
		Args: UsageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if agentID == "" {
				return ExitError{Code: 2, Msg: "--agent is required"}
			}
			req := api.ReserveRequest{AgentID: agentID, Resources: args[0]}
			if err := o.call(cmd, func(ctx context.Context, c *client.Client) error { return call(c, ctx, req) }); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ok")
			return nil
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVar(&agentID, "agent", "", "agent ID (see brim state)")
	registerFlagCompletion(cmd, "agent", o.masterCompletion(agentIDs, 0))
	MarkUsageErrors(cmd)
	return cmd
}

func newQuotaCommand() *cobra.Command {
	var (
		o                      operatorFlags
		role, guarantee, limit string
		remove                 bool
	)
	cmd := &cobra.Command{
		Use:   "quota [--role R --guarantee RES --limit RES | --role R --remove]",
		Short: "Show or set roles' quota (guarantee and limit)",
		Args:  UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if role == "" {
				var q map[string]api.QuotaState
				if err := o.call(cmd, func(ctx context.Context, c *client.Client) (err error) { q, err = c.Quota(ctx); return err }); err != nil {
					return err
				}
				return cliout.Quota(cmd.OutOrStdout(), q)
			}
			if !remove && guarantee == "" && limit == "" {
				return ExitError{Code: 2, Msg: "give --guarantee and/or --limit, or --remove"}
			}
			req := api.QuotaRequest{Role: role, Guarantee: guarantee, Limit: limit}
			if err := o.call(cmd, func(ctx context.Context, c *client.Client) error { return c.SetQuota(ctx, req) }); err != nil {
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
	registerFlagCompletion(cmd, "role", o.masterCompletion(roles(""), 0))
	MarkUsageErrors(cmd)
	return cmd
}

func newWeightsCommand() *cobra.Command {
	var o operatorFlags
	cmd := &cobra.Command{
		Use: "weights [ROLE=WEIGHT…]",
		// ROLE= of the master's roles; the weight is the operator's.
		ValidArgsFunction: o.masterCompletion(roles("="), cobra.ShellCompDirectiveNoSpace),
		Short:             "Show or set roles' weights (a role's DRF share is divided by its weight)",
		Args:              UsageArgs(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				var ws map[string]float64
				if err := o.call(cmd, func(ctx context.Context, c *client.Client) (err error) { ws, err = c.Weights(ctx); return err }); err != nil {
					return err
				}
				return cliout.Weights(cmd.OutOrStdout(), ws)
			}
			req, err := client.ParseWeights(args)
			if err != nil {
				return ExitError{Code: 2, Msg: err.Error()}
			}
			if err := o.call(cmd, func(ctx context.Context, c *client.Client) error { return c.SetWeights(ctx, req) }); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ok")
			return nil
		},
	}
	o.flags(cmd)
	MarkUsageErrors(cmd)
	return cmd
}
