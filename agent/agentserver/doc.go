// Package agentserver is the agent's local API: the gRPC service of
// agentpb on a root-only unix socket that `brim container …`, `brim
// image …` and `brim agent …` talk to (through agent/agentclient).
//
// It owns the transport and nothing of the domain: the socket (Listen:
// 0600, a stale socket of a dead agent replaced, a live one refused;
// limitConns bounds the open connections), the server's limits (Options:
// idle connections closed, message sizes stated), the conversion between
// agentpb and the agent's types (ToProto, statsToProto, …), the
// streams of exec and attach (server_stdio.go) and the one
// mapping of the agent's and the image store's sentinels to gRPC codes
// (toStatus). It serves over Agent, an interface of the agent core it
// declares (*agent.Agent implements it); Serve drives the agent's life
// around the server: Start before it answers, Shutdown before it stops
// (containers keep running), Close at the end.
//
// It never imports the containerizer, the shim, the concrete isolators,
// eBPF, the master or its link (depguard agentserver-serves-the-core).
//
// Errors of Listen and Run wrap agent.ErrAgentRunning when another agent
// answers on the socket, agent.ErrInvalidArgument for a bad path or
// negative limits; RPC errors are gRPC statuses whose message is the
// agent's error text.
package agentserver
