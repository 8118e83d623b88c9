// Package masterlinkpb holds the protobuf definitions of masterlink.proto
// and the Go code protoc generates from it (committed; `make generate`
// rebuilds it): the agent↔master stream (AgentLink), the framework API
// (Scheduler), who leads a highly available cluster (Masters), the status
// reasons and TaskState.Terminal both sides share (reasons.go), and the
// per-RPC credentials agents and frameworks present (BasicCredentials,
// auth.go). It
// owns the wire format only; package masterlink and package master
// implement the two sides, package scheduler the framework SDK.
package masterlinkpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative masterlink.proto
