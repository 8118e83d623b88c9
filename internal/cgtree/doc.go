// Package cgtree finds and removes a cgroup parent that a brim tool made
// (the chaos harness, `brim experiment`), in every hierarchy: the v1
// controllers under /sys/fs/cgroup/<controller>, the unified tree, or
// both on a hybrid host. It refuses any parent whose name does not say
// brim, so that a mistake cannot reach the machine's own cgroups.
package cgtree
