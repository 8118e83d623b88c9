package agentclient

import (
	"context"
	"time"

	"github.com/brimnode/brim/agent/agentpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// StatsAPI is the part of the agent's API WatchStats calls
// (agentpb.AgentClient has it).
type StatsAPI interface {
	Stats(ctx context.Context, in *agentpb.StatsRequest, opts ...grpc.CallOption) (*agentpb.Statistics, error)
	agentpb.Lister
}

// WatchStats samples the statistics of the containers ids, waits
// interval, samples again and hands emit one row per container, in the
// order of ids, computed over the interval (ComputeStats); with watch it
// goes on every interval until ctx ends. With no ids it samples every
// running container, listed again each round, leaving out one that exits
// or goes meanwhile. It returns nil when ctx ends while it waits, else the
// first error of a sample of a named container (as the API returned it:
// Client.Error explains it), of the listing, or of emit.
func WatchStats(ctx context.Context, api StatsAPI, ids []string, interval time.Duration, watch bool, emit func([]Stats) error) error {
	all := len(ids) == 0
	sample := func() ([]string, map[string]*agentpb.Statistics, error) {
		refs := ids
		if all {
			list, err := agentpb.ListAll(ctx, api)
			if err != nil {
				return nil, nil, err
			}
			refs = nil
			for _, c := range list {
				if c.State == "running" {
					refs = append(refs, c.Id)
				}
			}
		}
		m := map[string]*agentpb.Statistics{}
		var got []string
		for _, id := range refs {
			st, err := api.Stats(ctx, &agentpb.StatsRequest{Id: id})
			if all && gone(err) {
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			m[id] = st
			got = append(got, id)
		}
		return got, m, nil
	}
	_, prev, err := sample()
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
		refs, cur, err := sample()
		if err != nil {
			return err
		}
		rows := []Stats{}
		for _, id := range refs {
			a := prev[id]
			if a == nil {
				a = cur[id] // new this round: no interval yet
			}
			rows = append(rows, ComputeStats(a, cur[id]))
		}
		if err := emit(rows); err != nil {
			return err
		}
		if !watch {
			return nil
		}
		prev = cur
	}
}

// gone reports whether a sample failed because its container exited or
// went away since it was listed.
func gone(err error) bool {
	c := status.Code(err)
	return c == codes.NotFound || c == codes.FailedPrecondition
}
