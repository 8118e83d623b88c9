package cli

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/brimnode/brim/agent/agentclient"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/client"
	"github.com/brimnode/brim/master/api"
)

// completionTimeout bounds all a completion asks of the agent or master:
// a dead or wedged daemon leaves the shell without candidates, never
// waiting.
const completionTimeout = 2 * time.Second

// completionCtx is the bounded context of one completion.
func completionCtx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(ctx, completionTimeout)
}

// Which containers a command's completion offers.
const (
	anyState    = ""
	runningOnly = "running"
	pausedOnly  = "paused"
)

// containerArgs completes ID|NAME arguments with the agent's containers
// in state ("": any; "running" includes paused ones), each ID and each
// name other than its ID, described by its name or ID and state. one:
// the command takes a single container.
func (c *agentClient) containerArgs(state string, one bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if one && len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := completionCtx(cmd)
		defer cancel()
		list, err := c.listForCompletion(ctx)
		if err != nil {
			cobra.CompDebugln("brim: complete containers: "+err.Error(), true)
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, ct := range list {
			st := agentclient.State(ct)
			switch {
			case state == runningOnly && ct.State != "running":
				continue
			case state == pausedOnly && !ct.Paused:
				continue
			case slices.Contains(args, ct.Id) || slices.Contains(args, ct.Name):
				continue
			}
			out = append(out, cobra.CompletionWithDesc(ct.Id, ct.Name+", "+st))
			if ct.Name != ct.Id {
				out = append(out, cobra.CompletionWithDesc(ct.Name, ct.Id+", "+st))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// listForCompletion lists the agent's containers within ctx.
func (c *agentClient) listForCompletion(ctx context.Context) ([]*agentpb.Container, error) {
	if err := agentpb.CheckSocketPath(*c.socket); err != nil {
		return nil, err
	}
	cl, err := agentclient.Dial(*c.socket, agentclient.ProbeTimeout(completionTimeout), agentclient.CallTimeout(completionTimeout))
	if err != nil {
		return nil, err
	}
	defer func() { _ = cl.Close() }() // a completion: nothing to report
	return agentpb.ListAll(ctx, cl)
}

// masterCompletion completes with what fetch reads from the master that
// o's flags name, within completionTimeout.
func (o *operatorFlags) masterCompletion(fetch func(ctx context.Context, c *client.Client) ([]cobra.Completion, error),
	directive cobra.ShellCompDirective) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx, cancel := completionCtx(cmd)
		defer cancel()
		c, err := o.clientCtx(ctx)
		if err == nil {
			defer c.CloseIdleConnections()
			var out []cobra.Completion
			if out, err = fetch(ctx, c); err == nil {
				return out, directive | cobra.ShellCompDirectiveNoFileComp
			}
		}
		cobra.CompDebugln("brim: complete from the master: "+err.Error(), true)
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
}

// agentIDs are the master's agents, described by hostname.
func agentIDs(ctx context.Context, c *client.Client) ([]cobra.Completion, error) {
	st, err := c.State(ctx)
	if err != nil {
		return nil, err
	}
	var out []cobra.Completion
	for _, a := range st.Agents {
		out = append(out, cobra.CompletionWithDesc(a.ID, a.Hostname+" "+a.Resources))
	}
	return out, nil
}

// roleNames are the roles the master knows: with allocations, quota,
// weights, or frameworks subscribed to them.
func roleNames(st *api.State) []string {
	seen := map[string]bool{}
	for _, r := range st.Roles {
		seen[r.Role] = true
	}
	for r := range st.Quota {
		seen[r] = true
	}
	for r := range st.Weights {
		seen[r] = true
	}
	for _, f := range st.Frameworks {
		for _, r := range f.Roles {
			seen[r] = true
		}
	}
	out := make([]string, 0, len(seen))
	for r := range seen {
		if r != "" {
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out
}

// roles completes role names; suffix is appended to each (weights'
// "ROLE=").
func roles(suffix string) func(ctx context.Context, c *client.Client) ([]cobra.Completion, error) {
	return func(ctx context.Context, c *client.Client) ([]cobra.Completion, error) {
		st, err := c.State(ctx)
		if err != nil {
			return nil, err
		}
		var out []cobra.Completion
		for _, r := range roleNames(st) {
			out = append(out, r+suffix)
		}
		return out, nil
	}
}

// demandIDs are the master's demands, described by state.
func demandIDs(ctx context.Context, c *client.Client) ([]cobra.Completion, error) {
	ds, err := c.Demands(ctx)
	if err != nil {
		return nil, err
	}
	var out []cobra.Completion
	for _, d := range ds {
		out = append(out, cobra.CompletionWithDesc(d.ID, strings.ToLower(fmt.Sprint(d.State))))
	}
	return out, nil
}

// oneArg limits a completion to a command's first argument.
func oneArg(f cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return f(cmd, args, toComplete)
	}
}

// registerFlagCompletion registers f for flag of cmd; a flag cmd lacks is
// a programming error.
func registerFlagCompletion(cmd *cobra.Command, flag string, f cobra.CompletionFunc) {
	if err := cmd.RegisterFlagCompletionFunc(flag, f); err != nil {
		panic(fmt.Sprintf("brim: completion of %s --%s: %v", cmd.Name(), flag, err))
	}
}
