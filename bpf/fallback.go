package bpf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Fallback gives CgroupStats without BPF: run-queue wait sums and counts
// from /proc/<tid>/schedstat of every thread in the cgroup, on-CPU time from
// cpuacct.usage (v1) or cpu.stat (v2). It has no histogram and no wakeup
// count. Its cost grows with the number of threads tracked (three file reads
// per thread per Read).
//
// Threads are followed across Reads so the sums stay cumulative when threads
// exit: a thread seen for the first time contributes its whole history, which
// is right for containers (their threads are born in their cgroup).
//
// A Fallback is safe for concurrent use; the caller closes it.
type Fallback struct {
	mu       sync.Mutex
	layout   layout
	procRoot string
	cgroups  map[uint64]*fallbackCgroup
	closed   bool
	buf      []byte
}

type fallbackCgroup struct {
	path    string
	threads map[int]schedstat
	acc     CgroupStats
}

// schedstat is one line of /proc/<tid>/schedstat.
type schedstat struct {
	onCPU, runDelay, slices uint64
}

// NewFallback returns a Fallback for the cgroup hierarchies mounted at root
// ("" for /sys/fs/cgroup).
func NewFallback(root string) (*Fallback, error) {
	l, err := detectLayout(root)
	if err != nil {
		return nil, fmt.Errorf("new fallback: %w", err)
	}
	return newFallback(l, "/proc"), nil
}

func newFallback(l layout, procRoot string) *Fallback {
	return &Fallback{layout: l, procRoot: procRoot, cgroups: make(map[uint64]*fallbackCgroup)}
}

// Source returns SourceSchedstat.
func (f *Fallback) Source() string { return SourceSchedstat }

// Track starts following the cgroup path (absolute, relative to the
// hierarchy roots, e.g. "/brim/c1") and returns its id, the same id Monitor
// uses. Tracking a tracked cgroup again is a no-op.
func (f *Fallback) Track(path string) (uint64, error) {
	dir, err := f.layout.dir("cpu", path)
	if err != nil {
		return 0, fmt.Errorf("track: %w", err)
	}
	id, err := CgroupID(dir)
	if err != nil {
		return 0, fmt.Errorf("track: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	if _, ok := f.cgroups[id]; !ok {
		f.cgroups[id] = &fallbackCgroup{path: path, threads: make(map[int]schedstat)}
	}
	return id, nil
}

// Untrack stops following cgroup id. It returns ErrNotTracked for an
// unknown id.
func (f *Fallback) Untrack(id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.cgroups[id]; !ok {
		return fmt.Errorf("untrack %d: %w", id, ErrNotTracked)
	}
	delete(f.cgroups, id)
	return nil
}

// Read replaces the contents of dst with the cumulative statistics of every
// tracked cgroup. A cgroup whose directory is gone is skipped (its entry is
// absent) and stays tracked until Untrack.
func (f *Fallback) Read(dst map[uint64]CgroupStats) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	clear(dst)
	for id, cg := range f.cgroups {
		ok, err := f.update(cg)
		if err != nil {
			return fmt.Errorf("read cgroup %s: %w", cg.path, err)
		}
		if ok {
			dst[id] = cg.acc
		}
	}
	return nil
}

// update refreshes cg.acc; false if the cgroup is gone.
func (f *Fallback) update(cg *fallbackCgroup) (bool, error) {
	threadsFile := "tasks"
	if f.layout.unified {
		threadsFile = "cgroup.threads"
	}
	dir, err := f.layout.dir("cpu", cg.path)
	if err != nil {
		return false, err
	}
	tids, err := f.readIDs(filepath.Join(dir, threadsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	seen := make(map[int]schedstat, len(tids))
	for _, tid := range tids {
		s, err := f.readSchedstat(tid)
		if err != nil {
			continue // exited since the listing
		}
		old := cg.threads[tid]
		if s.runDelay >= old.runDelay && s.slices >= old.slices {
			cg.acc.RunDelay += time.Duration(s.runDelay - old.runDelay)
			cg.acc.Waits += s.slices - old.slices
			cg.acc.Switches += s.slices - old.slices
		}
		seen[tid] = s
	}
	cg.threads = seen
	usage, err := f.readUsage(cg.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	cg.acc.OnCPU = usage
	return true, nil
}

func (f *Fallback) readFile(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	f.buf = f.buf[:0]
	for {
		if len(f.buf) == cap(f.buf) {
			f.buf = append(f.buf, 0)[:len(f.buf)]
		}
		n, err := fh.Read(f.buf[len(f.buf):cap(f.buf)])
		f.buf = f.buf[:len(f.buf)+n]
		if err == io.EOF {
			return f.buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (f *Fallback) readIDs(path string) ([]int, error) {
	b, err := f.readFile(path)
	if err != nil {
		return nil, err
	}
	return parseIDs(bytes.NewReader(b))
}

func (f *Fallback) readSchedstat(tid int) (schedstat, error) {
	b, err := f.readFile(filepath.Join(f.procRoot, strconv.Itoa(tid), "schedstat"))
	if err != nil {
		return schedstat{}, err
	}
	return parseSchedstat(b)
}

func (f *Fallback) readUsage(path string) (time.Duration, error) {
	if f.layout.unified {
		dir, err := f.layout.dir("", path)
		if err != nil {
			return 0, err
		}
		b, err := f.readFile(filepath.Join(dir, "cpu.stat"))
		if err != nil {
			return 0, err
		}
		usec, err := parseKeyed(b, "usage_usec")
		return time.Duration(usec) * time.Microsecond, err
	}
	dir, err := f.layout.dir("cpuacct", path)
	if err != nil {
		return 0, err
	}
	b, err := f.readFile(filepath.Join(dir, "cpuacct.usage"))
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse cpuacct.usage: %w", err)
	}
	return time.Duration(ns), nil
}

// Close releases f; later calls return ErrClosed.
func (f *Fallback) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.cgroups = nil
	return nil
}

// parseIDs parses a cgroup.procs / tasks / cgroup.threads listing.
func parseIDs(r io.Reader) ([]int, error) {
	var ids []int
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		id, err := strconv.Atoi(string(line))
		if err != nil {
			return nil, fmt.Errorf("parse id %q: %w", line, err)
		}
		ids = append(ids, id)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read ids: %w", err)
	}
	return ids, nil
}

// parseSchedstat parses /proc/<tid>/schedstat: on-CPU ns, run-queue wait ns,
// timeslices run.
func parseSchedstat(b []byte) (schedstat, error) {
	var v [3]uint64
	fields := bytes.Fields(b)
	if len(fields) != 3 {
		return schedstat{}, fmt.Errorf("parse schedstat %q: want 3 fields", b)
	}
	for i, fld := range fields {
		n, err := strconv.ParseUint(string(fld), 10, 64)
		if err != nil {
			return schedstat{}, fmt.Errorf("parse schedstat %q: %w", b, err)
		}
		v[i] = n
	}
	return schedstat{onCPU: v[0], runDelay: v[1], slices: v[2]}, nil
}

// parseKeyed returns the value of key in a flat keyed file (cpu.stat).
func parseKeyed(b []byte, key string) (uint64, error) {
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(" "))
		if ok && string(k) == key {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse %s: %w", key, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("parse %s: key not found", key)
}
