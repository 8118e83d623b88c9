package monitor

import (
	"sync"
	"unsafe"
)

// SampleSize is the in-memory size of one sample slot in a Ring, bytes
// (the Statistics struct itself; a sample with network traffic classes or
// latency summaries owns a few hundred bytes more on the heap). A ring of
// the default 300 slots (5 minutes at 1 s) costs about 300 × SampleSize
// per container: 496 B × 300 ≈ 145 KiB on amd64, ≈ 14.5 MiB for 100
// containers.
const SampleSize = int(unsafe.Sizeof(Statistics{}))

// Ring is a bounded history of samples: when full, a push overwrites the
// oldest. It is safe for concurrent use: one writer (the monitor) and any
// number of readers.
type Ring struct {
	mu   sync.RWMutex
	buf  []Statistics
	next int // slot of the next push
	n    int // samples held
}

// NewRing returns a ring that holds up to capacity samples (at least 1).
func NewRing(capacity int) *Ring {
	if capacity < 1 {
		capacity = 1
	}
	return &Ring{buf: make([]Statistics, capacity)}
}

// Push appends s, overwriting the oldest sample when the ring is full.
func (r *Ring) Push(s Statistics) {
	r.mu.Lock()
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	if r.n < len(r.buf) {
		r.n++
	}
	r.mu.Unlock()
}

// Len returns the number of samples held.
func (r *Ring) Len() int {
	if r == nil {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.n
}

// Cap returns the ring's capacity.
func (r *Ring) Cap() int { return len(r.buf) }

// Samples returns a copy of all samples held, oldest first. A nil ring
// holds none.
func (r *Ring) Samples() []Statistics { return r.Last(-1) }

// Last returns a copy of the newest n samples (all when n < 0), oldest
// first.
func (r *Ring) Last(n int) []Statistics {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if n < 0 || n > r.n {
		n = r.n
	}
	out := make([]Statistics, n)
	start := (r.next - n + len(r.buf)) % len(r.buf)
	for i := range n {
		out[i] = r.buf[(start+i)%len(r.buf)]
	}
	return out
}

// Latest returns the newest sample; ok is false when the ring is empty.
func (r *Ring) Latest() (s Statistics, ok bool) {
	if r == nil {
		return s, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.n == 0 {
		return s, false
	}
	return r.buf[(r.next-1+len(r.buf))%len(r.buf)], true
}

// MemoryBytes returns the memory the ring's slots occupy (capacity ×
// SampleSize), not counting heap data samples point to.
func (r *Ring) MemoryBytes() int { return len(r.buf) * SampleSize }
