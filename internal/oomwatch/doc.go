// Package oomwatch reports OOM events of a cgroup v1 memory group: the
// agent's cgroup isolator (isolator/cgroups.Isolator.OOMEvents) and the
// container shim (executor) both watch with it.
package oomwatch
