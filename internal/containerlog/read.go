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
}

// Read passes dir's records to emit, oldest first, across its files.
// A record is passed once its line is complete; a line a failed write
// left torn is skipped. A file removed by rotation while Read is behind
// is skipped (its records are gone). Content is valid only during emit.
// No log dir yet is an empty log. Read returns emit's error, ctx's, or
// a read error.
func Read(ctx context.Context, dir string, opts ReadOptions, emit func(Record) error) error {
	if opts.Poll <= 0 {
		opts.Poll = 100 * time.Millisecond
	}
	r := &reader{dir: dir, emit: emit, buf: make([]byte, 0, readChunk+MaxLine)}
	defer r.close()
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
		if !opts.Follow || done {
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
