package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	"github.com/brimnode/brim/agent/agentclient"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/internal/cliout"
)

// agentClient dials the agent's socket lazily: the flag is parsed after
// the commands are built. It maps the client's errors to exit codes.
type agentClient struct {
	socket  *string
	timeout *time.Duration // bound of one call (agentclient.CallTimeout); nil: DefaultAgentTimeout
	c       *agentclient.Client
}

// DefaultAgentTimeout bounds one call to the agent's socket (a kill's
// plus its grace; never a wait): longer than the agent's own bound on a
// kill with its default grace (10 s + 30 s), so that only a wedged
// agent meets it.
const DefaultAgentTimeout = 2 * time.Minute

// dial returns an API client. A dead socket gives a message that says so.
func (c *agentClient) dial() (agentpb.AgentClient, error) {
	if c.c == nil {
		d := DefaultAgentTimeout
		if c.timeout != nil {
			d = *c.timeout
		}
		if d < 0 {
			return nil, ExitError{Code: 2, Msg: fmt.Sprintf("--timeout %v: want 0 (no bound) or more", d)}
		}
		if err := agentpb.CheckSocketPath(*c.socket); err != nil {
			return nil, ExitError{Code: 2, Msg: "--socket: " + err.Error()}
		}
		cl, err := agentclient.Dial(*c.socket, agentclient.CallTimeout(d))
		if errors.Is(err, agentclient.ErrUnreachable) {
			return nil, ExitError{Code: 1, Msg: err.Error()}
		}
		if err != nil {
			return nil, err
		}
		c.c = cl
	}
	return c.c, nil
}

// rpcError turns an API error into the CLI's message (the agent's own
// text) and exit code.
func (c *agentClient) rpcError(err error) error {
	var ae *agentclient.APIError
	if c.c == nil || !errors.As(c.c.Error(err), &ae) {
		return err
	}
	if ae.Code == codes.Canceled {
		return ExitError{Code: 130, Msg: "interrupted"}
	}
	return ExitError{Code: 1, Msg: ae.Error()}
}

func newAgentInfo(socket *string) *cobra.Command {
	cl := &agentClient{socket: socket}
	return &cobra.Command{
		Use:   "info",
		Short: "Describe the running agent: ID, resources total/used/free, revocable pool, estimate, corrections in force",
		Args:  UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := cl.dial()
			if err != nil {
				return err
			}
			in, err := api.AgentInfo(cmd.Context(), &agentpb.AgentInfoRequest{})
			if err != nil {
				return cl.rpcError(err)
			}
			var ex *agentpb.ExplainResponse
			if in.Estimator != "" {
				if ex, err = api.Explain(cmd.Context(), &agentpb.ExplainRequest{}); err != nil {
					return cl.rpcError(err)
				}
			}
			return cliout.AgentInfo(cmd.OutOrStdout(), in, ex)
		},
	}
}

func newAgentExplain(socket *string) *cobra.Command {
	cl := &agentClient{socket: socket}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Show the revocable estimate with the terms of its computation, and the QoS corrections",
		Long: `Show the estimator's current estimate of the revocable resources this node
may offer, with the terms of its computation, the last estimate forwarded,
the revocable pool (estimate plus revocable resources in use) and its use,
and the QoS corrections in force and recently applied, each with the signal
that triggered it (value, the victim's baseline, the threshold).`,
		Args: UsageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := cl.dial()
			if err != nil {
				return err
			}
			r, err := api.Explain(cmd.Context(), &agentpb.ExplainRequest{})
			if err != nil {
				return cl.rpcError(err)
			}
			ex := agentclient.ExplainOf(r)
			w := cmd.OutOrStdout()
			if asJSON {
				return cliout.JSON(w, ex)
			}
			return cliout.Explain(w, ex)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newAgentReportLatency(socket *string) *cobra.Command {
	cl := &agentClient{socket: socket}
	var p50, p99, p999 time.Duration
	cmd := &cobra.Command{
		Use:   "report-latency CONTAINER --p99 DURATION [--p50 DURATION] [--p999 DURATION]",
		Short: "Report a latency the application in a container measured (QoS signal app-latency)",
		Long: `Report the latency the application in a (non-revocable) container measured
over its last window, e.g. its request p99. The monitor attaches it to the
container's samples while fresh (3 monitor intervals) and the QoS controller
compares it with the container's learned baseline (signal app-latency).`,
		Args: UsageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if p99 <= 0 {
				return ExitError{Code: 2, Msg: "brim agent report-latency: --p99 must be positive (see --help)"}
			}
			api, err := cl.dial()
			if err != nil {
				return err
			}
			_, err = api.ReportLatency(cmd.Context(), &agentpb.ReportLatencyRequest{
				Id: args[0], P50Nanos: int64(p50), P99Nanos: int64(p99), P999Nanos: int64(p999),
			})
			return cl.rpcError(err)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&p50, "p50", 0, "median latency, e.g. 800us")
	f.DurationVar(&p99, "p99", 0, "99th percentile latency (required), e.g. 2ms")
	f.DurationVar(&p999, "p999", 0, "99.9th percentile latency (default: p99)")
	return cmd
}

// AgentCommands are `brim agent`'s client subcommands (info, explain,
// report-latency) on the agent's socket (the --socket flag's value).
func AgentCommands(socket *string) []*cobra.Command {
	return []*cobra.Command{newAgentInfo(socket), newAgentExplain(socket), newAgentReportLatency(socket)}
}
