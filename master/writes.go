package master

import (
	"fmt"
	"log/slog"
	"sync"
)

// No store round trip is made under the master's lock. With etcd a write
// is a network round trip and a raft commit, and a leader cut from etcd
// waits for it until its term ends: made under the lock, it held /state,
// /metrics, the allocation cycles, the status updates and the stream
// closing of the step-down behind it (issue 30).
//
// So the domain decides under the lock what the store must record and
// queues it; one goroutine writes the queue, in order, outside the lock:
//
//	domain (m.mu held)          writes (one goroutine, no lock)     store
//	decide, apply, enqueue ──▶  pending[0] ───────────────────────▶ Put…
//	                            done(err) ◀──────────────────────── fenced
//	then, under m.mu: what had to wait for the record (an answer)
//
// One writer keeps the store's order the domain's: a framework's record
// and its deletion, two reservation changes of one agent, land as they
// were decided, whoever waits or not. Fencing is the store's: a term's
// store (etcdstore) refuses a write once the term ended, and cancels one
// in flight, so a deposed leader's queue drains with ErrNotLeader.
//
// Three kinds of writes use it:
//   - write-behind: the change is in force before its record is written,
//     and a failed write is logged (the next change of the record writes
//     it again): a framework removed, reservations an ACCEPT changed,
//     demands;
//   - record before the answer: the framework is told what the record
//     keeps (LOST answers: LOST is final, a restart must know it) only
//     once the write returned (persistFrameworkThenLocked);
//   - write, then apply: the caller waits for the write without the lock
//     and applies the change after it: an operator's changes (refused when
//     the write fails), a framework's subscription (plan, write, apply).
//
// Agents' records are the exception: a registration writes its agent's
// record itself, outside the lock, concurrently with other
// registrations (etcdstore batches concurrent writes; a single writer
// would serialise 50,000 of them). Nothing else writes agent records.
type writes struct {
	store Store
	log   *slog.Logger

	mu      sync.Mutex
	pending []write
	writing bool // the writer goroutine runs
	closed  bool // the master stopped: no write goes out
	idle    sync.WaitGroup
}

// write is one store call and who hears its outcome.
type write struct {
	what string            // for the log: "persist framework" …
	args []any             // the log's attributes: which record
	put  func(Store) error // the store call
	// done, when not nil, gets the outcome, on the writer goroutine
	// outside the master's lock; nil logs a failure.
	done func(error)
}

func newWrites(store Store, log *slog.Logger) *writes { return &writes{store: store, log: log} }

// enqueue queues w behind every write queued before it. It never blocks;
// safe under the master's lock. After close w's done gets ErrClosed.
func (q *writes) enqueue(w write) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		q.finish(w, fmt.Errorf("%s: %w", w.what, ErrClosed))
		return
	}
	q.pending = append(q.pending, w)
	start := !q.writing
	if start {
		q.writing = true
		q.idle.Add(1)
	}
	q.mu.Unlock()
	if start {
		go q.run() // owned by q: ends when the queue is empty; close waits for it
	}
}

// put queues a store call and returns a channel that gets its outcome;
// the caller waits on it without the master's lock.
func (q *writes) put(w write) <-chan error {
	out := make(chan error, 1)
	w.done = func(err error) { out <- err }
	q.enqueue(w)
	return out
}

// run writes what is queued, oldest first, until the queue is empty.
func (q *writes) run() {
	defer q.idle.Done()
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.writing = false
			q.mu.Unlock()
			return
		}
		w := q.pending[0]
		q.pending[0] = write{}
		q.pending = q.pending[1:]
		q.mu.Unlock()
		q.finish(w, w.put(q.store))
	}
}

func (q *writes) finish(w write, err error) {
	if w.done != nil {
		w.done(err)
		return
	}
	if err != nil {
		q.log.Warn(w.what, append(w.args, "err", err)...)
	}
}

// close makes later writes fail with ErrClosed and waits for those
// queued to be written (a deposed leader's fail at once: its term's
// store refuses them).
func (q *writes) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.idle.Wait()
}
