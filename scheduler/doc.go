// Package scheduler is the Go SDK for brim frameworks: Driver subscribes to
// the master (re-subscribing with the same framework ID after a break, so
// the framework keeps its tasks within its failover timeout, with jittered
// backoff from 200 ms to 2 s; Callbacks.Disconnected hears why each
// attempt failed, e.g. the dial error of a master that is not there), delivers
// offers, rescinds and task status updates to Callbacks, drops duplicate
// updates (by UUID) and acknowledges every update that carries one after
// its callback returns. Calls: Accept, Launch, Decline, Revive, Suppress,
// Kill, Reconcile, UpdateTask (resize a running task). With
// Options.Principal and Secret every call carries per-RPC credentials (gRPC
// metadata "authorization: Basic base64(principal:secret)") for a master
// with a credentials file; Run
// gives up at once when the master answers codes.Unauthenticated or
// codes.PermissionDenied (bad credentials, or an ACL refusing the
// principal a role).
//
// A task (masterlinkpb.TaskInfo) names its user (User: a user of the
// agent's host; empty: the agent's default) and whether it runs in a user
// namespace (Userns). A root User outside a user namespace needs the
// master's run_as_root ACL for the principal and the role of the task's
// resources: without it Accept still succeeds and the task alone gets a
// TASK_ERROR update with reason TASK_UNAUTHORIZED (docs/security.md).
//
// It owns no resources and never talks to agents. Errors from calls are the
// master's gRPC status errors (codes.InvalidArgument for a bad operation,
// codes.FailedPrecondition for a stale offer, codes.NotFound for an unknown
// framework); ErrNotSubscribed before the first subscription. InDoubt
// tells the errors of calls that may have been carried out all the same
// (the connection broke after the call was sent): an Accept that failed
// so may have launched its tasks, which a framework reconciles rather
// than launches again.
//
// The connection pings the master (gRPC keepalive, masterlink's
// defaults) and, with several masters listed, a driver watches who leads
// through another master from its subscription call on
// (masteraddr.WatchLeader): it
// leaves a leader that stops answering as the leader (frozen, cut off)
// for the newly elected one within about a second of the election.
//
// Subpackage runner is the framework behind `brim run`.
package scheduler
