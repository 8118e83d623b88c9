package master

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// An agent's registration is admitted before the master receives it:
// at most a few registrations are received and processed at once, the
// other streams wait, parked, in the order they came.
//
// Without it, a standby elected with 50,000 agents waiting on it woke
// them all at once: 50,000 runnable goroutines, each decoding its
// registration (and growing its stack) before it blocked on the
// registration workers. A goroutine woken by the network — the etcd
// client's lease refresh among them — queued behind all of them, over
// two seconds on two CPUs: the new leader stopped hearing its lease
// refreshed and stepped down in the middle of the storm (1 of 5 runs of
// the 50,000-agent failover benchmark). Admitted a few at a time, the
// scheduler's queue stays short and everything else the master does
// keeps its turn.
//
// A stream that does not send its registration (Register and its task
// pages) within the admission's wait gives its slot back and goes on
// without one: a slow or silent agent cannot hold the others back.
// (Ending such a stream instead would tell its agent nothing useful:
// a stream ended through its context reaches the client as "context
// canceled", whatever status the handler returns.)

// admission bounds the registrations under way.
type admission struct {
	slots chan struct{}
	wait  time.Duration // for the registration to arrive, once admitted
}

// newAdmission admits up to slots registrations at once, each holding
// its slot for at most wait before the registration arrived.
func newAdmission(slots int, wait time.Duration) *admission {
	if slots <= 0 {
		slots = registrationSlots()
	}
	return &admission{slots: make(chan struct{}, slots), wait: wait}
}

// registrationSlots: an admitted registration is a few tens of
// microseconds of CPU before it waits on the registration workers, so
// a few per CPU keep those busy and the scheduler's queue short.
func registrationSlots() int { return 8 * runtime.GOMAXPROCS(0) }

// DefaultRegisterTimeout is how long an admitted agent stream holds its
// registration slot before its registration arrived.
const DefaultRegisterTimeout = 10 * time.Second

// Ticket is one admitted registration.
type Ticket struct {
	a     *admission
	once  sync.Once
	timer *time.Timer
}

// admit waits for a slot (or ctx's end) and returns the registration's
// ticket; its holder calls received once the registration is in, and
// release when it is done.
func (a *admission) admit(ctx context.Context) (*Ticket, error) {
	select {
	case a.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	t := &Ticket{a: a}
	t.timer = time.AfterFunc(a.wait, t.Release)
	return t, nil
}

// Received says the registration is in: the slot is no longer given
// back for lateness.
func (t *Ticket) Received() { t.timer.Stop() }

// Release gives the slot back, once.
func (t *Ticket) Release() {
	t.once.Do(func() {
		t.timer.Stop()
		<-t.a.slots
	})
}

// inUse is the number of registration slots held.
func (a *admission) inUse() int { return len(a.slots) }
