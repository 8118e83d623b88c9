package demand

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/brimnode/brim/demand/timespec"
	"github.com/brimnode/brim/resources"
)

// Sentinel errors, tested with errors.Is.
var (
	// ErrInvalid: a malformed demand; the message names the field.
	// Errors of the time description (timespec.ErrInvalid) match it too.
	ErrInvalid = errors.New("invalid demand")
	// ErrExist: a demand with that ID is already known.
	ErrExist = errors.New("demand already exists")
	// ErrNotFound: no demand with that ID.
	ErrNotFound = errors.New("demand not found")
	// ErrNeverFits: the demand is larger than the cluster.
	ErrNeverFits = errors.New("demand can never fit the cluster")
	// ErrNoFit: the plan cannot hold the demand in its window.
	ErrNoFit = errors.New("plan cannot hold the demand in time")
	// ErrHandedOver: the demand's resources were handed over (or it
	// ended): its document can no longer change.
	ErrHandedOver = errors.New("demand handed over")
)

// State is a demand's state.
type State int

// The states of a demand, in order.
const (
	New State = iota
	Accepted
	Allocating
	Allocated
	Monitoring
	Finished
	Failed
)

var stateNames = [...]string{"NEW", "ACCEPTED", "ALLOCATING", "ALLOCATED", "MONITORING", "FINISHED", "FAILED"}

func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("State(%d)", int(s))
	}
	return stateNames[s]
}

// Final reports whether no transition leaves s.
func (s State) Final() bool { return s == Finished || s == Failed }

// MarshalText implements encoding.TextMarshaler.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *State) UnmarshalText(b []byte) error {
	for i, n := range stateNames {
		if n == string(b) {
			*s = State(i)
			return nil
		}
	}
	return fmt.Errorf("unknown demand state %q", b)
}

// Reason says why a demand FAILED.
type Reason string

// The reasons of FAILED.
const (
	ReasonRejected          Reason = "rejected"
	ReasonNotAllocatable    Reason = "not allocatable in time"
	ReasonNotClaimed        Reason = "not claimed within the pick-up timeout"
	ReasonCancelled         Reason = "cancelled"
	ReasonDurationExceeded  Reason = "duration exceeded"
	ReasonDeadlineMissed    Reason = "deadline missed"
	ReasonPredecessorFailed Reason = "predecessor failed"
	ReasonTasksFailed       Reason = "tasks failed"
	// ReasonHandOverFailed: a demand handed over whole (a gang, a strict
	// start) lost part of its hand-over before its tasks launched there
	// (the agent left), or its framework launched fewer tasks than a
	// gang has: it can no longer run whole.
	ReasonHandOverFailed Reason = "hand-over failed"
)

// Spec is a submitted demand: the seed's time description plus what is
// asked for. Its JSON is the time description's fields (DemandID, Start,
// Duration, Deadline, OrderBy) beside Resources ("cpus:1;mem:128", per
// task, unreserved scalars the plan holds: cpus, mem, disk, net_bw),
// Tasks (default 1), Gang, FrameworkID and Role.
type Spec struct {
	Time      *timespec.Description
	Framework string
	Role      string
	Resources resources.Resources
	Tasks     int
	Gang      bool
}

// maxTasks bounds Tasks.
const maxTasks = 100_000

// ParseSpec reads one demand document. Errors wrap ErrInvalid and name
// the field.
func ParseSpec(data []byte) (*Spec, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, fmt.Errorf("%w: demand: want a JSON object: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: demand: trailing data after the JSON value", ErrInvalid)
	}
	s := &Spec{Tasks: 1}
	take := func(name string, dst any) error {
		raw, ok := m[name]
		if !ok {
			return nil
		}
		delete(m, name)
		if err := json.Unmarshal(raw, dst); err != nil {
			return fmt.Errorf("%w: %s: %s: %v", ErrInvalid, name, bytes.TrimSpace(raw), err)
		}
		return nil
	}
	var res string
	for _, f := range []struct {
		name string
		dst  any
	}{{"Resources", &res}, {"Tasks", &s.Tasks}, {"Gang", &s.Gang}, {"FrameworkID", &s.Framework}, {"Role", &s.Role}} {
		if err := take(f.name, f.dst); err != nil {
			return nil, err
		}
	}
	if res == "" {
		return nil, fmt.Errorf("%w: Resources: missing (per task, e.g. \"cpus:1;mem:128\")", ErrInvalid)
	}
	r, err := resources.Parse(res)
	if err != nil {
		return nil, fmt.Errorf("%w: Resources: %v", ErrInvalid, err)
	}
	for _, x := range r {
		if x.Type != resources.Scalar || x.IsReserved() || x.Revocable {
			return nil, fmt.Errorf("%w: Resources: %s: a demand asks for unreserved, non-revocable scalars", ErrInvalid, x)
		}
		if !slices.Contains(dims[:], x.Name) {
			// The plan could not hold it: the demand would wait for
			// ever, holding the rest of what it asks for.
			return nil, fmt.Errorf("%w: Resources: %s: demands plan %s only", ErrInvalid, x, strings.Join(dims[:], ", "))
		}
	}
	if r.IsEmpty() {
		return nil, fmt.Errorf("%w: Resources: %q: empty", ErrInvalid, res)
	}
	s.Resources = r
	if s.Tasks < 1 || s.Tasks > maxTasks {
		return nil, fmt.Errorf("%w: Tasks: %d: want 1 to %d", ErrInvalid, s.Tasks, maxTasks)
	}
	rest, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if s.Time, err = timespec.Parse(rest); err != nil {
		return nil, invalidTime{err}
	}
	return s, nil
}

// MarshalJSON writes the canonical document ParseSpec reads back.
func (s *Spec) MarshalJSON() ([]byte, error) {
	tb, err := s.Time.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(tb, &m); err != nil {
		return nil, err
	}
	m["Resources"] = s.Resources.String()
	m["Tasks"] = s.Tasks
	if s.Gang {
		m["Gang"] = true
	}
	if s.Framework != "" {
		m["FrameworkID"] = s.Framework
	}
	if s.Role != "" {
		m["Role"] = s.Role
	}
	return json.Marshal(m)
}

// Timing is a spec's time description resolved against the instant it was
// submitted (NOW).
type Timing struct {
	Ref   time.Time
	Start []timespec.Window // where the hand-over may happen; never empty
	// StartStrict, DurationStrict, DeadlineStrict: the strategies.
	StartStrict, DurationStrict, DeadlineStrict bool
	// Length is how long the resources are held (0: unknown).
	Length time.Duration
	// Deadline is when the work must be done (zero: none).
	Deadline time.Time
}

// Resolve resolves s's time description against ref. Errors wrap
// ErrInvalid: a start window that never holds or lies in the past for a
// strict start, a deadline already passed, a strict deadline the
// Duration cannot meet even from the earliest start.
func (s *Spec) Resolve(ref time.Time) (Timing, error) {
	d := s.Time
	t := Timing{Ref: ref, Start: []timespec.Window{{From: ref}}}
	if d.Start != nil {
		t.StartStrict = d.Start.Strategy == timespec.Strict
		var ws []timespec.Window
		for _, w := range timespec.Windows(d.Start.Time, ref) {
			if !w.To.IsZero() && w.To.Before(ref) {
				continue // already over
			}
			ws = append(ws, w)
		}
		if len(ws) == 0 {
			return t, fmt.Errorf("%w: Start.Time: no time at or after the submission holds", ErrInvalid)
		}
		if t.StartStrict && !ws[0].From.IsZero() && ws[0].From.Before(ref.Add(-time.Second)) {
			return t, fmt.Errorf("%w: Start.Time: a strict start at %s is in the past", ErrInvalid, ws[0].From.Format(time.RFC3339))
		}
		if ws[0].From.IsZero() || ws[0].From.Before(ref) {
			ws[0].From = ref
		}
		t.Start = ws
	}
	if d.Duration != nil {
		t.DurationStrict = d.Duration.Strategy == timespec.Strict
		ws := timespec.Windows(d.Duration.Time, ref)
		if len(ws) == 0 {
			return t, fmt.Errorf("%w: Duration.Time: never holds", ErrInvalid)
		}
		if last := ws[len(ws)-1].To; !last.IsZero() {
			if t.Length = last.Sub(ref); t.Length <= 0 {
				return t, fmt.Errorf("%w: Duration.Time: not a positive duration", ErrInvalid)
			}
		}
	}
	if d.Deadline != nil {
		t.DeadlineStrict = d.Deadline.Strategy == timespec.Strict
		ws := timespec.Windows(d.Deadline.Time, ref)
		if len(ws) == 0 {
			return t, fmt.Errorf("%w: Deadline.Time: never holds", ErrInvalid)
		}
		if t.Deadline = ws[len(ws)-1].To; !t.Deadline.IsZero() && !t.Deadline.After(ref) {
			return t, fmt.Errorf("%w: Deadline.Time: %s has passed", ErrInvalid, t.Deadline.Format(time.RFC3339))
		}
	}
	if earliest := t.Start[0].From.Add(t.Length); t.DeadlineStrict && t.Length > 0 && !t.Deadline.IsZero() && earliest.After(t.Deadline) {
		// The machine would fail it at its first tick (deadline missed).
		return t, fmt.Errorf("%w: Deadline.Time: a strict deadline at %s cannot be met: started at the earliest, %s, its Duration of %s ends at %s",
			ErrInvalid, t.Deadline.Format(time.RFC3339), t.Start[0].From.Format(time.RFC3339), t.Length, earliest.Format(time.RFC3339))
	}
	return t, nil
}

// Slot is a part of a placement: Tasks tasks on Agent, of which Handed
// have been handed over there so far (Demand.Hand).
type Slot struct {
	Agent  string `json:"agent"`
	Tasks  int    `json:"tasks"`
	Handed int    `json:"handed,omitempty"`
}

// Transition is one change of state.
type Transition struct {
	At      time.Time `json:"at"`
	From    State     `json:"from"`
	To      State     `json:"to"`
	Reason  Reason    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
}

// Demand is one demand and where its state machine stands. It is a plain
// value (JSON is how stores keep it); the Book that owns it is not safe
// for concurrent use.
type Demand struct {
	ID        string          `json:"id"`
	Doc       json.RawMessage `json:"doc"` // the canonical Spec
	Framework string          `json:"framework"`
	Role      string          `json:"role"`
	State     State           `json:"state"`
	Reason    Reason          `json:"reason,omitempty"`
	Message   string          `json:"message,omitempty"`
	Submitted time.Time       `json:"submitted"`
	// Updated is when the document was last changed (Book.Update; zero:
	// never): NOW and relative times of the document resolve against it.
	Updated time.Time `json:"updated,omitzero"`
	// Start and End are the planned hand-over and release (End zero:
	// open); Placement is where (zero Start: not planned yet, waiting
	// for its OrderBy).
	Start     time.Time `json:"start,omitzero"`
	End       time.Time `json:"end,omitzero"`
	Placement []Slot    `json:"placement,omitempty"`
	// Late: a loose demand planned or running past its window or deadline.
	Late bool `json:"late,omitempty"`
	// Relaxed: a loose demand whose ^N opportunities passed; it may be
	// handed resources on any agent.
	Relaxed       bool      `json:"relaxed,omitempty"`
	AllocatedAt   time.Time `json:"allocatedAt,omitzero"`
	ClaimedAt     time.Time `json:"claimedAt,omitzero"`
	EndedAt       time.Time `json:"endedAt,omitzero"`
	Opportunities int       `json:"opportunities,omitempty"`
	Handed        int       `json:"handed,omitempty"` // tasks' worth handed over
	// Launched is how many tasks its framework launched on it.
	Launched int `json:"launched,omitempty"`
	// LiveTasks are the IDs of the tasks launched on it that have not
	// ended, and Failures how many ended without finishing: kept by the
	// driver (the master) so that a restart keeps the link.
	LiveTasks []string     `json:"liveTasks,omitempty"`
	Failures  int          `json:"failures,omitempty"`
	History   []Transition `json:"history"`

	spec   *Spec
	timing Timing
	// probed is when placeNow last looked for room elsewhere now.
	probed time.Time
	// due is its first planned start (Due).
	due time.Time
	// seq is its place in submission order (Book.order).
	seq int
	// fitGen is the plan's capacity generation (Plan.gen) at which its
	// placement was last seen to fit (Book.Replan; 0: never).
	fitGen uint64
}

// Hand records that n tasks' worth of d were handed over on agent (n < 0:
// given back, e.g. a declined offer). The driver keeps what it holds and
// hands on an agent within the slot's Tasks less its Handed (Unhanded): a
// demand handed over task by task must never take, on an agent where its
// slot is used up, capacity the plan booked there for another demand.
func (d *Demand) Hand(agent string, n int) {
	for i := range d.Placement {
		if s := &d.Placement[i]; s.Agent == agent {
			s.Handed = min(max(s.Handed+n, 0), s.Tasks)
			return
		}
	}
}

// Unhanded is how many tasks of slot s are still to be handed over.
func (s Slot) Unhanded() int { return max(s.Tasks-s.Handed, 0) }

// Spec is the demand's parsed spec.
func (d *Demand) Spec() *Spec { return d.spec }

// Timing is the demand's resolved time description.
func (d *Demand) Timing() Timing { return d.timing }

// Restore re-derives a stored demand's spec and timing (after JSON
// decoding).
func (d *Demand) Restore() error {
	s, err := ParseSpec(d.Doc)
	if err != nil {
		return fmt.Errorf("restore demand %s: %w", d.ID, err)
	}
	d.spec = s
	d.timing, _ = s.Resolve(d.Ref()) // valid when it was submitted or updated
	return nil
}

// Ref is the instant the document's NOW stands for: when it was last
// updated, else when it was submitted.
func (d *Demand) Ref() time.Time {
	if !d.Updated.IsZero() {
		return d.Updated
	}
	return d.Submitted
}

// invalidTime is a time description's error, matching ErrInvalid too.
type invalidTime struct{ err error }

func (e invalidTime) Error() string        { return e.err.Error() }
func (e invalidTime) Unwrap() error        { return e.err }
func (e invalidTime) Is(target error) bool { return target == ErrInvalid }
