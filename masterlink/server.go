package masterlink

import (
	"time"

	"github.com/brimnode/brim/internal/speclimit"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// ServerOptions are the options of the master's gRPC server for its side
// of the link: a keepalive enforcement policy that permits the Client's
// pings (gRPC's default, one ping per 5 minutes, answers pings every
// KeepaliveTime with GOAWAY "too_many_pings", breaking every idle link),
// and pings of its own that close the transport of an agent that went
// silent. The message limits are gRPC's default, stated: task specs are
// bounded (speclimit.Check, at ACCEPT) and a re-registration comes in
// pages, so no message nears them however many tasks an agent runs. The
// master passes them to grpc.NewServer.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
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
