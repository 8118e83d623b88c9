package agent

import (
	"errors"
	"fmt"

	"github.com/brimnode/brim/resources"
)

// errClaimState is returned by a ledger operation that does not fit the
// claim's state (a second Reserve of an ID, Resize of a claim not
// committed or already resizing): a bug in the caller, never a user error.
var errClaimState = errors.New("ledger: claim in wrong state")

// ledger is the agent's resource accounting: claims, one per container ID,
// against a total, in the resource model's terms (package resources).
// Regular claims draw from the total's non-revocable resources, revocable
// claims (every entry marked Revocable) from its revocable part, the
// revocable pool, which the agent resets from the estimator's offer before
// each revocable admission (SetRevocable).
//
// A claim's life:
//
//	Reserve ──Commit──▶ committed ──Resize──▶ resizing ──Commit──▶ committed (new size)
//	   │                    │                    │
//	 Cancel              Release              Cancel ──▶ committed (old size)
//	   ▼                    ▼
//	 (gone)               (gone)
//
// Adopt enters a committed claim without admission (recovery: the
// container already exists). Release drops a claim in any state.
//
// Admission (Reserve, Resize) checks only the resources asked: each must
// be free, key by key (name, role, revocability), and a resource the total
// does not have at all is refused like one that is used up — as in Mesos,
// where a task asking for a resource its agent does not offer is invalid.
// So after a successful Reserve or Resize, used ≤ total for every resource
// asked. Adopt and a shrinking revocable pool can leave used above total:
// Free never goes negative (Subtract's Mesos semantics) and only requests
// for the overdrawn resource are refused until claims are released.
//
// A resizing claim holds the larger of its old and new size per resource
// until Commit or Cancel, so a concurrent admission cannot take what the
// runtime may already be applying.
//
// Not safe for concurrent use: the Agent serialises it under its mutex.
// Pure: no I/O, no kernel.
type ledger struct {
	total  resources.Resources
	claims map[string]*claim
}

type claim struct {
	held      resources.Resources // what is charged now
	committed bool
	resizing  bool
	prev      resources.Resources // held before a pending resize
	next      resources.Resources // the size a pending resize commits to
}

// newLedger returns a ledger over total (non-revocable entries and,
// optionally, a revocable pool).
func newLedger(total resources.Resources) *ledger {
	return &ledger{total: total.Add(nil), claims: map[string]*claim{}}
}

// SetRevocable replaces the revocable part of the total with pool (its
// entries are marked revocable).
func (l *ledger) SetRevocable(pool resources.Resources) {
	l.total = l.total.NonRevocable().Add(markRevocable(pool, true))
}

// Total returns the total, revocable pool included.
func (l *ledger) Total() resources.Resources { return l.total }

// Used returns the sum of every claim's held resources.
func (l *ledger) Used() resources.Resources {
	var u resources.Resources
	for _, c := range l.claims {
		u = u.Add(c.held)
	}
	return u
}

// Free returns what is left of the total; never negative.
func (l *ledger) Free() resources.Resources { return l.total.Subtract(l.Used()) }

// Held returns what claim id holds; ok is false for an unknown id.
func (l *ledger) Held(id string) (r resources.Resources, ok bool) {
	c := l.claims[id]
	if c == nil {
		return nil, false
	}
	return c.held, true
}

// Reserve admits a new claim for id. Errors: an *InsufficientResourcesError
// (ErrInsufficientResources) naming what is short, errClaimState when id
// already has a claim.
func (l *ledger) Reserve(id string, res resources.Resources) error {
	if l.claims[id] != nil {
		return fmt.Errorf("reserve %s: %w: already claimed", id, errClaimState)
	}
	if err := l.admit(res, l.Free()); err != nil {
		return err
	}
	l.claims[id] = &claim{held: res.Add(nil)}
	return nil
}

// Adopt enters a committed claim for id without admission: the container
// exists already (recovery). It replaces a claim id may have.
func (l *ledger) Adopt(id string, res resources.Resources) {
	l.claims[id] = &claim{held: res.Add(nil), committed: true}
}

// Commit settles id's pending change: a reservation becomes committed, a
// resize takes its new size. Committing a settled claim does nothing.
// Errors wrap ErrNotFound for an unknown id.
func (l *ledger) Commit(id string) error {
	c := l.claims[id]
	if c == nil {
		return fmt.Errorf("commit %s: %w", id, ErrNotFound)
	}
	if c.resizing {
		c.held, c.prev, c.next, c.resizing = c.next, nil, nil, false
	}
	c.committed = true
	return nil
}

// Cancel undoes id's pending change: a reservation is dropped, a resize
// reverts to the old size. Cancelling a settled claim does nothing.
// Errors wrap ErrNotFound for an unknown id.
func (l *ledger) Cancel(id string) error {
	c := l.claims[id]
	if c == nil {
		return fmt.Errorf("cancel %s: %w", id, ErrNotFound)
	}
	switch {
	case !c.committed:
		delete(l.claims, id)
	case c.resizing:
		c.held, c.prev, c.next, c.resizing = c.prev, nil, nil, false
	}
	return nil
}

// Release drops id's claim, whatever its state. Errors wrap ErrNotFound
// for an unknown id (nothing changes).
func (l *ledger) Release(id string) error {
	if l.claims[id] == nil {
		return fmt.Errorf("release %s: %w", id, ErrNotFound)
	}
	delete(l.claims, id)
	return nil
}

// Resize admits a committed claim's change to next: what next has beyond
// the current size must be free. Until Commit (new size) or Cancel (old
// size) the claim holds the larger of both. Errors: an
// *InsufficientResourcesError, ErrNotFound, errClaimState for a claim not
// committed or already resizing.
func (l *ledger) Resize(id string, next resources.Resources) error {
	c := l.claims[id]
	switch {
	case c == nil:
		return fmt.Errorf("resize %s: %w", id, ErrNotFound)
	case !c.committed || c.resizing:
		return fmt.Errorf("resize %s: %w: not settled", id, errClaimState)
	}
	grow := next.Subtract(c.held)
	if err := l.admit(grow, l.Free()); err != nil {
		return err
	}
	c.prev, c.next, c.resizing = c.held, next.Add(nil), true
	c.held = c.held.Add(grow)
	return nil
}

// admit checks that ask fits in free, key by key, and names every resource
// that does not.
func (l *ledger) admit(ask, free resources.Resources) error {
	if free.Contains(ask) {
		return nil
	}
	e := &InsufficientResourcesError{}
	for _, r := range ask.Filter(func(resources.Resource) bool { return true }) {
		one := resources.Resources{r}
		if free.Contains(one) {
			continue
		}
		e.Asked = append(e.Asked, r)
		e.Free = append(e.Free, free.Filter(func(f resources.Resource) bool { return sameKey(f, r) })...)
		total := l.total.Filter(func(t resources.Resource) bool { return sameKey(t, r) })
		if total.IsEmpty() {
			e.NotOffered = append(e.NotOffered, r.Name)
		} else if !total.Contains(one) {
			e.Total = append(e.Total, total...)
		}
	}
	return e
}

// sameKey reports whether a and b are the same resource for accounting:
// name, type, role, reservation and revocability.
func sameKey(a, b resources.Resource) bool {
	role := func(r resources.Resource) string {
		if r.Role == "" {
			return resources.Unreserved
		}
		return r.Role
	}
	principal := func(r resources.Resource) (string, bool) {
		if r.Reservation == nil {
			return "", false
		}
		return r.Reservation.Principal, true
	}
	pa, da := principal(a)
	pb, db := principal(b)
	return a.Name == b.Name && a.Type == b.Type && role(a) == role(b) && pa == pb && da == db && a.Revocable == b.Revocable
}

// markRevocable returns r with every entry's Revocable set to rev.
func markRevocable(r resources.Resources, rev bool) resources.Resources {
	out := make(resources.Resources, 0, len(r))
	for _, e := range r {
		e.Revocable = rev
		out = append(out, e)
	}
	return out.Add(nil)
}
