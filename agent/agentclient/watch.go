package agentclient

import (
	"context"
	"time"

	"github.com/brimnode/brim/agent/agentpb"
	"google.golang.org/grpc"
)

// StatsAPI is the part of the agent's API WatchStats calls
// (agentpb.AgentClient has it).
type StatsAPI interface {
	Stats(ctx context.Context, in *agentpb.StatsRequest, opts ...grpc.CallOption) (*agentpb.Statistics, error)
}

// WatchStats samples the statistics of the containers ids, waits
// interval, samples again and hands emit one row per container, in the
// order of ids, computed over the interval (ComputeStats); with watch it
// goes on every interval until ctx ends. It returns nil when ctx ends
// while it waits, else the first error of a sample (as the API returned
// it: Client.Error explains it) or of emit.
func WatchStats(ctx context.Context, api StatsAPI, ids []string, interval time.Duration, watch bool, emit func([]Stats) error) error {
	sample := func() (map[string]*agentpb.Statistics, error) {
		m := map[string]*agentpb.Statistics{}
		for _, id := range ids {
			st, err := api.Stats(ctx, &agentpb.StatsRequest{Id: id})
			if err != nil {
				return nil, err
			}
			m[id] = st
		}
		return m, nil
	}
	prev, err := sample()
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
		cur, err := sample()
		if err != nil {
			return err
		}
		var rows []Stats
		for _, id := range ids {
			rows = append(rows, ComputeStats(prev[id], cur[id]))
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
