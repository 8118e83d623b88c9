package timespec

import (
	"errors"
	"time"
)

// ErrInvalid is wrapped by every parse error.
var ErrInvalid = errors.New("invalid time description")

// Description is a parsed time description. The zero value of a field is
// "no condition".
type Description struct {
	DemandID string
	Start    *Condition
	Duration *Condition
	Deadline *Condition
	OrderBy  IDExpr // nil: no predecessor
}

// Strategy says how strictly a condition binds.
type Strategy int

const (
	// Loose: as close as possible; the master may postpone inside the
	// window, or past it when the condition cannot be met.
	Loose Strategy = iota
	// Strict: at the stated time or the demand fails.
	Strict
)

func (s Strategy) String() string {
	if s == Strict {
		return "strict"
	}
	return "loose"
}

// Condition is a time expression with its strategy.
type Condition struct {
	Time     Expr
	Strategy Strategy
}

// Expr is a time expression: *Interval, *And, *Or or *Not.
type Expr interface {
	// Holds reports whether an event at t, after opportunities allocation
	// opportunities were passed up, satisfies the expression; NOW is ref.
	Holds(t, ref time.Time, opportunities int) bool
	expr()
}

// PointKind says what an end of an interval is.
type PointKind int

// The kinds of interval ends.
const (
	Open     PointKind = iota // unbounded
	Now                       // the reference time
	Absolute                  // At
	Relative                  // Rel after the start (T2 only)
	Delay                     // Count opportunities may pass (T2 only)
)

// Point is one end of an interval.
type Point struct {
	Kind  PointKind
	At    time.Time     // Absolute
	Rel   time.Duration // Relative
	Count int           // Delay
}

// Interval is [From, To]; both ends inclusive.
type Interval struct{ From, To Point }

// And holds when every operand holds.
type And []Expr

// Or holds when any operand holds.
type Or []Expr

// Not holds when its operand does not.
type Not struct{ X Expr }

func (*Interval) expr() {}
func (And) expr()       {}
func (Or) expr()        {}
func (*Not) expr()      {}

// Bounds resolves the interval against ref: the earliest and latest
// instants it allows (zero time for an open end) and the delay count
// (-1 when it has none).
func (iv *Interval) Bounds(ref time.Time) (from, to time.Time, delay int) {
	delay = -1
	switch iv.From.Kind {
	case Now:
		from = ref
	case Absolute:
		from = iv.From.At
	}
	base := from
	if base.IsZero() {
		base = ref
	}
	switch iv.To.Kind {
	case Absolute:
		to = iv.To.At
	case Now:
		to = ref
	case Relative:
		to = base.Add(iv.To.Rel)
	case Delay:
		delay = iv.To.Count
	}
	return from, to, delay
}

// Holds implements Expr.
func (iv *Interval) Holds(t, ref time.Time, opportunities int) bool {
	from, to, delay := iv.Bounds(ref)
	if !from.IsZero() && t.Before(from) {
		return false
	}
	if !to.IsZero() && t.After(to) {
		return false
	}
	return delay < 0 || opportunities <= delay
}

// Holds implements Expr.
func (a And) Holds(t, ref time.Time, n int) bool {
	for _, e := range a {
		if !e.Holds(t, ref, n) {
			return false
		}
	}
	return true
}

// Holds implements Expr.
func (o Or) Holds(t, ref time.Time, n int) bool {
	for _, e := range o {
		if e.Holds(t, ref, n) {
			return true
		}
	}
	return false
}

// Holds implements Expr.
func (n *Not) Holds(t, ref time.Time, k int) bool { return !n.X.Holds(t, ref, k) }

// IDExpr names the demands that must finish first: ID, AllOf or AnyOf.
type IDExpr interface {
	// Satisfied reports whether the expression holds given which demands
	// have finished.
	Satisfied(finished func(id string) bool) bool
	// IDs lists every demand the expression names, in order of appearance.
	IDs() []string
	idExpr()
}

// ID is one demand.
type ID string

// AllOf holds when every operand holds (a JSON list, or AND).
type AllOf []IDExpr

// AnyOf holds when any operand holds (OR).
type AnyOf []IDExpr

func (ID) idExpr()    {}
func (AllOf) idExpr() {}
func (AnyOf) idExpr() {}

// Satisfied implements IDExpr.
func (id ID) Satisfied(f func(string) bool) bool { return f(string(id)) }

// IDs implements IDExpr.
func (id ID) IDs() []string { return []string{string(id)} }

// Satisfied implements IDExpr.
func (a AllOf) Satisfied(f func(string) bool) bool {
	for _, e := range a {
		if !e.Satisfied(f) {
			return false
		}
	}
	return true
}

// IDs implements IDExpr.
func (a AllOf) IDs() []string { return ids(a) }

// Satisfied implements IDExpr.
func (a AnyOf) Satisfied(f func(string) bool) bool {
	for _, e := range a {
		if e.Satisfied(f) {
			return true
		}
	}
	return false
}

// IDs implements IDExpr.
func (a AnyOf) IDs() []string { return ids(a) }

func ids(es []IDExpr) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.IDs()...)
	}
	return out
}
