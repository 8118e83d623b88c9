// Package agentclient is the client side of the agent's local API (the
// gRPC service agentpb.Agent on a unix socket): Dial with a probe that
// says when no agent listens, Error turning gRPC statuses into errors
// carrying the agent's own text, the stable JSON views of containers
// and stats that `brim container` prints (View, ComputeStats), and the
// sampling loop of `brim container stats` (WatchStats).
//
// It never prints and never exits: cmd/brim chooses exit codes and
// formats. Sentinels: ErrUnreachable (no agent serves the socket).
package agentclient
