// Package pluginhost runs out-of-process plugins (estimators and QoS
// controllers) for the agent, and serves them on the plugin's side.
//
// It owns: the Supervisor, which starts a plugin process (hashicorp
// go-plugin over gRPC, protocol pluginpb) lazily, bounds every call with
// a timeout, detects crashes and hangs and restarts the process with
// jittered exponential backoff (each delay less up to BackoffJitter of
// it), routing the plugin's log lines into slog; and Serve, the plugin
// process's side of the same go-plugin definition.
//
// It never decides anything about what a plugin answers: the estimator
// and qos packages own the contracts, the conversion of answers and the
// fallback policy; pluginpb owns the protocol.
//
// Sentinels: ErrUnavailable (the plugin is not running: it failed and is
// waiting for its restart backoff, or could not be started), ErrTimeout (a
// call exceeded its time limit; the process is killed and restarted).
package pluginhost
