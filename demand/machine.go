package demand

import (
	"errors"
	"fmt"
	"time"
)

// Kind is the kind of an Event.
type Kind int

// The events a demand's machine takes.
const (
	// EvAdmit: the plan's verdict on a NEW demand: Plan (nil: wait for
	// OrderBy) or Err.
	EvAdmit Kind = iota
	// EvPlan: an ACCEPTED demand whose predecessors finished is placed:
	// Plan or Err.
	EvPlan
	// EvTick: time passed; Pred says where the predecessors stand.
	EvTick
	// EvHeld: an allocation opportunity: Held tasks' worth is held for
	// the demand now.
	EvHeld
	// EvClaim: the framework launched on the demand's resources.
	EvClaim
	// EvEnded: every task of the demand ended; OK when all finished.
	EvEnded
	// EvCancel: the framework or an operator cancelled the demand.
	EvCancel
	// EvHandOverLost: part of a hand-over that must be whole (a gang, a
	// strict start) cannot complete; Message says why.
	EvHandOverLost
	// EvUpdate: the demand's document changed (Book.Update) before its
	// hand-over: Plan (nil: wait for OrderBy) or Err (a loose demand the
	// plan has no room for yet).
	EvUpdate
)

// Pred is where a demand's OrderBy stands.
type Pred int

// The states of a demand's predecessors.
const (
	PredDone    Pred = iota // satisfied (or no OrderBy)
	PredWaiting             // some must still finish
	PredFailed              // can no longer be satisfied
)

// Placement is where and when the plan holds a demand.
type Placement struct {
	Start, End time.Time // End zero: open
	Slots      []Slot
	Late       bool // a loose demand placed past its window
}

// Event is one input of the state machine.
type Event struct {
	Kind    Kind
	At      time.Time
	Plan    *Placement
	Err     error
	Pred    Pred
	Held    int
	OK      bool
	Message string
}

// Config holds the machine's timeouts.
type Config struct {
	// Lead is how long before its start a demand starts ALLOCATING
	// (capacity is held from then on).
	Lead time.Duration
	// LooseLead is Lead for loose starts (0: Lead). Capacity held ahead
	// of a start idles until then; a loose start is not guaranteed, so it
	// may hold for a shorter time and, when short at its start, move to
	// agents with room beside DRF's load (Book.Postpone).
	LooseLead time.Duration
	// PickUp is how long an ALLOCATED demand waits for its framework.
	PickUp time.Duration
}

// lead is how long before its start d holds capacity.
func (c Config) lead(d *Demand) time.Duration {
	if c.LooseLead > 0 && !d.timing.StartStrict {
		return c.LooseLead
	}
	return c.Lead
}

type stepFunc func(d *Demand, ev Event, c Config) *Transition

// steps: one step function per non-final state.
var steps = map[State]stepFunc{
	New:        stepNew,
	Accepted:   stepAccepted,
	Allocating: stepAllocating,
	Allocated:  stepAllocated,
	Monitoring: stepMonitoring,
}

// Step feeds ev to d's machine and returns the transition it made (nil:
// none). Final states take no event.
func (d *Demand) Step(ev Event, c Config) *Transition {
	step := steps[d.State]
	if step == nil {
		return nil
	}
	if ev.Kind == EvCancel {
		msg := ev.Message
		if msg == "" {
			msg = "cancelled"
		}
		return d.fail(ev.At, ReasonCancelled, msg)
	}
	return step(d, ev, c)
}

func (d *Demand) move(at time.Time, to State, why Reason, msg string) *Transition {
	t := Transition{At: at, From: d.State, To: to, Reason: why, Message: msg}
	d.State, d.Reason, d.Message = to, why, msg
	if to.Final() {
		d.EndedAt = at
	}
	d.History = append(d.History, t)
	return &d.History[len(d.History)-1]
}

func (d *Demand) fail(at time.Time, why Reason, msg string) *Transition {
	return d.move(at, Failed, why, msg)
}

func (d *Demand) place(p *Placement) {
	d.Start, d.End, d.Placement, d.Late = p.Start, p.End, p.Slots, d.Late || p.Late
	if d.due.IsZero() {
		d.due = p.Start
	}
}

// Due is when d was first planned to start (its start now, for a demand
// restored from a store): a loose start postponed since has waited from
// then.
func (d *Demand) Due() time.Time {
	if d.due.IsZero() || d.due.After(d.Start) {
		return d.Start
	}
	return d.due
}

func stepNew(d *Demand, ev Event, _ Config) *Transition {
	if ev.Kind != EvAdmit {
		return nil
	}
	switch {
	case errors.Is(ev.Err, ErrNoFit) && !d.timing.StartStrict:
		return d.move(ev.At, Accepted, "", "no room in the plan yet; placed when capacity frees")
	case errors.Is(ev.Err, ErrNoFit):
		return d.fail(ev.At, ReasonNotAllocatable, ev.Err.Error())
	case ev.Err != nil:
		return d.fail(ev.At, ReasonRejected, ev.Err.Error())
	case ev.Plan == nil:
		return d.move(ev.At, Accepted, "", "waiting for OrderBy")
	}
	d.place(ev.Plan)
	return d.move(ev.At, Accepted, "", fmt.Sprintf("planned at %s", ev.Plan.Start.UTC().Format(time.RFC3339)))
}

// deadlineCheck fails a strict demand whose deadline can no longer be
// met, and marks a loose one late.
func deadlineCheck(d *Demand, at time.Time, busyFrom time.Time) *Transition {
	dl := d.timing.Deadline
	if dl.IsZero() {
		return nil
	}
	end := at
	if busyFrom.IsZero() && d.timing.Length > 0 {
		end = at.Add(d.timing.Length) // not started: it needs its length still
	}
	if !end.After(dl) {
		return nil
	}
	if d.timing.DeadlineStrict {
		return d.fail(at, ReasonDeadlineMissed, fmt.Sprintf("cannot finish by %s", dl.UTC().Format(time.RFC3339)))
	}
	d.Late = true
	return nil
}

// stepUpdate takes a changed document's plan: ACCEPTED again (holding
// from its new lead on), the history saying where it is planned now.
func stepUpdate(d *Demand, ev Event) *Transition {
	d.Start, d.End, d.Placement = time.Time{}, time.Time{}, nil
	msg := "updated: waiting for OrderBy"
	switch {
	case ev.Err != nil:
		msg = "updated: no room in the plan yet; placed when capacity frees"
	case ev.Plan != nil:
		d.place(ev.Plan)
		msg = fmt.Sprintf("updated: planned at %s", ev.Plan.Start.UTC().Format(time.RFC3339))
	}
	return d.move(ev.At, Accepted, "", msg)
}

func stepAccepted(d *Demand, ev Event, c Config) *Transition {
	switch ev.Kind {
	case EvUpdate:
		return stepUpdate(d, ev)
	case EvPlan:
		if ev.Err != nil {
			if d.timing.StartStrict {
				return d.fail(ev.At, ReasonNotAllocatable, ev.Err.Error())
			}
			return nil // loose: try again next tick
		}
		d.place(ev.Plan)
		return nil
	case EvTick:
	default:
		return nil
	}
	if ev.Pred == PredFailed {
		return d.fail(ev.At, ReasonPredecessorFailed, "an OrderBy demand failed")
	}
	if t := deadlineCheck(d, ev.At, time.Time{}); t != nil {
		return t
	}
	if d.timing.StartStrict && !d.startHolds(ev.At) && ev.At.After(d.timing.Start[0].From) {
		return d.fail(ev.At, ReasonNotAllocatable, "start window passed before the demand could be allocated")
	}
	if ev.Pred != PredDone || d.Start.IsZero() || ev.At.Before(d.Start.Add(-c.lead(d))) {
		return nil
	}
	return d.move(ev.At, Allocating, "", "holding capacity")
}

// startHolds reports whether the start condition holds at t after the
// opportunities passed so far.
func (d *Demand) startHolds(t time.Time) bool {
	if d.spec.Time.Start == nil {
		return true
	}
	return d.spec.Time.Start.Time.Holds(t, d.timing.Ref, d.Opportunities)
}

func stepAllocating(d *Demand, ev Event, _ Config) *Transition {
	switch ev.Kind {
	case EvUpdate:
		return stepUpdate(d, ev)
	case EvTick:
		if ev.Pred == PredFailed {
			return d.fail(ev.At, ReasonPredecessorFailed, "an OrderBy demand failed")
		}
		if t := deadlineCheck(d, ev.At, time.Time{}); t != nil {
			return t
		}
		if d.timing.StartStrict && !ev.At.Before(d.Start) && !d.startHolds(ev.At) {
			return d.fail(ev.At, ReasonNotAllocatable, "start window passed with the capacity not held")
		}
		return nil
	case EvPlan:
		if ev.Err == nil {
			d.place(ev.Plan)
		}
		return nil
	case EvHeld:
	default:
		return nil
	}
	if ev.At.Before(d.Start) {
		return nil // held early; handed over at the start
	}
	// A gang, and a strict start (all of it at the stated time), is
	// handed over whole; a loose non-gang demand from its first task.
	need := 1
	if d.spec.Gang || d.timing.StartStrict {
		need = d.spec.Tasks
	}
	if ev.Held >= need {
		d.AllocatedAt, d.Handed = ev.At, min(ev.Held, d.spec.Tasks)
		return d.move(ev.At, Allocated, "", fmt.Sprintf("%d of %d tasks' resources offered", d.Handed, d.spec.Tasks))
	}
	d.Opportunities++
	if !d.startHolds(ev.At) {
		if d.timing.StartStrict {
			return d.fail(ev.At, ReasonNotAllocatable, fmt.Sprintf("%d of %d tasks' resources held after %d opportunities", ev.Held, need, d.Opportunities))
		}
		d.Relaxed, d.Late = true, true
	}
	return nil
}

func stepAllocated(d *Demand, ev Event, c Config) *Transition {
	switch ev.Kind {
	case EvHandOverLost:
		return d.fail(ev.At, ReasonHandOverFailed, ev.Message)
	case EvClaim:
		d.ClaimedAt = ev.At
		return d.move(ev.At, Monitoring, "", "claimed by its framework")
	case EvHeld:
		d.Handed = max(d.Handed, min(ev.Held, d.spec.Tasks))
		return nil
	case EvTick:
		if ev.At.Sub(d.AllocatedAt) > c.PickUp {
			return d.fail(ev.At, ReasonNotClaimed, fmt.Sprintf("not claimed within %s; resources released", c.PickUp))
		}
		return deadlineCheck(d, ev.At, time.Time{})
	}
	return nil
}

func stepMonitoring(d *Demand, ev Event, _ Config) *Transition {
	switch ev.Kind {
	case EvHandOverLost:
		return d.fail(ev.At, ReasonHandOverFailed, ev.Message)
	case EvHeld:
		d.Handed = max(d.Handed, min(ev.Held, d.spec.Tasks))
		return nil
	case EvEnded:
		if ev.OK {
			return d.move(ev.At, Finished, "", ev.Message)
		}
		return d.fail(ev.At, ReasonTasksFailed, ev.Message)
	case EvTick:
		if l := d.timing.Length; l > 0 && ev.At.Sub(d.AllocatedAt) > l {
			if d.timing.DurationStrict {
				return d.fail(ev.At, ReasonDurationExceeded, fmt.Sprintf("held longer than %s; tasks killed", l))
			}
			d.Late = true
		}
		return deadlineCheck(d, ev.At, d.AllocatedAt)
	}
	return nil
}
