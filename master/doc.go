// Package master is the master's domain: the registry of agents,
// frameworks, tasks and outstanding offers; the hierarchical DRF
// allocator (package master/allocator) wired in and driven by a
// periodic cycle and by events; offer validation (ACCEPT with
// LAUNCH/RESERVE/UNRESERVE, DECLINE with filters, REVIVE, SUPPRESS,
// KILL, ACKNOWLEDGE, RECONCILE, and UpdateTask, which resizes a running
// task with offers and settles the accounting when the agent answers);
// agent health (missed heartbeats → unreachable → tasks LOST); framework
// failover; operator changes (reservations, quota, weights), stored
// before they are applied; roles; the revocable pool; the glue of
// time-aware demands (demands.go over package demand); and its figures
// as plain values (Metrics). Agents' oversubscription status (estimate,
// explanation, QoS corrections) is shown in State; only a change of the
// revocable amount reaches the allocator.
//
// It never launches containers (agents do), never decides allocation
// itself (the allocator does), and has no wire and no store of its own:
//
//	master/transport   gRPC (AgentLink, Scheduler), the HTTP API, one
//	                   port, TLS, authentication and ACLs, protobuf ↔
//	                   domain conversion, the one error → status table
//	master             this package: the domain
//	master/boltstore,  master.Store on bbolt (one master) and on etcd
//	master/etcdstore   (highly available, elected, fenced), both
//	                   writing master/record's encoding
//	master/server      the assembly: a Config, its store, transport and
//	                   loops, the standby's gate
//
// The transport calls the domain with domain values (Registration,
// Subscription, AcceptRequest, TaskStatus, …) and drains the Outbox of
// each stream, whose messages (RunTask, KillTask, OffersMade, …) it
// converts; the domain holds no stream. Authentication happens in the
// transport: the domain gets principals, and for run_as_root the
// caller's decision (AcceptRequest.MayRunAsRoot). It declares what it
// needs of a store (Store, and for a highly available master Elector
// and Term, elector.go) and calls it outside its lock, through one
// ordered writer (writes.go).
//
// The Master serializes every allocator call under one mutex; sends to
// streams never block under it, and no store call is made under it.
//
// Sentinels: ErrInvalid, ErrNotFound, ErrStaleOffer, ErrConflict,
// ErrInsufficient, ErrUnauthenticated, ErrForbidden, ErrClosed,
// ErrNotLeader. The domain wraps the allocator's and the resources
// package's errors in them (fromAllocator); the transport maps them, in
// one table, to gRPC codes and HTTP statuses. ErrNotFound is
// allocator.ErrNotFound: one "not found" for frameworks, agents, roles,
// tasks and offers in both layers.
package master
