// Package estimator owns the resource estimator contract: from the node's
// usage (monitor.Usage), the revocable resources the agent may offer now,
// with an Explanation of how the figure came about (shown by `brim agent
// explain` and the agent API).
//
// It owns: the Estimator contract, the Registry of factories
// (internal/registry's Registry[Estimator]), the
// built-ins (noop, fixed, usage, idle), the Forwarder that applies hysteresis to
// what the agent sends to the master, the Guard that offers nothing while
// QoS corrections are in force, the Fallback that turns a failing
// estimator into noop, the agent's loop (Run), and the out-of-process
// plugin's client and serve side (hashicorp/go-plugin over gRPC, run by
// internal/pluginhost, protocol in package pluginpb).
//
// It never kills, freezes or resizes anything, and never talks to the
// master: the agent forwards what the Forwarder lets through.
//
// Sentinels: ErrUnknown (no estimator registered under a name),
// ErrInvalidOption (a bad option value), ErrNotSupported. Plugin calls
// also return errors wrapping pluginhost.ErrUnavailable or
// pluginhost.ErrTimeout (internal/pluginhost).
//
// ErrNotSupported is an alias of internal/errdefs.ErrNotSupported,
// ErrInvalidOption of internal/registry.ErrInvalidOption (one sentinel for
// estimators and QoS controllers).
package estimator
