// Package containerlog is a container's output on disk: the format, the
// rotating Writer the shim copies the container's stdout and stderr into,
// and Read, which the agent serves `brim container logs` from.
//
// # Format
//
// A container's log is a directory of files named by a sequence number
// (0000000001.log, 0000000002.log, …; only the newest is written, the
// oldest are removed so that at most Limits.MaxFiles remain, each at most
// Limits.MaxSize bytes). Each line of a file is one record, the CRI log
// format of containerd and the kubelet:
//
//	2026-11-29T07:58:21.176543210Z stdout F hello, world
//	<RFC 3339 UTC time, 9 digits>  <stdout|stderr> <P|F> <content>
//
// The time is when the shim read the content from the container's pipe
// (every record of one read has the same time); F ends a line of the
// container's output (its newline is not in the content), P is part of a
// line continued by the stream's next record: content read without a
// newline yet, or a line longer than MaxLine cut into pieces. Joining a
// stream's P records to its next F record and adding a newline gives the
// container's output back byte for byte; stdout and stderr stay apart
// (the stream field) and in the order they were read. A record never
// spans two files. A line a failed write left without its newline (a full
// disk) is skipped by Read; the Writer starts a new file after one.
//
// The package imports only the standard library, never logs and has no
// sentinels: errors wrap the os errors (fs.ErrNotExist, ENOSPC).
package containerlog
