// Package master is brim's master service: the registry of agents,
// frameworks, tasks and outstanding offers; the hierarchical DRF allocator
// (package master/allocator) wired in and driven by a periodic cycle and by
// events; offer validation (ACCEPT with LAUNCH/RESERVE/UNRESERVE, DECLINE
// with filters, REVIVE, SUPPRESS, KILL, ACKNOWLEDGE, RECONCILE, and
// UpdateTask, which resizes a running task with offers and settles the
// accounting when the agent answers); agent
// health (missed heartbeats → unreachable → tasks LOST); framework failover;
// and the gRPC services of package masterlinkpb (AgentLink for agents,
// Scheduler for frameworks). It authenticates operators and frameworks
// against one credentials file and applies the ACLs (SetAuthorizer); with
// Options.AuthenticateAgents it authenticates agents' registrations too
// (per-RPC credentials in AuthMetadata, the register_agent ACL, and an
// agent ID bound to the principal it first registered with, persisted in
// the Store).
// Agents' oversubscription status (estimate, explanation, QoS corrections)
// is shown in State; only a change of the revocable amount reaches the
// allocator.
//
// Server (serve.go) puts the gRPC services and the HTTP API on one port,
// with read timeouts; Start (start.go) assembles a whole master from a
// Config (store, credentials, TLS, listener) and runs it.
//
// It never launches containers (agents do) and never decides allocation
// itself (the allocator does). The Master serializes every allocator call
// under one mutex; sends to streams never block under it.
//
// # Layers
//
// Transport → domain → store, as containerd's services:
//   - transport: grpc.go (the AgentLink and Scheduler handlers, which own
//     the streams) and http.go (the operator API); they authenticate
//     (auth.go, rpcauth.go), convert, call the domain and map its error
//     once (status.go);
//   - convert.go: every conversion between masterlinkpb and the domain's
//     types (task states: taskstate.go); the domain's files import no
//     protobuf and its state holds no stream, only outboxes of domain
//     messages (messages.go) the streams drain;
//   - wire.go: the operator API's JSON types, defined in master/api (which
//     the client imports) and aliased here;
//   - domain: master.go (state, cycle, timeouts), agents.go, frameworks.go,
//     accept.go (planAccept computes an ACCEPT, pure; applyAcceptLocked
//     carries it out), update.go, operator.go (all-or-nothing operator
//     changes, stored before they are applied), roles.go (ValidateRole);
//   - completed.go: the bounded history of tasks and frameworks that left
//     the master (State's completedTasks); an ended task an agent reports
//     acknowledged is never adopted as live;
//   - store: store.go (BoltStore: checked at open, bbolt panics turned
//     into ErrCorruptStore) and backup.go (Backup, RunBackups, Restore).
//
// Sentinels: ErrInvalid, ErrNotFound, ErrStaleOffer, ErrConflict,
// ErrInsufficient, ErrUnauthenticated, ErrForbidden, ErrClosed, and the
// store's ErrCorruptStore and ErrStoreBusy (never on the wire). The domain
// wraps the allocator's and the resources package's errors in them, and
// status.go maps them, in one table, to codes.InvalidArgument, NotFound,
// FailedPrecondition (both ErrStaleOffer and ErrConflict),
// ResourceExhausted, Unauthenticated, PermissionDenied and Unavailable, and
// to the HTTP statuses of the operator API.
//
// ErrNotFound is allocator.ErrNotFound: one "not found" for frameworks,
// agents, roles, tasks and offers in both layers.
package master
