// Package qos owns the QoS controller contract: from the node's usage
// (monitor.Usage), the corrections that protect non-revocable work from
// revocable (best-effort) work — THROTTLE / UNTHROTTLE a revocable
// container's cpu quota, FREEZE / THAW it, KILL it (reason
// CONTAINER_PREEMPTED). Every correction names the signal that triggered
// it.
//
// It owns: the Controller contract, the Registry of factories
// (internal/registry's Registry[Controller]), the
// built-ins (noop, load, interference), the Applier that applies
// corrections through an Actuator the agent provides and keeps the set of
// corrections in force (the estimator's Guard reads it: no new revocable
// offers while any is in force, a slow start's apart), the agent's loop (Run: every second, on
// every monitor notification, and soon again while a controller has a
// degradation to confirm — the optional Pender interface), and the
// out-of-process plugin's client and serve side (hashicorp/go-plugin over
// gRPC, run by internal/pluginhost, protocol in package pluginpb).
//
// The interference controller learns baselines from the victims' busy
// samples only (medians, a stable warm-up, or an absolute slo-p99),
// attributes a degradation to the revocable work competing for its
// resource, tests the cause with the suspects frozen before anything is
// killed, and re-admits with exponential back-off. Its graded response is
// a ladder of levels, one step function per level (ladder.go); its
// scenarios are scripts under testdata/interference.
//
// It never estimates revocable resources and never touches cgroups or
// processes itself: controllers compute, the Applier calls the Actuator.
//
// Sentinels: ErrUnknown (no controller registered under a name),
// ErrInvalidOption (a bad option value), ErrNotSupported. Plugin calls
// also return errors wrapping pluginhost.ErrUnavailable or
// pluginhost.ErrTimeout (internal/pluginhost).
//
// ErrNotSupported is an alias of internal/errdefs.ErrNotSupported,
// ErrInvalidOption of internal/registry.ErrInvalidOption (one sentinel for
// estimators and QoS controllers).
package qos
