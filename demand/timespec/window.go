package timespec

import (
	"slices"
	"time"
)

// Window is a closed span of time [From, To]; a zero end is open
// (unbounded).
type Window struct{ From, To time.Time }

// Contains reports whether t lies in w.
func (w Window) Contains(t time.Time) bool {
	return (w.From.IsZero() || !t.Before(w.From)) && (w.To.IsZero() || !t.After(w.To))
}

// Windows resolves e against ref (the instant NOW stands for) into the
// sorted, disjoint spans of time in which it holds, ignoring delay counts
// (^N bounds opportunities, not time). A planner needs spans, not a
// predicate: AND, OR and NOT are piecewise constant between the ends of
// the intervals they combine, so e is evaluated once at every end and
// once inside every gap. An expression that never holds has no window;
// one that always holds has one window with both ends open.
func Windows(e Expr, ref time.Time) []Window {
	var ends []time.Time
	collectEnds(e, ref, &ends)
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	ends = slices.CompactFunc(ends, func(a, b time.Time) bool { return a.Equal(b) })
	holds := func(t time.Time) bool { return e.Holds(t, ref, 0) }
	if len(ends) == 0 {
		if holds(ref) {
			return []Window{{}}
		}
		return nil
	}
	// Pieces in order: (-inf, e0), e0, (e0, e1), e1, ..., ek, (ek, +inf).
	var out []Window
	var cur *Window
	open := func(from time.Time) {
		if cur == nil {
			out = append(out, Window{From: from})
			cur = &out[len(out)-1]
		}
	}
	close := func(to time.Time) {
		if cur != nil {
			cur.To = to
			cur = nil
		}
	}
	if holds(ends[0].Add(-time.Second)) {
		open(time.Time{})
	}
	for i, b := range ends {
		if holds(b) {
			open(b)
		} else {
			close(b.Add(-time.Nanosecond))
		}
		var inGap bool
		if i+1 < len(ends) {
			inGap = holds(b.Add(ends[i+1].Sub(b) / 2))
		} else {
			inGap = holds(b.Add(time.Second))
		}
		if inGap {
			open(b.Add(time.Nanosecond))
		} else if cur != nil {
			close(b)
		}
	}
	return out
}

// collectEnds appends the resolved ends of every interval in e.
func collectEnds(e Expr, ref time.Time, out *[]time.Time) {
	switch e := e.(type) {
	case *Interval:
		from, to, _ := e.Bounds(ref)
		for _, t := range []time.Time{from, to} {
			if !t.IsZero() {
				*out = append(*out, t)
			}
		}
	case And:
		for _, x := range e {
			collectEnds(x, ref, out)
		}
	case Or:
		for _, x := range e {
			collectEnds(x, ref, out)
		}
	case *Not:
		collectEnds(e.X, ref, out)
	}
}
