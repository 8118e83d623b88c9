//go:build !unix

package containerlog

// noFollow: no such flag here; the log directory is the writer's alone.
const noFollow = 0
