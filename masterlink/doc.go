// Package masterlink is the agent side of the agent↔master protocol
// (package masterlinkpb): Client registers the agent with the master
// (persisting the agent ID the master assigns), re-registers with its
// running tasks — and the master's launches still under way, STARTING —
// after any break, sends heartbeats and the agent's
// oversubscription status (revocable resources, the estimate's
// explanation, the QoS corrections in force and recent kills: whole, on
// change, in order, and again with every Register), runs the master's
// run, kill and update (resize) commands on a TaskRunner (resizing through
// its optional TaskUpdater ability, and answering each update with a
// RESOURCES_UPDATED or RESOURCES_UPDATE_FAILED status), and
// delivers task status updates at least once: checkpointed before Update
// returns, one in flight per task — a task is a framework's task ID: two
// frameworks' tasks of one ID have queues of their own, and a launch of a
// task that ended drops that run's unacknowledged updates — resent with
// exponential backoff until
// the framework's acknowledgement comes back, identified by UUID so that
// the framework can drop duplicates. That queue is the outbox, a pure
// state machine (enqueue, due, ack, rewind) the Client persists and sends
// for.
//
// A broken link is reconnected within ReconnectMax of being back (a
// bounded, jittered backoff for the gRPC channel and the sessions), and
// keepalive pings find a link that silently drops every packet.
// ServerOptions are the master's side of that: its gRPC server must permit
// the pings. With several masters listed a registered session also
// watches who leads through another master (masteraddr.WatchLeader) and
// moves to a newly elected leader when the one in use stops answering as
// the leader — a frozen leader, which its keepalive would find 15 s
// later at the earliest.
//
// With Options.Principal and Secret every stream carries per-RPC
// credentials (masterlinkpb.BasicCredentials) for a master that authenticates agents;
// a first registration the master refuses ends Run with ErrRejected, a
// later one is retried after ReconnectMax.
//
// It never runs containers itself (the TaskRunner does) and never decides
// anything about allocation. The master side lives in package master
// (ServerOptions aside).
// Errors are wrapped with %w; its one sentinel is ErrRejected.
package masterlink
