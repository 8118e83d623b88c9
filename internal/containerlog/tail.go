package containerlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// position is a place in a log: a file's sequence number and an offset in
// it.
type position struct {
	seq uint64
	off int64
}

// tailBlock is how much tailStart reads at once, from a file's end back.
const tailBlock = 64 << 10

// maxRecordLine bounds a record's line (its header and content): longer
// runs without a newline are no record of the writer's.
const maxRecordLine = MaxLine + 128

// tailStart returns where the last n records that pass start, reading the
// files from the newest back (each from its end), so that a tail costs
// what it returns, not the whole log. n = 0 is the end of the log: just
// after its last complete record. With fewer such records it returns the
// start of the oldest file. No file yet is the start of the first one.
func tailStart(dir string, n int, pass func(*Record) bool) (position, error) {
	seqs, err := files(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(seqs) == 0) {
		return position{seq: 1}, nil
	}
	if err != nil {
		return position{}, fmt.Errorf("read log dir: %w", err)
	}
	for i := len(seqs) - 1; i >= 0; i-- {
		off, left, err := tailFile(filepath.Join(dir, fileName(seqs[i])), n, pass)
		if errors.Is(err, os.ErrNotExist) {
			// Removed by rotation meanwhile: what is older is gone too.
			return position{seq: seqs[i] + 1}, nil
		}
		if err != nil {
			return position{}, err
		}
		if left == 0 {
			return position{seq: seqs[i], off: off}, nil
		}
		n = left
	}
	return position{seq: seqs[0]}, nil
}

// tailFile finds, in one file, the start of the last n records that pass
// (n = 0: the end of its last complete line). It returns that offset with
// left = 0, or, when the file holds fewer, left > 0: how many are still
// to be found in older files. A torn last line is not a record.
func tailFile(path string, n int, pass func(*Record) bool) (off int64, left int, err error) {
	f, err := openLog(path)
	if err != nil {
		return 0, n, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, n, fmt.Errorf("read log: %w", err)
	}
	t := tailer{f: f, pos: fi.Size(), end: -1, n: n, pass: pass}
	return t.run()
}

// tailer is tailFile's state: buf holds the file's bytes from pos up to
// the end of the last complete line not yet looked at (end, once a
// newline has been seen; -1 before).
type tailer struct {
	f    *os.File
	pos  int64
	end  int64
	buf  []byte
	n    int
	pass func(*Record) bool
}

func (t *tailer) run() (int64, int, error) {
	for {
		if t.end >= 0 {
			if t.n == 0 {
				return t.end, 0, nil
			}
			if off, done := t.lines(); done {
				return off, t.n, nil
			}
		}
		if t.pos == 0 {
			return 0, t.n, nil
		}
		if err := t.readBack(); err != nil {
			return 0, t.n, err
		}
		if t.end < 0 {
			if k := bytes.LastIndexByte(t.buf, '\n'); k >= 0 {
				t.end = t.pos + int64(k) + 1
				t.buf = t.buf[:k+1]
			} else if len(t.buf) > maxRecordLine {
				t.buf = t.buf[:0] // no record: a torn tail of junk
			}
		}
	}
}

// lines counts the complete lines at buf's end, newest first. It returns
// the start of the line that made n reach 0 (done), or done with offset 0
// when the file's first line has been counted without reaching it.
func (t *tailer) lines() (int64, bool) {
	for len(t.buf) > 0 {
		i := bytes.LastIndexByte(t.buf[:len(t.buf)-1], '\n')
		if i < 0 && t.pos > 0 {
			if len(t.buf) > maxRecordLine {
				// Not a record; cut it off and look for the line before.
				t.buf, t.end = t.buf[:0], -1
			}
			return 0, false // the line's start is further back
		}
		start := t.pos + int64(i+1)
		if rec, err := Parse(t.buf[i+1 : len(t.buf)-1]); err == nil && t.pass(&rec) {
			t.n--
			if t.n == 0 {
				return start, true
			}
		}
		t.buf = t.buf[:i+1]
	}
	return 0, t.pos == 0
}

// readBack prepends the block before pos to buf.
func (t *tailer) readBack() error {
	m := min(int64(tailBlock), t.pos)
	chunk := make([]byte, int(m), int(m)+len(t.buf))
	if _, err := t.f.ReadAt(chunk, t.pos-m); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read log: %w", err)
	}
	t.pos -= m
	t.buf = append(chunk, t.buf...)
	return nil
}
