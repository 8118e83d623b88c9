// Package atomicfile replaces files so that a reader never sees a mix of
// old and new content: brim's one writer of checkpoints, queues, records
// and bundle files.
//
// [WriteFile] is durable: once it returns nil the new content survives a
// crash of the machine (data written to a temporary file in the same
// directory, the file fsynced, renamed over the target, the directory
// fsynced). [WriteFileNoSync] skips both fsyncs: the rename still makes it
// atomic against a crash of the writing process, not of the machine; it is
// for files whose meaning ends with the machine's uptime (a running
// container's bundle), where an fsync would cost every launch milliseconds.
//
// On any error the target is unchanged and no temporary file is left. The
// package never logs; errors name the target file and wrap the cause, so
// errors.Is(err, fs.ErrPermission) or syscall.ENOSPC work on them.
package atomicfile
