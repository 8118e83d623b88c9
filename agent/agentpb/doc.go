// Package agentpb holds the brim agent's local API (agent.proto) and the code
// protoc generates from it (committed; `make generate` rebuilds it). It owns
// only wire types, ListAll, which walks List's pages, and the socket path's
// limit (CheckSocketPath): the server lives in package agent, the client
// in agent/agentclient.
package agentpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative agent.proto
