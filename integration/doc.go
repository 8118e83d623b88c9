// Package integration holds brim's end-to-end tests: they start real
// `brim agent` processes (the binary from $BRIM_BINARY, or built once by
// TestMain) with their own state dir, socket and cgroup parent, drive them
// through the real CLI and check the kernel objects (cgroup files, mounts,
// processes) directly. They need root and clean up everything they create,
// even when they fail.
package integration
