package masterlink

import (
	"context"
	"time"

	"github.com/brimnode/brim/internal/speclimit"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/tap"
)

// ServerOptions are the options of the master's gRPC server for its side
// of the link: a keepalive enforcement policy that permits the Client's
// pings (gRPC's default, one ping per 5 minutes, answers pings every
// KeepaliveTime with GOAWAY "too_many_pings", breaking every idle link),
// and pings of its own that close the transport of an agent that went
// silent. The message limits are gRPC's default, stated: task specs are
// bounded (speclimit.Check, at ACCEPT) and a re-registration comes in
// pages, so no message nears them however many tasks an agent runs. The
// master passes them to grpc.NewServer. They also make agent streams
// cancelable by their handler (StreamCancel).
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InTapHandle(cancelableAgentStreams),
		grpc.KeepaliveEnforcementPolicy(serverEnforcement()),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.MaxRecvMsgSize(speclimit.MaxMsgBytes), grpc.MaxSendMsgSize(speclimit.MaxMsgBytes),
	}
}

// serverEnforcement permits pings down to half gRPC's floor for client
// pings (10 s, whatever KeepaliveTime asks for), with or without a
// stream (between sessions).
func serverEnforcement() keepalive.EnforcementPolicy {
	return keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}
}

// streamCancelKey is the context key of an agent stream's cancel function.
type streamCancelKey struct{}

// cancelableAgentStreams gives each AgentLink.Connect stream a context
// its handler can cancel: the tap's context becomes the one gRPC's Recv
// and Send wait on, which nothing else the handler holds reaches.
func cancelableAgentStreams(ctx context.Context, info *tap.Info) (context.Context, error) {
	if info.FullMethodName != pb.AgentLink_Connect_FullMethodName {
		return ctx, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	return context.WithValue(ctx, streamCancelKey{}, cancel), nil
}

// StreamCancel returns the function that ends the agent stream whose
// context (or one derived from it) is ctx: a Recv or Send blocked on the
// stream returns, so the handler can receive in its own goroutine and
// still end the stream at will. ok is false on a server made without
// ServerOptions. Safe for concurrent use.
func StreamCancel(ctx context.Context) (cancel context.CancelFunc, ok bool) {
	cancel, ok = ctx.Value(streamCancelKey{}).(context.CancelFunc)
	return cancel, ok
}
