package containerlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Limits bound a container's log on disk and the work of writing it.
type Limits struct {
	// MaxSize is the size of a file at most, in bytes (at least
	// MinMaxSize): the log takes MaxSize × MaxFiles at most.
	MaxSize int64 `json:"max_size"`
	// MaxFiles is how many files are kept (at least 1): the newest is
	// written, the oldest removed when a new one starts.
	MaxFiles int `json:"max_files"`
	// Rate bounds what the writer writes, in bytes per second of
	// formatted records (0: no bound); beyond it Copy stops reading, so
	// that the container blocks on its full pipe rather than its shim
	// spending CPU without end on a flood.
	Rate int64 `json:"rate,omitempty"`
}

// Bounds of Limits.
const (
	// MinMaxSize leaves room for a few records of the longest line.
	MinMaxSize = 64 << 10
	// MaxMaxFiles is far beyond any sensible rotation.
	MaxMaxFiles = 1000
)

// Defaults: the kubelet's containerLogMaxSize and containerLogMaxFiles,
// and a rate a logging application does not reach while a flood is
// bounded to a few per cent of a CPU (docs/benchmarks.md).
const (
	DefaultMaxSize  = 10 << 20
	DefaultMaxFiles = 5
	DefaultRate     = 8 << 20
)

// Validate says which limit is out of bounds.
func (l Limits) Validate() error {
	switch {
	case l.MaxSize < MinMaxSize:
		return fmt.Errorf("log max size %d: want at least %d bytes (64KiB)", l.MaxSize, MinMaxSize)
	case l.MaxFiles < 1 || l.MaxFiles > MaxMaxFiles:
		return fmt.Errorf("log max files %d: want 1 to %d", l.MaxFiles, MaxMaxFiles)
	case l.Rate < 0:
		return fmt.Errorf("log rate %d: must not be negative", l.Rate)
	}
	return nil
}

// fileName is a log file's name by its sequence number.
func fileName(seq uint64) string { return fmt.Sprintf("%010d.log", seq) }

// files returns the sequence numbers of dir's log files, oldest first.
func files(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if n, err := strconv.ParseUint(name, 10, 64); err == nil {
			seqs = append(seqs, n)
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs, nil
}

// flushAt is the batch size the writer writes at once.
const flushAt = 128 << 10

// Writer writes records into dir's rotated files. It is safe for
// concurrent use (the shim's stdout and stderr copiers share one); the
// caller closes it.
type Writer struct {
	dir  string
	lim  Limits
	rate *bucket // nil: no bound

	mu    sync.Mutex
	seq   uint64   // the newest file's number
	f     *os.File // nil after a failed open or write: a new file next
	size  int64    // f's size
	buf   []byte   // records not written yet
	hdr   []byte
	stats Stats
}

// Stats count a writer's work.
type Stats struct {
	// In is the output it was given, Out the bytes of records it made of
	// it, Dropped those lost to failed writes.
	In, Out, Dropped int64
	// Err is the last write's error, nil once one succeeded again.
	Err error
}

// Create makes dir (0700) if needed and returns a Writer that starts a
// new file after the newest one there (a restarted writer never appends
// to a file another may have left with a torn record).
func Create(dir string, lim Limits) (*Writer, error) {
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	seqs, err := files(dir)
	if err != nil {
		return nil, fmt.Errorf("read log dir: %w", err)
	}
	w := &Writer{dir: dir, lim: lim, buf: make([]byte, 0, flushAt+MaxLine+64)}
	if len(seqs) > 0 {
		w.seq = seqs[len(seqs)-1]
	}
	if lim.Rate > 0 {
		w.rate = newBucket(lim.Rate)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.rotateLocked(); err != nil {
		return nil, err
	}
	return w, nil
}

// Write appends p, read from stream s at t, as records (see the package
// doc) and returns the bytes it formatted. A failed write does not fail
// it: the records are dropped (Dropped counts them) and the next write
// starts a new file.
func (w *Writer) Write(s Stream, t time.Time, p []byte) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.In += int64(len(p))
	w.hdr = appendHeader(w.hdr[:0], t, s)
	n := 0
	for len(p) > 0 {
		line, rest, full := bytes.Cut(p, []byte{'\n'})
		p = rest
		for len(line) > MaxLine {
			n += w.addLocked('P', line[:MaxLine])
			line = line[MaxLine:]
		}
		tag := byte('F')
		if !full {
			tag = 'P' // continued by the stream's next read
		}
		n += w.addLocked(tag, line)
	}
	w.flushLocked()
	w.stats.Out += int64(n)
	return n
}

// addLocked appends one record, first starting a new file when it would
// not fit in the current one.
func (w *Writer) addLocked(tag byte, content []byte) int {
	n := len(w.hdr) + 2 + len(content) + 1
	if pending := w.size + int64(len(w.buf)); pending > 0 && pending+int64(n) > w.lim.MaxSize {
		w.flushLocked()
		if err := w.rotateLocked(); err != nil {
			w.noteLocked(err)
		}
	}
	w.buf = append(w.buf, w.hdr...)
	w.buf = append(w.buf, tag, ' ')
	w.buf = append(w.buf, content...)
	w.buf = append(w.buf, '\n')
	if len(w.buf) >= flushAt {
		w.flushLocked()
	}
	return n
}

// flushLocked writes the buffered records.
func (w *Writer) flushLocked() {
	if len(w.buf) == 0 {
		return
	}
	if w.f == nil {
		if err := w.rotateLocked(); err != nil {
			w.dropLocked(err)
			return
		}
	}
	n, err := w.f.Write(w.buf)
	if err != nil {
		// Cut a torn record off (a full disk); a file that cannot be
		// cut is never appended to again.
		if n > 0 && w.f.Truncate(w.size) != nil {
			w.f.Close()
			w.f = nil
		}
		w.dropLocked(err)
		return
	}
	w.size += int64(n)
	w.buf = w.buf[:0]
	w.noteLocked(nil)
}

func (w *Writer) dropLocked(err error) {
	w.stats.Dropped += int64(len(w.buf))
	w.buf = w.buf[:0]
	w.noteLocked(err)
}

func (w *Writer) noteLocked(err error) { w.stats.Err = err }

// rotateLocked closes the current file, removes the oldest so that the
// new one makes MaxFiles, and starts the next.
func (w *Writer) rotateLocked() error {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	w.seq++
	w.size = 0
	seqs, err := files(w.dir)
	if err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	var errs []error
	for len(seqs) >= w.lim.MaxFiles {
		if err := os.Remove(filepath.Join(w.dir, fileName(seqs[0]))); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		seqs = seqs[1:]
	}
	f, err := os.OpenFile(filepath.Join(w.dir, fileName(w.seq)), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		errs = append(errs, err)
		return fmt.Errorf("rotate log: %w", errors.Join(errs...))
	}
	w.f = f
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	return nil
}

// Stats returns what the writer did so far.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Close writes what is buffered and closes the current file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushLocked()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// readChunk is how much Copy reads at once: a pipe's default capacity.
const readChunk = 64 << 10

// Copy writes what r yields as stream s's records until r ends (nil at
// EOF) or fails, keeping to the writer's rate: it does not read again
// until the bytes it wrote are within the rate. It holds one buffer of
// readChunk bytes.
func (w *Writer) Copy(s Stream, r io.Reader) error {
	buf := make([]byte, readChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			written := w.Write(s, time.Now(), buf[:n])
			if w.rate != nil {
				w.rate.take(written)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// bucket is a token bucket of bytes per second, one second deep.
type bucket struct {
	mu     sync.Mutex
	rate   float64
	tokens float64
	last   time.Time
	sleep  func(time.Duration) // time.Sleep; tests replace it
	now    func() time.Time
}

func newBucket(rate int64) *bucket {
	return &bucket{rate: float64(rate), tokens: float64(rate), last: time.Now(), sleep: time.Sleep, now: time.Now}
}

// take charges n bytes and sleeps while the bucket is in debt.
func (b *bucket) take(n int) {
	b.mu.Lock()
	now := b.now()
	b.tokens = min(b.rate, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= float64(n)
	var wait time.Duration
	if b.tokens < 0 {
		wait = time.Duration(-b.tokens / b.rate * float64(time.Second))
	}
	b.mu.Unlock()
	if wait > 0 {
		b.sleep(wait)
	}
}
