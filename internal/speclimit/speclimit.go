package speclimit

import (
	"errors"
	"fmt"
)

// ErrTooLarge is wrapped by the errors of Check.
var ErrTooLarge = errors.New("spec too large")

// The bounds of a spec.
const (
	// MaxArgBytes bounds one command argument or environment string: the
	// kernel's MAX_ARG_STRLEN (32 pages, 131072 bytes) counts the
	// terminating NUL.
	MaxArgBytes = 128<<10 - 1
	// MaxExecBytes bounds the command and environment together, counted
	// as execve counts them against ARG_MAX: each string with its NUL
	// plus one 8-byte pointer. ARG_MAX is a quarter of the stack limit
	// (2 MiB with the usual 8 MiB); 1 MiB leaves room for the variables
	// the runtime adds and for a smaller stack limit.
	MaxExecBytes = 1 << 20
	// MaxLabels bounds the number of a container's labels, MaxLabelKeyBytes
	// and MaxLabelValueBytes each label's key and value, MaxLabelsBytes
	// all keys and values together.
	MaxLabels          = 64
	MaxLabelKeyBytes   = 256
	MaxLabelValueBytes = 4 << 10
	MaxLabelsBytes     = 64 << 10
	// ReservedLabels is how many labels the agent's task runner adds to a
	// task's own (brim.task, …); MaxTaskLabels, what a task may carry.
	ReservedLabels = 8
	MaxTaskLabels  = MaxLabels - ReservedLabels
)

// PageBytes is the byte budget of one page of a listing or a
// re-registration: a page holds items until the next would take it past
// PageBytes (and always at least one item). With a spec bounded by the
// limits above (about 1.1 MiB at most) every page stays below MaxMsgBytes.
const PageBytes = 1 << 20

// MaxMsgBytes is the largest gRPC message brim's services send or accept.
// It is gRPC's default receive limit, set explicitly so that the bound is
// stated where the services are built: specs and pages are bounded well
// below it (at most a spec plus PageBytes), so no message depends on the
// number of tasks or containers.
const MaxMsgBytes = 4 << 20

// pointerBytes is what each argument or environment string costs in
// execve's count besides its bytes (its pointer in argv or envp).
const pointerBytes = 8

// ExecBytes is the size command and env take in execve's count: each
// string with its NUL and its pointer.
func ExecBytes(command, env []string) int {
	n := 0
	for _, s := range command {
		n += len(s) + 1 + pointerBytes
	}
	for _, s := range env {
		n += len(s) + 1 + pointerBytes
	}
	return n
}

// Check reports whether a spec's command, environment and labels (at most
// maxLabels of them: MaxLabels for a container, MaxTaskLabels for a task)
// are within the bounds. Its errors wrap ErrTooLarge and name the
// offending item and the limit.
func Check(command, env []string, labels map[string]string, maxLabels int) error {
	for i, s := range command {
		if len(s) > MaxArgBytes {
			return fmt.Errorf("%w: command argument %d is %d bytes; the limit is %d bytes per argument (the kernel's MAX_ARG_STRLEN)",
				ErrTooLarge, i, len(s), MaxArgBytes)
		}
	}
	for _, s := range env {
		if len(s) > MaxArgBytes {
			return fmt.Errorf("%w: env %s is %d bytes; the limit is %d bytes per variable (the kernel's MAX_ARG_STRLEN)",
				ErrTooLarge, short(s), len(s), MaxArgBytes)
		}
	}
	if n := ExecBytes(command, env); n > MaxExecBytes {
		return fmt.Errorf("%w: command and env take %d bytes (%d strings with their NULs and 8-byte pointers); the limit is %d bytes",
			ErrTooLarge, n, len(command)+len(env), MaxExecBytes)
	}
	if len(labels) > maxLabels {
		return fmt.Errorf("%w: %d labels; the limit is %d", ErrTooLarge, len(labels), maxLabels)
	}
	total := 0
	for k, v := range labels {
		if len(k) > MaxLabelKeyBytes {
			return fmt.Errorf("%w: label key %s is %d bytes; the limit is %d bytes", ErrTooLarge, short(k), len(k), MaxLabelKeyBytes)
		}
		if len(v) > MaxLabelValueBytes {
			return fmt.Errorf("%w: label %s: value is %d bytes; the limit is %d bytes", ErrTooLarge, short(k), len(v), MaxLabelValueBytes)
		}
		total += len(k) + len(v)
	}
	if total > MaxLabelsBytes {
		return fmt.Errorf("%w: labels take %d bytes; the limit is %d bytes", ErrTooLarge, total, MaxLabelsBytes)
	}
	return nil
}

// short quotes s, cut to its first 32 bytes: an error names a huge string
// without repeating it.
func short(s string) string {
	if len(s) <= 32 {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q…", s[:32])
}

// PageLen returns how many of items, from the first, make one page: as
// many as fit in budget bytes by size, at most maxItems (0: no count
// limit), and at least one when there are items.
func PageLen[T any](items []T, size func(T) int, budget, maxItems int) int {
	n, total := 0, 0
	for _, it := range items {
		if maxItems > 0 && n == maxItems {
			break
		}
		s := size(it)
		if n > 0 && total+s > budget {
			break
		}
		n, total = n+1, total+s
	}
	return n
}

// Pages splits items into pages of PageLen (no count limit); none for no
// items.
func Pages[T any](items []T, size func(T) int, budget int) [][]T {
	var out [][]T
	for len(items) > 0 {
		n := PageLen(items, size, budget, 0)
		out = append(out, items[:n])
		items = items[n:]
	}
	return out
}
