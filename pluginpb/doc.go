// Package pluginpb is the protocol between the brim agent and
// out-of-process resource estimators and QoS controllers.
//
// It owns: the generated gRPC code of plugin.proto (committed; `make
// generate` rebuilds it), the go-plugin handshake (Handshake), the
// conversion between monitor.Usage and its wire form, and the host-side
// Supervisor that starts a plugin process, bounds every call with a
// timeout, detects crashes and hangs and restarts the process with
// jittered exponential backoff (each delay less up to BackoffJitter of it).
//
// It never decides anything: the estimator and qos packages own the
// contracts, the Go serve side (estimator.Serve, qos.Serve) and the
// fallback policy. Plugins in other languages need only plugin.proto and
// the handshake described in docs/plugins.md.
//
// Sentinels: ErrUnavailable (the plugin is not running: it failed and is
// waiting for its restart backoff, or could not be started), ErrTimeout (a
// call exceeded its time limit; the process is killed and restarted).
package pluginpb
