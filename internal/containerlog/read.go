package containerlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// ReadOptions say how far Read goes.
type ReadOptions struct {
	// Follow keeps reading new records until Done is closed (then what
	// is on disk is read to its end) or ctx ends.
	Follow bool
	// Done is closed once nothing writes the log any more (the container
	// exited and its shim closed the log); nil: never.
	Done <-chan struct{}
	// Poll is how often a followed log is checked for new records;
	// default 100ms.
	Poll time.Duration
	// Caught is called, when not nil, each time Read has passed every
	// record on disk, before it waits for more: a caller that batches
	// records sends its batch there. Its error ends Read.
	Caught func() error

	// Which records are passed (the zero values pass every one).
	//
	// Stream passes one stream's records only; 0: both.
	Stream Stream
	// Since and Until pass records whose time is within [Since, Until];
	// a zero time does not bound. A followed log ends once the clock
	// is past Until and the records on disk are read.
	Since, Until time.Time
	// Tail > 0 starts at the last Tail records that pass the filters
	// above (fewer when the log holds fewer); 0 starts at the oldest.
	// A record is a line of output, or a piece of a line (P).
	Tail int
	// FromEnd starts after the last record on disk when Read is called
	// (with Follow: only what is written afterwards); Tail is then
	// ignored.
	FromEnd bool
}

// pass reports whether r is one of the records opts select.
func (opts *ReadOptions) pass(r *Record) bool {
	return (opts.Stream == 0 || r.Stream == opts.Stream) &&
		(opts.Since.IsZero() || !r.Time.Before(opts.Since)) &&
		(opts.Until.IsZero() || !r.Time.After(opts.Until))
}

// Read passes dir's records that opts select to emit, oldest first,
// across its files. A record is passed once its line is complete; a line
// a failed write left torn is skipped. A file removed by rotation while
// Read is behind is skipped (its records are gone). Content is valid only
// during emit. No log dir yet is an empty log. Read returns emit's error,
// ctx's, or a read error.
func Read(ctx context.Context, dir string, opts ReadOptions, emit func(Record) error) error {
	if opts.Poll <= 0 {
		opts.Poll = 100 * time.Millisecond
	}
	r := &reader{dir: dir, buf: make([]byte, 0, readChunk+MaxLine)}
	r.emit = func(rec Record) error {
		if !opts.pass(&rec) {
			return nil
		}
		return emit(rec)
	}
	defer r.close()
	if opts.FromEnd || opts.Tail > 0 {
		n := opts.Tail
		if opts.FromEnd {
			n = 0
		}
		at, err := tailStart(dir, n, opts.pass)
		if err != nil {
			return err
		}
		r.seq, r.start = at.seq-1, at
	}
	var t *time.Ticker
	for {
		// done is looked at before reading: what is on disk when it is
		// closed is read to its end.
		done := isClosed(opts.Done)
		if err := r.drain(); err != nil {
			return err
		}
		if opts.Caught != nil {
			if err := opts.Caught(); err != nil {
				return err
			}
		}
		if !opts.Follow || done || (!opts.Until.IsZero() && time.Now().After(opts.Until)) {
			return nil
		}
		if t == nil {
			t = time.NewTicker(opts.Poll)
			defer t.Stop()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-opts.Done:
		case <-t.C:
		}
	}
}

func isClosed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// reader is Read's position: the open file, the unread tail of a line.
type reader struct {
	dir  string
	emit func(Record) error
	f    *os.File
	seq  uint64 // f's number; 0 before the first file
	off  int64  // bytes read from f
	buf  []byte // bytes read from f, not yet a complete line
	// start is where the first file is read from (Tail, FromEnd);
	// zero: the oldest file's start.
	start position
}

func (r *reader) close() {
	if r.f != nil {
		r.f.Close()
	}
}

// drain reads every complete record on disk: the current file to its end,
// then each newer file.
func (r *reader) drain() error {
	for {
		if r.f != nil {
			if err := r.readFile(); err != nil {
				return err
			}
		}
		next, ok, err := r.next()
		if err != nil || !ok {
			return err
		}
		if r.f != nil {
			// A newer file exists, so this one is complete: read what
			// came between the read above and the rotation.
			if err := r.readFile(); err != nil {
				return err
			}
			r.f.Close()
			r.f, r.buf = nil, r.buf[:0] // a torn last line stays torn
		}
		f, err := openLog(filepath.Join(r.dir, fileName(next)))
		if errors.Is(err, os.ErrNotExist) {
			r.seq = next // removed by rotation meanwhile: go on to a newer
			continue
		}
		if err != nil {
			return err
		}
		r.f, r.seq, r.off = f, next, 0
		if next == r.start.seq && r.start.off > 0 {
			if _, err := f.Seek(r.start.off, io.SeekStart); err != nil {
				return fmt.Errorf("read log: %w", err)
			}
			r.off = r.start.off
		}
	}
}

// next is the oldest file newer than the current one.
func (r *reader) next() (uint64, bool, error) {
	seqs, err := files(r.dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read log dir: %w", err)
	}
	for _, s := range seqs {
		if s > r.seq {
			return s, true, nil
		}
	}
	return 0, false, nil
}

// readFile reads the current file to its end, emitting complete records.
// A file shorter than what was read had a torn record cut off by the
// writer: the unfinished line read from it is dropped.
func (r *reader) readFile() error {
	if fi, err := r.f.Stat(); err == nil && fi.Size() < r.off {
		if _, err := r.f.Seek(fi.Size(), io.SeekStart); err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		r.off, r.buf = fi.Size(), r.buf[:0]
	}
	for {
		if len(r.buf) == cap(r.buf) {
			r.buf = r.buf[:0] // no newline in a full buffer: no record of ours
		}
		n, err := r.f.Read(r.buf[len(r.buf):cap(r.buf)])
		r.buf = r.buf[:len(r.buf)+n]
		r.off += int64(n)
		if perr := r.parse(); perr != nil {
			return perr
		}
		if err == io.EOF || (err == nil && n == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read log: %w", err)
		}
	}
}

// parse emits the complete lines at the start of buf and keeps the rest.
func (r *reader) parse() error {
	start := 0
	for {
		i := bytes.IndexByte(r.buf[start:], '\n')
		if i < 0 {
			break
		}
		line := r.buf[start : start+i]
		start += i + 1
		rec, err := Parse(line)
		if err != nil {
			continue // not a record: skipped
		}
		if err := r.emit(rec); err != nil {
			return err
		}
	}
	r.buf = r.buf[:copy(r.buf, r.buf[start:])]
	return nil
}

// openLog opens a log file for reading, never through a symlink.
func openLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|noFollow, 0)
}
