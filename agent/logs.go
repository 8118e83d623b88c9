package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/brimnode/brim/internal/containerlog"
)

// Log streams, as Logs passes them (internal/containerlog's numbers).
const (
	Stdout = int(containerlog.Stdout)
	Stderr = int(containerlog.Stderr)
)

// logPoll is how often a followed log is checked for new output.
const logPoll = 100 * time.Millisecond

// logChunk is how much output Logs passes to emit at once at most.
const logChunk = 32 << 10

// LogsOptions say which of a container's output Logs sends (the zero
// value: all of it, once).
type LogsOptions struct {
	// Follow keeps sending until the container has exited and its output
	// is drained (or ctx ends).
	Follow bool
	// Stream is Stdout or Stderr alone; 0: both.
	Stream int
	// Since and Until bound the records' times (when the shim read the
	// output); zero: unbounded. A followed log ends once Until has passed.
	Since, Until time.Time
	// Tail > 0 sends only the last Tail records (lines, or pieces of
	// lines longer than containerlog.MaxLine) of those selected; with
	// FromEnd only what is written after the call.
	Tail    int
	FromEnd bool
	// Timestamps puts each line's time (RFC 3339, UTC, 9 digits) and a
	// space before it.
	Timestamps bool
}

// validate names the option that is out of range; errors wrap
// ErrInvalidArgument.
func (o LogsOptions) validate() error {
	switch {
	case o.Stream != 0 && o.Stream != Stdout && o.Stream != Stderr:
		return fmt.Errorf("%w: log stream %d: want stdout or stderr", ErrInvalidArgument, o.Stream)
	case o.Tail < 0:
		return fmt.Errorf("%w: tail %d: must not be negative", ErrInvalidArgument, o.Tail)
	case !o.Since.IsZero() && !o.Until.IsZero() && o.Until.Before(o.Since):
		return fmt.Errorf("%w: until %s is before since %s", ErrInvalidArgument, o.Until.Format(time.RFC3339Nano), o.Since.Format(time.RFC3339Nano))
	}
	return nil
}

// filtered reports whether any option but Follow is set.
func (o LogsOptions) filtered() bool {
	return o.Stream != 0 || !o.Since.IsZero() || !o.Until.IsZero() || o.Tail != 0 || o.FromEnd || o.Timestamps
}

// Logs sends the container's output that opts select to emit, in chunks
// of one stream each, in the order the container wrote it (across the
// log's rotated files). Errors wrap ErrNotFound, or ErrInvalidArgument
// for bad options (or options on a container whose output predates the
// log directory).
func (a *Agent) Logs(ctx context.Context, ref string, opts LogsOptions, emit func(stream int, data []byte) error) error {
	if err := opts.validate(); err != nil {
		return fmt.Errorf("logs %s: %w", ref, err)
	}
	follow := opts.Follow
	a.mu.Lock()
	c, err := a.resolveLocked(ref)
	if err != nil {
		a.mu.Unlock()
		return err
	}
	id, sandbox, logDir, done := c.ID, c.SandboxDir, c.LogDir, a.done[c.ID]
	a.mu.Unlock()
	// Done for the reader: the container has exited, or the agent is
	// shutting down (the reader drains what is there and stops). The
	// watcher ends with the call.
	stop, quit := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-done:
		case <-a.ctx.Done():
		case <-quit:
		}
		close(stop)
	}()
	defer func() { close(quit); wg.Wait() }()
	if logDir != "" {
		if _, err := os.Stat(logDir); err == nil {
			err = a.readLog(ctx, logDir, opts, stop, emit)
			if err == nil && follow && a.ctx.Err() != nil && !isClosed(done) {
				return fmt.Errorf("logs %s: agent is shutting down", id)
			}
			if err != nil && !errors.Is(err, errEmit) {
				return fmt.Errorf("logs %s: %w", id, err)
			}
			return unwrapEmit(err)
		}
	}
	if sandbox == "" {
		return fmt.Errorf("logs %s: no sandbox", id)
	}
	if opts.filtered() {
		return fmt.Errorf("logs %s: %w: the container's output predates its log directory: no --tail, --since, --until, --stream or --timestamps", id, ErrInvalidArgument)
	}
	return a.legacyLogs(ctx, id, sandbox, follow, done, emit)
}

// stampLayout is the time Timestamps puts before a line: RFC 3339 in UTC
// with 9 fractional digits (fixed width, as docker's).
const stampLayout = "2006-01-02T15:04:05.000000000Z07:00"

// errEmit marks an error of emit, passed on as it is.
var errEmit = errors.New("emit")

type emitError struct{ err error }

func (e emitError) Error() string        { return e.err.Error() }
func (e emitError) Is(target error) bool { return target == errEmit }

func unwrapEmit(err error) error {
	var e emitError
	if errors.As(err, &e) {
		return e.err
	}
	return err
}

// readLog sends dir's records to emit, consecutive records of a stream
// joined into one chunk of at most logChunk bytes.
func (a *Agent) readLog(ctx context.Context, dir string, o LogsOptions, done <-chan struct{}, emit func(int, []byte) error) error {
	var (
		chunk  []byte
		stream int
		midway [3]bool // a stream's last record was partial: no timestamp before its next
	)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		err := emit(stream, chunk)
		chunk = chunk[:0]
		if err != nil {
			return emitError{err}
		}
		return nil
	}
	opts := containerlog.ReadOptions{
		Follow: o.Follow, Done: done, Poll: logPoll, Caught: flush,
		Stream: containerlog.Stream(o.Stream), Since: o.Since, Until: o.Until, Tail: o.Tail, FromEnd: o.FromEnd,
	}
	err := containerlog.Read(ctx, dir, opts, func(r containerlog.Record) error {
		s := int(r.Stream)
		if s != stream || len(chunk)+len(r.Content)+len(stampLayout)+2 > logChunk {
			if err := flush(); err != nil {
				return err
			}
			stream = s
		}
		if o.Timestamps && !midway[s] {
			chunk = r.Time.UTC().AppendFormat(chunk, stampLayout)
			chunk = append(chunk, ' ')
		}
		midway[s] = r.Partial
		chunk = append(chunk, r.Output()...)
		return nil
	})
	if ferr := flush(); err == nil {
		err = ferr
	}
	return err
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// legacyLogs serves a container launched before the log directory: its
// stdout and stderr files in the sandbox, one after the other.
func (a *Agent) legacyLogs(ctx context.Context, id, dir string, follow bool, done <-chan struct{}, emit func(int, []byte) error) error {
	files := [2]*os.File{}
	for i, name := range []string{"stdout", "stderr"} {
		f, err := openLog(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("logs %s: %w", id, err)
		}
		if f != nil {
			defer f.Close()
		}
		files[i] = f
	}
	buf := make([]byte, logChunk)
	drain := func() error {
		for i, f := range files {
			if f == nil {
				continue
			}
			for {
				n, err := f.Read(buf)
				if n > 0 {
					if err := emit(i+1, buf[:n]); err != nil {
						return err
					}
				}
				if err == io.EOF || n == 0 {
					break
				}
				if err != nil {
					return fmt.Errorf("logs %s: %w", id, err)
				}
			}
		}
		return nil
	}
	if !follow {
		return drain()
	}
	t := time.NewTicker(logPoll)
	defer t.Stop()
	for {
		if err := drain(); err != nil {
			return err
		}
		select {
		case <-done:
			return drain()
		case <-ctx.Done():
			return ctx.Err()
		case <-a.ctx.Done():
			return fmt.Errorf("logs %s: agent is shutting down", id)
		case <-t.C:
		}
	}
}

// openLog opens a container's stdout or stderr of the sandbox. The sandbox
// belongs to the task's user, who may have replaced the file: a symlink
// (to a host file the agent could read as root) is refused, and so is
// anything but a regular file (a FIFO would block the agent).
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|logOpenFlags, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open %s: not a regular file", filepath.Base(path))
	}
	return f, nil
}
