package demand

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/brimnode/brim/demand/timespec"
)

// Change is a transition of one demand, for the driver to carry out
// (persist, notify, release or kill).
type Change struct {
	Demand *Demand
	Transition
}

// Book holds every demand, admits them against its Plan and drives their
// machines. Not safe for concurrent use (the master calls it under its
// lock); it does no I/O and reads no clock.
type Book struct {
	cfg     Config
	plan    *Plan
	demands map[string]*Demand
	order   []string // submission order
	// live are the demands not final when Tick last looked, in
	// submission order (those that ended since are dropped by the next
	// Tick): a cycle visits these, not every demand ever submitted.
	live []*Demand
	// urgent is ByUrgency's last answer and seen how many of order it
	// had looked at: the next answer sorts it again (little moves
	// between cycles) rather than sorting every demand from scratch.
	urgent []*Demand
	seen   int
}

// NewBook returns an empty book planning on plan.
func NewBook(cfg Config, plan *Plan) *Book {
	return &Book{cfg: cfg, plan: plan, demands: map[string]*Demand{}}
}

// Plan is the book's plan.
func (b *Book) Plan() *Plan { return b.plan }

// Get returns demand id. Errors wrap ErrNotFound.
func (b *Book) Get(id string) (*Demand, error) {
	d := b.demands[id]
	if d == nil {
		return nil, fmt.Errorf("demand %s: %w", id, ErrNotFound)
	}
	return d, nil
}

// List returns every demand in submission order.
func (b *Book) List() []*Demand {
	out := make([]*Demand, 0, len(b.order))
	for _, id := range b.order {
		out = append(out, b.demands[id])
	}
	return out
}

// ByUrgency returns the demands not final in the order capacity should
// go to them: strict starts first, then by planned start, then by
// submission.
func (b *Book) ByUrgency() []*Demand {
	out := make([]*Demand, 0, len(b.urgent)+len(b.order)-b.seen)
	for _, d := range b.urgent {
		if !d.State.Final() {
			out = append(out, d)
		}
	}
	for _, id := range b.order[b.seen:] {
		if d := b.demands[id]; !d.State.Final() {
			out = append(out, d)
		}
	}
	b.seen = len(b.order)
	// Insertion sort: linear on the last order, where few starts moved.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && moreUrgent(out[j], out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	b.urgent = out
	return slices.Clone(out)
}

// moreUrgent orders ByUrgency: strict starts first, then by planned
// start, then by submission.
func moreUrgent(x, y *Demand) bool {
	if x.timing.StartStrict != y.timing.StartStrict {
		return x.timing.StartStrict
	}
	if c := x.Start.Compare(y.Start); c != 0 {
		return c < 0
	}
	return x.seq < y.seq
}

// Restore puts back demands a store kept (in submission order), booking
// the plans of those not final.
func (b *Book) Restore(ds []*Demand) error {
	slices.SortStableFunc(ds, func(x, y *Demand) int { return x.Submitted.Compare(y.Submitted) })
	for _, d := range ds {
		if err := d.Restore(); err != nil {
			return err
		}
		d.seq = len(b.order)
		b.demands[d.ID] = d
		b.order = append(b.order, d.ID)
		if !d.State.Final() {
			b.live = append(b.live, d)
		}
		if !d.State.Final() && len(d.Placement) > 0 {
			b.plan.Book(d.ID, d.spec.Resources, Placement{Start: d.Start, End: d.End, Slots: d.Placement})
		}
	}
	return nil
}

// Validate checks a batch against the book without changing anything:
// IDs new and distinct, OrderBy naming known demands or demands of the
// batch and free of cycles, timing resolvable at now, and each demand
// able to fit the cluster at all. Errors wrap ErrInvalid, ErrExist or
// ErrNeverFits and name the demand and field.
func (b *Book) Validate(now time.Time, specs []*Spec) error {
	batch := map[string]*Spec{}
	for _, s := range specs {
		id := s.Time.DemandID
		if batch[id] != nil {
			return fmt.Errorf("DemandID: %q: %w (twice in the batch)", id, ErrExist)
		}
		if b.demands[id] != nil {
			if _, same := b.Same(s); !same {
				return fmt.Errorf("DemandID: %q: %w with another document (PUT /demands/%s changes it)", id, ErrExist, id)
			}
			continue // resubmitted as it is: Submit returns the stored one
		}
		batch[id] = s
	}
	for _, s := range specs {
		if s.Time.OrderBy == nil {
			continue
		}
		for _, p := range s.Time.OrderBy.IDs() {
			if b.demands[p] == nil && batch[p] == nil {
				return fmt.Errorf("%w: demand %s: OrderBy: %q: no such demand", ErrInvalid, s.Time.DemandID, p)
			}
		}
	}
	if cyc := findCycle(specs, batch); cyc != nil {
		return fmt.Errorf("%w: OrderBy: cycle %s", ErrInvalid, strings.Join(cyc, " → "))
	}
	for _, s := range specs {
		if batch[s.Time.DemandID] != s {
			continue // resubmitted as it is
		}
		if err := b.admissible(now, s); err != nil {
			return err
		}
	}
	return nil
}

// admissible checks that s resolves at now and can fit the cluster at
// all. Errors wrap ErrInvalid.
func (b *Book) admissible(now time.Time, s *Spec) error {
	if _, err := s.Resolve(now); err != nil {
		return fmt.Errorf("demand %s: %w", s.Time.DemandID, err)
	}
	if err := b.plan.CanEverFit(s.Resources, s.Tasks); err != nil {
		return fmt.Errorf("%w: demand %s: Resources: %v", ErrInvalid, s.Time.DemandID, err)
	}
	return nil
}

// Same returns the stored demand of s's ID and reports whether s is its
// document as it stands (canonically equal: the same fields, framework
// and role): a resubmission that changes nothing.
func (b *Book) Same(s *Spec) (*Demand, bool) {
	d := b.demands[s.Time.DemandID]
	if d == nil {
		return nil, false
	}
	doc, err := s.MarshalJSON()
	return d, err == nil && bytes.Equal(doc, d.Doc)
}

// findCycle returns a cycle of OrderBy edges inside the batch (existing
// demands cannot close one: they never name a later demand).
func findCycle(specs []*Spec, batch map[string]*Spec) []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var visit func(id string) []string
	visit = func(id string) []string {
		color[id] = grey
		stack = append(stack, id)
		if s := batch[id]; s != nil && s.Time.OrderBy != nil {
			for _, p := range s.Time.OrderBy.IDs() {
				if batch[p] == nil {
					continue
				}
				switch color[p] {
				case grey:
					i := slices.Index(stack, p)
					return append(slices.Clone(stack[i:]), p)
				case white:
					if c := visit(p); c != nil {
						return c
					}
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[id] = black
		return nil
	}
	for _, s := range specs {
		if color[s.Time.DemandID] == white {
			if c := visit(s.Time.DemandID); c != nil {
				return c
			}
		}
	}
	return nil
}

// Submit validates a batch (Validate; nothing is added when it fails),
// then adds each demand NEW and admits it: ACCEPTED with a plan, ACCEPTED
// waiting for its OrderBy, or FAILED at once (a strict demand the plan
// cannot hold: not allocatable in time). A document resubmitted as it
// stands (Same) is returned as stored, with no change.
func (b *Book) Submit(now time.Time, specs []*Spec) ([]*Demand, []Change, error) {
	if err := b.Validate(now, specs); err != nil {
		return nil, nil, err
	}
	var out []*Demand
	var changes []Change
	for _, s := range specs {
		if d, same := b.Same(s); same {
			out = append(out, d) // idempotent: the stored demand, unchanged
			continue
		}
		doc, err := s.MarshalJSON()
		if err != nil {
			return nil, nil, fmt.Errorf("demand %s: %w", s.Time.DemandID, err)
		}
		t, _ := s.Resolve(now) // checked by Validate
		d := &Demand{ID: s.Time.DemandID, Doc: doc, Framework: s.Framework, Role: s.Role, State: New, Submitted: now, spec: s, timing: t}
		d.seq = len(b.order)
		b.demands[d.ID] = d
		b.order = append(b.order, d.ID)
		b.live = append(b.live, d)
		out = append(out, d)
		ev := Event{Kind: EvAdmit, At: now}
		if b.pred(d) == PredDone {
			ev.Plan, ev.Err = b.place(d, now)
		}
		changes = b.step(changes, d, ev)
	}
	return out, changes, nil
}

// place asks the plan for d and books it.
func (b *Book) place(d *Demand, now time.Time) (*Placement, error) {
	pl, err := b.plan.Place(Request{ID: d.ID, Per: d.spec.Resources, Tasks: d.spec.Tasks, Gang: d.spec.Gang, Timing: d.timing, Now: now, Relaxed: d.Relaxed, Lead: b.cfg.Lead})
	if err != nil {
		return nil, err
	}
	b.plan.Book(d.ID, d.spec.Resources, pl)
	return &pl, nil
}

func (b *Book) step(changes []Change, d *Demand, ev Event) []Change {
	t := d.Step(ev, b.cfg)
	if t == nil {
		return changes
	}
	if t.To.Final() {
		b.plan.Release(d.ID)
	}
	return append(changes, Change{Demand: d, Transition: *t})
}

// pred says where d's OrderBy stands.
func (b *Book) pred(d *Demand) Pred {
	ob := d.spec.Time.OrderBy
	if ob == nil {
		return PredDone
	}
	state := func(id string) State {
		if p := b.demands[id]; p != nil {
			return p.State
		}
		return Failed
	}
	if ob.Satisfied(func(id string) bool { return state(id) == Finished }) {
		return PredDone
	}
	if !ob.Satisfied(func(id string) bool { return state(id) != Failed }) {
		return PredFailed
	}
	return PredWaiting
}

// Tick steps every demand at now, in submission order, placing ACCEPTED
// demands whose predecessors just finished. Changes cascade within one
// tick (a failure fails its successors at once).
func (b *Book) Tick(now time.Time) []Change {
	b.live = slices.DeleteFunc(b.live, func(d *Demand) bool { return d.State.Final() })
	var changes []Change
	for again := true; again; {
		again = false
		for _, d := range b.live {
			if d.State.Final() {
				continue
			}
			p := b.pred(d)
			if d.State == Accepted && p == PredDone && d.Start.IsZero() {
				pl, err := b.place(d, now)
				changes = b.step(changes, d, Event{Kind: EvPlan, At: now, Plan: pl, Err: err})
			}
			n := len(changes)
			changes = b.step(changes, d, Event{Kind: EvTick, At: now, Pred: p})
			if len(changes) > n && changes[len(changes)-1].To.Final() {
				again = true
			}
		}
	}
	return changes
}

// Held reports an allocation opportunity of demand id: held tasks' worth
// is held for it now.
func (b *Book) Held(id string, held int, now time.Time) ([]Change, error) {
	return b.event(id, Event{Kind: EvHeld, At: now, Held: held})
}

// Claim reports that demand id's framework launched on its resources.
func (b *Book) Claim(id string, now time.Time) ([]Change, error) {
	return b.event(id, Event{Kind: EvClaim, At: now})
}

// Ended reports that every task of demand id ended (ok: all finished).
func (b *Book) Ended(id string, ok bool, msg string, now time.Time) ([]Change, error) {
	return b.event(id, Event{Kind: EvEnded, At: now, OK: ok, Message: msg})
}

// HandOverLost reports that part of demand id's hand-over cannot
// complete (msg says why): an ALLOCATED or MONITORING demand fails
// (hand-over failed) and its bookings are released. The driver reports
// it only for demands handed over whole (WholeHandOver).
func (b *Book) HandOverLost(id, msg string, now time.Time) ([]Change, error) {
	return b.event(id, Event{Kind: EvHandOverLost, At: now, Message: msg})
}

// WholeHandOver reports whether d is handed over whole, all its tasks at
// once: a gang, or a strict start.
func (d *Demand) WholeHandOver() bool { return d.spec.Gang || d.timing.StartStrict }

// Replan re-places an ALLOCATING demand at its planned start when its
// placement no longer fits the plan (an agent of it lost its capacity:
// it left), on agents with room then and now (DRF's load and other
// demands' holds count). It reports whether the placement changed; a
// demand that still fits, or finds no room, is left as it is (its
// hand-over then decides).
func (b *Book) Replan(id string, now time.Time) bool {
	d := b.demands[id]
	if d == nil || d.State != Allocating || len(d.Placement) == 0 || d.fitGen == b.plan.gen {
		return false
	}
	if b.plan.Fits(d.ID, d.spec.Resources, d.Placement, d.Start, d.End) {
		d.fitGen = b.plan.gen // it fits until an agent's capacity shrinks
		return false
	}
	start := maxTime(d.Start, now)
	t := d.timing
	t.Start, t.StartStrict = []timespec.Window{{From: start, To: start}}, true
	pl, err := b.plan.Place(Request{ID: d.ID, Per: d.spec.Resources, Tasks: d.spec.Tasks, Gang: d.spec.Gang, Timing: t, Now: now, Loaded: true})
	if err != nil {
		return false
	}
	b.plan.Book(d.ID, d.spec.Resources, pl)
	d.place(&pl)
	d.fitGen = b.plan.gen
	return true
}

// Forget removes demand id from the book as if it had never been
// submitted: its bookings go back to the plan. The master forgets a
// submission its registry could not record, and tells the client to
// submit it again (an identical document is then admitted anew; if the
// record landed after all and a new leader restored it, it is that
// demand's resubmission: Same). Errors wrap ErrNotFound.
func (b *Book) Forget(id string) error {
	if _, err := b.Get(id); err != nil {
		return err
	}
	b.plan.Release(id)
	d := b.demands[id]
	delete(b.demands, id)
	if i := slices.Index(b.order, id); i >= 0 {
		b.order = slices.Delete(b.order, i, i+1)
		if i < b.seen {
			b.seen--
		}
	}
	b.live = slices.DeleteFunc(b.live, func(x *Demand) bool { return x == d })
	b.urgent = slices.DeleteFunc(b.urgent, func(x *Demand) bool { return x == d })
	return nil
}

// Move moves n of ALLOCATING demand id's tasks not handed over from
// agent from to agent to, keeping its span, when the plan has room for
// them there (the driver moves a strict start's tasks whose capacity
// would cost more work to reclaim where they are booked). It reports
// whether it moved them.
func (b *Book) Move(id, from, to string, n int) bool {
	d := b.demands[id]
	if d == nil || d.State != Allocating || n <= 0 || from == to {
		return false
	}
	slots := slices.Clone(d.Placement)
	i := slices.IndexFunc(slots, func(s Slot) bool { return s.Agent == from })
	if i < 0 || slots[i].Unhanded() < n {
		return false
	}
	slots[i].Tasks -= n
	if slots[i].Tasks == 0 {
		slots = slices.Delete(slots, i, i+1)
	}
	if j := slices.IndexFunc(slots, func(s Slot) bool { return s.Agent == to }); j >= 0 {
		slots[j].Tasks += n
	} else {
		slots = append(slots, Slot{Agent: to, Tasks: n})
		slices.SortFunc(slots, func(x, y Slot) int { return strings.Compare(x.Agent, y.Agent) })
	}
	if !b.plan.Fits(id, d.spec.Resources, slots, d.Start, d.End) {
		return false
	}
	pl := Placement{Start: d.Start, End: d.End, Slots: slots}
	b.plan.Book(id, d.spec.Resources, pl)
	d.place(&pl)
	d.fitGen = b.plan.gen
	return true
}

// Cancel fails demand id (cancelled). Errors wrap ErrNotFound, or
// ErrInvalid when it has already ended.
func (b *Book) Cancel(id, msg string, now time.Time) ([]Change, error) {
	d, err := b.Get(id)
	if err != nil {
		return nil, err
	}
	if d.State.Final() {
		return nil, fmt.Errorf("%w: demand %s is already %s", ErrInvalid, id, d.State)
	}
	return b.event(id, Event{Kind: EvCancel, At: now, Message: msg})
}

// Postpone re-places a loose demand still ALLOCATING after its planned
// start at now, if the plan has room now, so that it never runs over
// capacity the plan gave to others; it reports whether the placement
// changed (the driver then releases holds on agents no longer in it).
// Strict and other demands are left alone.
func (b *Book) Postpone(id string, now time.Time) bool {
	d := b.demands[id]
	if d == nil || d.State != Allocating || d.timing.StartStrict || !now.After(d.Start) {
		return false
	}
	return b.placeNow(d, now)
}

// placeNow moves d's booking to start at now: on the same agents when the
// plan has room there beside DRF's current load (holds stay useful), else
// wherever it has that room now (one probe, not a search), else on the
// same agents when the plan alone has room there from now on (its holds
// wait for DRF's tasks to end), else at the earliest later instant the
// plan has room for it (marked Late). It reports whether the agents
// changed. Starting now, the load counts: an agent the plan alone leaves
// room on may be busy with DRF work for up to the lead, while another
// has the room free this cycle. Its booking always starts when it can be
// handed over: before, one short at its start kept a booking that began
// in the past, and once handed over its tasks ran into capacity the plan
// had given to the demands booked after it.
func (b *Book) placeNow(d *Demand, now time.Time) bool {
	end := time.Time{}
	if d.timing.Length > 0 {
		end = now.Add(d.timing.Length)
	}
	if len(d.Placement) > 0 && b.plan.Fits(d.ID, d.spec.Resources, d.Placement, now, end) && b.plan.roomNow(d.ID, d.spec.Resources, d.Placement, now, end) {
		pl := Placement{Start: now, End: end, Slots: d.Placement}
		b.plan.Book(d.ID, d.spec.Resources, pl)
		d.place(&pl)
		return false
	}
	if now.Sub(d.probed) >= probeEvery {
		d.probed = now
		pl, err := b.plan.Place(Request{ID: d.ID, Per: d.spec.Resources, Tasks: d.spec.Tasks, Gang: d.spec.Gang, Timing: Timing{
			Ref: d.timing.Ref, Start: []timespec.Window{{From: now, To: now}}, StartStrict: true,
			Length: d.timing.Length, Deadline: d.timing.Deadline}, Now: now, Loaded: true})
		if err == nil {
			b.plan.Book(d.ID, d.spec.Resources, pl)
			d.place(&pl)
			return true
		}
	}
	if len(d.Placement) > 0 && b.plan.Fits(d.ID, d.spec.Resources, d.Placement, now, end) {
		pl := Placement{Start: now, End: end, Slots: d.Placement}
		b.plan.Book(d.ID, d.spec.Resources, pl)
		d.place(&pl)
		return false
	}
	t := d.timing
	t.Start = []timespec.Window{{From: now}}
	pl, err := b.plan.Place(Request{ID: d.ID, Per: d.spec.Resources, Tasks: d.spec.Tasks, Gang: d.spec.Gang, Timing: t, Now: now})
	if err != nil {
		return false // no room in the plan at all: it waits as it is
	}
	pl.Late = true
	moved := !sameAgents(pl.Slots, d.Placement)
	b.plan.Book(d.ID, d.spec.Resources, pl)
	d.place(&pl)
	return moved
}

// probeEvery spaces placeNow's search for room elsewhere now (a scan of
// the agents, asking each what DRF and other demands hold there): at the
// master's 1 s interval, a demand short for an hour probed 3,600 times.
const probeEvery = 10 * time.Second

// sameAgents reports whether two placements name the same agents.
func sameAgents(a, b []Slot) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Agent != b[i].Agent {
			return false
		}
	}
	return true
}

// Stretch keeps demand id's booking through now plus its Duration: it is
// handed over (more of it) at now, past its booked start. It reports
// whether the plan has room for that; the driver hands a loose demand
// over only when it has (a task handed late would run into capacity the
// plan gave to demands booked after it).
func (b *Book) Stretch(id string, now time.Time) bool {
	d := b.demands[id]
	if d == nil || d.timing.Length <= 0 || d.End.IsZero() {
		return true
	}
	end := now.Add(d.timing.Length)
	if !end.After(d.End) {
		return true
	}
	if !b.plan.Fits(d.ID, d.spec.Resources, d.Placement, d.End, end) {
		return false
	}
	b.plan.Extend(d.ID, end)
	d.End = end
	return true
}

// Replace re-places a relaxed loose demand (delay scheduling: its ^N
// opportunities passed) now, on whichever agents the plan has room on.
// It reports whether the placement changed. Errors wrap ErrNotFound.
func (b *Book) Replace(id string, now time.Time) (bool, error) {
	d, err := b.Get(id)
	if err != nil {
		return false, err
	}
	if d.State.Final() {
		return false, nil
	}
	return b.placeNow(d, now), nil
}

func (b *Book) event(id string, ev Event) ([]Change, error) {
	d, err := b.Get(id)
	if err != nil {
		return nil, err
	}
	return b.step(nil, d, ev), nil
}

// Update replaces demand id's document with s (the same DemandID) and
// plans it again at now by the rules of Submit: NOW and relative times
// resolve against now, OrderBy may name only demands submitted before
// it, and the demand must be able to fit the cluster. Only a demand not
// handed over yet (ACCEPTED, ALLOCATING) changes; it is ACCEPTED
// afterwards (ALLOCATING again at its lead), with a transition that says
// so. A strict start the plan cannot hold in its new windows refuses
// the update and leaves the demand as it was (ErrNoFit); a loose one
// waits for room. The same document again changes nothing. Errors wrap
// ErrNotFound, ErrInvalid, ErrHandedOver or ErrNoFit.
func (b *Book) Update(now time.Time, s *Spec) (*Demand, []Change, error) {
	id := s.Time.DemandID
	d, err := b.Get(id)
	if err != nil {
		return nil, nil, err
	}
	if _, same := b.Same(s); same {
		return d, nil, nil
	}
	if err := b.updatable(now, d, s); err != nil {
		return nil, nil, err
	}
	doc, err := s.MarshalJSON()
	if err != nil {
		return nil, nil, fmt.Errorf("demand %s: %w", id, err)
	}
	t, _ := s.Resolve(now) // checked by updatable
	old := Placement{Start: d.Start, End: d.End, Slots: d.Placement}
	b.plan.Release(id)
	prev := *d
	d.spec, d.timing, d.Doc, d.Role, d.Updated = s, t, doc, s.Role, now
	d.Opportunities, d.Relaxed, d.Late, d.due = 0, false, false, time.Time{}
	ev := Event{Kind: EvUpdate, At: now}
	if b.pred(d) == PredDone {
		ev.Plan, ev.Err = b.place(d, now)
	}
	if ev.Err != nil && (t.StartStrict || !errors.Is(ev.Err, ErrNoFit)) {
		*d = prev // nothing changes: the old plan stands
		if len(old.Slots) > 0 {
			b.plan.Book(id, d.spec.Resources, old)
		}
		return nil, nil, fmt.Errorf("demand %s: %w", id, ev.Err)
	}
	return d, b.step(nil, d, ev), nil
}

// updatable checks that d may take s as its new document at now.
func (b *Book) updatable(now time.Time, d *Demand, s *Spec) error {
	switch {
	case d.State.Final() || d.State == Allocated || d.State == Monitoring:
		return fmt.Errorf("demand %s is %s: %w; cancel it and submit a new one", d.ID, d.State, ErrHandedOver)
	case s.Framework != d.Framework:
		return fmt.Errorf("%w: demand %s: FrameworkID: %q: the demand belongs to framework %q", ErrInvalid, d.ID, s.Framework, d.Framework)
	}
	if s.Time.OrderBy != nil {
		pos := slices.Index(b.order, d.ID)
		for _, p := range s.Time.OrderBy.IDs() {
			if i := slices.Index(b.order, p); i < 0 || i >= pos {
				return fmt.Errorf("%w: demand %s: OrderBy: %q: not a demand submitted before it", ErrInvalid, d.ID, p)
			}
		}
	}
	return b.admissible(now, s)
}

// AgentGone takes an agent's capacity out of the plan (it left) and
// places again, at now, the demands booked there that have not started
// holding (ACCEPTED: anywhere in their windows) or are holding
// (ALLOCATING: at their planned start, Replan). It returns the IDs of the
// demands that moved; those with no room elsewhere stay, and their
// hand-over decides.
func (b *Book) AgentGone(agent string, now time.Time) []string {
	b.plan.SetAgent(agent, nil)
	var moved []string
	for _, id := range b.order {
		d := b.demands[id]
		if d.State.Final() || !slices.ContainsFunc(d.Placement, func(s Slot) bool { return s.Agent == agent }) {
			continue
		}
		switch d.State {
		case Accepted:
			pl, err := b.plan.Place(Request{ID: d.ID, Per: d.spec.Resources, Tasks: d.spec.Tasks, Gang: d.spec.Gang, Timing: d.timing, Now: now, Lead: b.cfg.Lead})
			if err == nil {
				b.plan.Book(d.ID, d.spec.Resources, pl)
				d.place(&pl)
				moved = append(moved, id)
			}
		case Allocating:
			if b.Replan(id, now) {
				moved = append(moved, id)
			}
		}
	}
	return moved
}
