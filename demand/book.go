package demand

import (
	"fmt"
	"github.com/brimnode/brim/demand/timespec"
	"slices"
	"strings"
	"time"
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
	var out []*Demand
	for _, id := range b.order {
		if d := b.demands[id]; !d.State.Final() {
			out = append(out, d)
		}
	}
	slices.SortStableFunc(out, func(x, y *Demand) int {
		if x.timing.StartStrict != y.timing.StartStrict {
			if x.timing.StartStrict {
				return -1
			}
			return 1
		}
		return x.Start.Compare(y.Start)
	})
	return out
}

// Restore puts back demands a store kept (in submission order), booking
// the plans of those not final.
func (b *Book) Restore(ds []*Demand) error {
	slices.SortStableFunc(ds, func(x, y *Demand) int { return x.Submitted.Compare(y.Submitted) })
	for _, d := range ds {
		if err := d.Restore(); err != nil {
			return err
		}
		b.demands[d.ID] = d
		b.order = append(b.order, d.ID)
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
		if b.demands[id] != nil || batch[id] != nil {
			return fmt.Errorf("DemandID: %q: %w", id, ErrExist)
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
		if _, err := s.Resolve(now); err != nil {
			return fmt.Errorf("demand %s: %w", s.Time.DemandID, err)
		}
		if err := b.plan.CanEverFit(s.Resources, s.Tasks); err != nil {
			return fmt.Errorf("%w: demand %s: Resources: %v", ErrInvalid, s.Time.DemandID, err)
		}
	}
	return nil
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
// cannot hold: not allocatable in time).
func (b *Book) Submit(now time.Time, specs []*Spec) ([]*Demand, []Change, error) {
	if err := b.Validate(now, specs); err != nil {
		return nil, nil, err
	}
	var out []*Demand
	var changes []Change
	for _, s := range specs {
		doc, err := s.MarshalJSON()
		if err != nil {
			return nil, nil, fmt.Errorf("demand %s: %w", s.Time.DemandID, err)
		}
		t, _ := s.Resolve(now) // checked by Validate
		d := &Demand{ID: s.Time.DemandID, Doc: doc, Framework: s.Framework, Role: s.Role, State: New, Submitted: now, spec: s, timing: t}
		b.demands[d.ID] = d
		b.order = append(b.order, d.ID)
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
	var changes []Change
	for again := true; again; {
		again = false
		for _, id := range b.order {
			d := b.demands[id]
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
	if d == nil || d.State != Allocating || len(d.Placement) == 0 || b.plan.Fits(d.ID, d.spec.Resources, d.Placement, d.Start, d.End) {
		return false
	}
	start := maxTime(d.Start, now)
	t := d.timing
	t.Start, t.StartStrict = []timespec.Window{{From: start}}, true
	pl, err := b.plan.Place(Request{ID: d.ID, Per: d.spec.Resources, Tasks: d.spec.Tasks, Gang: d.spec.Gang, Timing: t, Now: now, Loaded: true})
	if err != nil {
		return false
	}
	b.plan.Book(d.ID, d.spec.Resources, pl)
	d.place(&pl)
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
// wherever it has that room now (one probe, not a search). It reports
// whether the agents changed. Starting now, the load counts: an agent the
// plan alone leaves room on may be busy with DRF work for up to the
// lead, while another has the room free this cycle.
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
	pl, err := b.plan.Place(Request{ID: d.ID, Per: d.spec.Resources, Tasks: d.spec.Tasks, Gang: d.spec.Gang, Timing: Timing{
		Ref: d.timing.Ref, Start: []timespec.Window{{From: now}}, StartStrict: true,
		Length: d.timing.Length, Deadline: d.timing.Deadline}, Now: now, Loaded: true})
	if err != nil {
		return false
	}
	b.plan.Book(d.ID, d.spec.Resources, pl)
	d.place(&pl)
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
