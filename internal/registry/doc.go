// Package registry holds Registry, the named set of plugin factories that
// the estimator and qos packages build their registries on (one registry
// value per kind, built in cmd; no package-level state).
package registry
