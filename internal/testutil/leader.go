package testutil

import (
	"context"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// LeaderNamer is a fake master's Masters service: it names Leader (self
// when Leader is Addr) and, with hold, waits for the leader to change
// (it never does). Frozen, it answers nothing until the caller gives up,
// as a stopped (SIGSTOP) master.
type LeaderNamer struct {
	pb.UnimplementedMastersServer
	Addr, Leader string
	Frozen       bool
}

// WatchLeader implements pb.MastersServer.
func (m *LeaderNamer) WatchLeader(ctx context.Context, r *pb.WatchLeaderRequest) (*pb.LeaderInfo, error) {
	if m.Frozen || r.Hold && r.Known == m.Leader {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &pb.LeaderInfo{Leader: m.Leader, Self: m.Leader == m.Addr}, nil
}
