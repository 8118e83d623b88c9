// Package registry is the one plugin registry of brim: Registry[T], the
// named factories of one kind of plugin (T is the kind's contract,
// estimator.Estimator or qos.Controller; one registry value per kind,
// built in cmd, no package-level state), building a plugin by name with
// a logger named after it (New) or from a --estimator/--qos spec that may
// name an out-of-process plugin (Open, ParsePlugin); and Options, the
// "k=v" configuration every plugin takes, with typed getters.
//
// It never runs a plugin process (internal/pluginhost does) and names no
// concrete plugin.
//
// Sentinels: ErrInvalidOption (an option that does not parse or is out
// of range; estimator and qos alias it). A name nothing is registered
// under wraps the kind's own sentinel (Kind.Unknown).
package registry
