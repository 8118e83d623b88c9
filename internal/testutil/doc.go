// Package testutil holds helpers shared by brim's tests: the privileged-test
// gate (RequireRoot), and uniquely named kernel objects (cgroup parents,
// network namespaces) that are removed by t.Cleanup even when a test fails,
// and pseudo-terminals (OpenPTY) for commands that draw on a terminal.
//
// A privileged test never skips silently in CI: RequireRoot skips with a
// reason when not root on a developer machine and fails when CI=true.
package testutil
