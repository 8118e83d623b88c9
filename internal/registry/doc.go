// Package registry holds what the estimator and qos packages share: the
// named set of plugin factories their registries are built on (one
// registry value per kind, built in cmd; no package-level state), the
// parsing of "k=v" option flags, and of "plugin:/path" specs with the
// options every out-of-process plugin takes (ParsePlugin). Errors wrap the
// sentinel the caller passes (its ErrInvalidOption).
package registry
