package demand

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/brimnode/brim/demand/timespec"
	"github.com/brimnode/brim/resources"
)

// dims are the scalars a plan tracks.
var dims = [...]string{resources.CPUs, resources.Mem, resources.Disk, resources.NetBandwidth}

type vec [len(dims)]int64

func toVec(r resources.Resources) vec {
	var v vec
	for i, n := range dims {
		v[i] = int64(r.Scalar(n))
	}
	return v
}

// fits is how many units of per fit in free.
func fits(free, per vec) int {
	n := -1
	for i := range free {
		if per[i] <= 0 {
			continue
		}
		k := int(max(free[i], 0) / per[i])
		if n < 0 || k < n {
			n = k
		}
	}
	if n < 0 {
		return 1 << 30
	}
	return n
}

// booking is a demand's claim on an agent over [from, to) (to zero: open).
type booking struct {
	id       string
	from, to time.Time
	use      vec
}

type agentPlan struct {
	id    string
	total vec
	books []booking
}

// peak is the most the agent's bookings use at once over [from, to).
// free is what the bookings over [from, to), skip's own aside, leave of
// the agent, less busy (what is in use now beyond them; zero: nothing).
func (a *agentPlan) free(from, to time.Time, skip string, busy vec) vec {
	pk := a.peak(from, to, skip)
	var out vec
	for d := range out {
		out[d] = a.total[d] - pk[d] - busy[d]
	}
	return out
}

func (a *agentPlan) peak(from, to time.Time, skip string) vec {
	var best vec
	probe := func(t time.Time) {
		var u vec
		for i := range a.books {
			b := &a.books[i]
			if b.id != skip && !b.from.After(t) && (b.to.IsZero() || b.to.After(t)) {
				for d := range u {
					u[d] += b.use[d]
				}
			}
		}
		for d := range best {
			best[d] = max(best[d], u[d])
		}
	}
	probe(from)
	for i := range a.books {
		if b := &a.books[i]; b.from.After(from) && (to.IsZero() || b.from.Before(to)) {
			probe(b.from)
		}
	}
	return best
}

// Plan is the time-indexed plan of future capacity: per agent, the demands
// booked on it and when. Capacity outside bookings belongs to the DRF
// allocator. Not safe for concurrent use.
type Plan struct {
	agents map[string]*agentPlan
	order  []string // agent IDs, sorted by sortedIDs when unsorted is set
	// unsorted: agents were appended to order since it was last sorted.
	// Sorted insertion was O(agents) each: with random agent IDs (UUIDs)
	// 50,000 registrations at once moved 10 GB.
	unsorted bool
	where    map[string][]string
	next     int                                            // where the next scan of agents starts
	loadOf   func(agent string) resources.Resources         // SetLoadFunc
	heldOf   func(agent, except string) resources.Resources // SetHeldFunc
	fixedOf  func(agent string) resources.Resources         // SetFixedLoadFunc
	spread   int                                            // SetSpread
	// freeNowOf: SetFreeNowFunc; freeOnOf: SetFreeOnFunc.
	freeNowOf func(id string, per resources.Resources) map[string]resources.Resources
	freeOnOf  func(id, agent string) resources.Resources
	// gen counts the changes after which a booking that fitted may no
	// longer fit: an agent's capacity shrank or went, or bookings were
	// restored without a check (Book.Replan re-checks a placement only
	// when it moved on).
	gen uint64
}

// NewPlan returns an empty plan.
func NewPlan() *Plan {
	return &Plan{agents: map[string]*agentPlan{}, where: map[string][]string{}, gen: 1}
}

// SetAgent adds an agent or changes its capacity (its unreserved,
// non-revocable scalars).
func (p *Plan) SetAgent(id string, total resources.Resources) {
	a := p.agents[id]
	if a == nil {
		a = &agentPlan{id: id}
		p.agents[id] = a
		p.order = append(p.order, id)
		p.unsorted = true
	}
	v := toVec(total.Unreserved().NonRevocable())
	for d := range v {
		if v[d] < a.total[d] {
			p.gen++
			break
		}
	}
	a.total = v
}

// SetLoadFunc gives the plan a way to learn what DRF frameworks have on
// an agent now (its unreserved non-revocable scalars in offers and tasks,
// not counting demands' own): work that may still run at a start less
// than the hold lead away (Request.Lead). The plan asks only while placing
// such a start, only about agents that fit it otherwise; nil (the
// default) counts no load.
func (p *Plan) SetLoadFunc(f func(agent string) resources.Resources) { p.loadOf = f }

// SetFixedLoadFunc gives the plan a way to learn what of DRF's load on
// an agent cannot be reclaimed for a strict start (the driver preempts the
// rest: docs/demands.md). A strict start within the lead that finds no
// room beside the whole load is then placed beside this part of it,
// rather than refused; nil (the default): the whole load counts.
func (p *Plan) SetFixedLoadFunc(f func(agent string) resources.Resources) { p.fixedOf = f }

// SetFreeNowFunc gives the plan a quicker way to learn, for a start now
// (Request.Loaded), where demand id has room now: the agents where at
// least one copy of per is free (unallocated, or held by id itself), with
// what is free there. With it, a start now is placed among those agents
// only, without asking each agent's load and holds (SetLoadFunc,
// SetHeldFunc); nil (the default): it asks them.
func (p *Plan) SetFreeNowFunc(f func(id string, per resources.Resources) map[string]resources.Resources) {
	p.freeNowOf = f
}

// SetFreeOnFunc gives the plan a way to learn what is free for demand
// id on one agent now (unallocated, or held by id itself): a loose
// demand short after its start asks, every cycle, whether its own
// agents have room now, and asking SetFreeNowFunc's question about every
// agent for that was most of a planned day's time at 1,000 agents. nil
// (the default): SetFreeNowFunc answers.
func (p *Plan) SetFreeOnFunc(f func(id, agent string) resources.Resources) { p.freeOnOf = f }

// SetSpread has placements take at most 1/share of an agent's capacity
// for one demand (at least one task) wherever the scan finds enough room
// that way, the whole agent only when it does not (0, the default: no
// cap, best fit). A slot must be freed by the start: where DRF tasks of
// heavy-tailed durations run, a quarter of an agent frees within a lead
// far more often than a whole one, which needs its longest task to end
// or be preempted.
func (p *Plan) SetSpread(share int) { p.spread = share }

// SetHeldFunc gives the plan a way to learn what demands other than
// except hold on an agent now. A start now (Request.Loaded) cannot use
// it even where those demands' bookings begin after its end: it is held
// until then. nil (the default) counts no holds.
func (p *Plan) SetHeldFunc(f func(agent, except string) resources.Resources) { p.heldOf = f }

// busyNow is what is in use on the agent now beyond the bookings: DRF's
// load and, for a start now (held), what other demands than id hold
// there. ok is false when the plan has no way to know.
func (p *Plan) busyNow(agent, id string, held, fixed bool) (v vec, ok bool) {
	switch {
	case fixed && p.fixedOf != nil:
		v, ok = toVec(p.fixedOf(agent)), true
	case p.loadOf != nil:
		v, ok = toVec(p.loadOf(agent)), true
	}
	if held && p.heldOf != nil {
		h := toVec(p.heldOf(agent, id))
		for d := range v {
			v[d] += h[d]
		}
		ok = true
	}
	return v, ok
}

// RemoveAgent drops an agent (its bookings go with it).
func (p *Plan) RemoveAgent(id string) {
	p.gen++
	delete(p.agents, id)
	if i, ok := slices.BinarySearch(p.sortedIDs(), id); ok {
		p.order = slices.Delete(p.order, i, i+1)
	}
}

// sortedIDs is the agents' IDs in order: scans visit them the same way
// whatever the order they came in.
func (p *Plan) sortedIDs() []string {
	if p.unsorted {
		slices.Sort(p.order)
		p.unsorted = false
	}
	return p.order
}

// Request is what Place is asked to place.
type Request struct {
	ID      string
	Per     resources.Resources
	Tasks   int
	Gang    bool
	Timing  Timing
	Now     time.Time
	Relaxed bool
	// Lead: a strict start less than this far from Now is placed only
	// where the agents' current DRF load (SetLoad) leaves room too: the
	// capacity is held from Now on, and DRF work already running there
	// may not end before the start.
	Lead time.Duration
	// Loaded: a start now; count the agents' current DRF load and what
	// other demands hold there (SetHeldFunc), whatever the lead.
	Loaded bool
}

// CanEverFit checks that tasks × per fit the cluster's capacity with
// nothing booked. Errors wrap ErrNeverFits.
func (p *Plan) CanEverFit(per resources.Resources, tasks int) error {
	v := toVec(per)
	capTotal := 0
	for _, id := range p.sortedIDs() {
		if capTotal += min(fits(p.agents[id].total, v), tasks); capTotal >= tasks {
			return nil
		}
	}
	return fmt.Errorf("%w: %d tasks of %s; the cluster holds %d at most", ErrNeverFits, tasks, per, capTotal)
}

// maxCandidates bounds the start times a loose placement tries.
const maxCandidates = 64

// enough: a scan of agents stops once it has found room for this many
// times the tasks asked for (and seen scanMin agents): enough choice for
// the deadline and best-fit order, without visiting every agent of a
// large cluster. Scans start where the last one stopped, spreading
// demands over the cluster.
const (
	enough  = 2
	scanMin = 16
)

// Place finds where and when the plan can hold r, without booking it: at
// the earliest instant of its start windows where it fits (a strict
// start inside its windows, and early enough to meet a strict deadline;
// a loose one, marked Late, after them if need be). The instants worth
// trying are the window starts and the ends of bookings (capacity only
// ever frees up there). Errors wrap ErrNeverFits or ErrNoFit.
func (p *Plan) Place(r Request) (Placement, error) {
	if err := p.CanEverFit(r.Per, r.Tasks); err != nil {
		return Placement{}, err
	}
	per := toVec(r.Per)
	ws := r.Timing.Start
	first := maxTime(ws[0].From, r.Now)
	for _, t := range p.candidates(r, first) {
		if r.Timing.StartStrict && !p.strictOK(r, t) {
			continue
		}
		if pl, ok := p.placeAt(t, r, per, false); ok {
			pl.Late = !inWindows(ws, t)
			return pl, nil
		}
	}
	if r.Timing.StartStrict && p.fixedOf != nil && !r.Loaded {
		// No room beside DRF's whole load within the lead: beside what
		// of it cannot be reclaimed, the rest preempted at the start.
		for _, t := range p.candidates(r, first) {
			if t.Sub(r.Now) >= r.Lead || !p.strictOK(r, t) {
				continue
			}
			if pl, ok := p.placeAt(t, r, per, true); ok {
				return pl, nil
			}
		}
	}
	if r.Timing.StartStrict {
		return Placement{}, fmt.Errorf("%w: %d tasks of %s in %s", ErrNoFit, r.Tasks, r.Per, windowsText(ws, r.Now))
	}
	return Placement{}, fmt.Errorf("%w: %d tasks of %s: no capacity in the plan", ErrNoFit, r.Tasks, r.Per)
}

// candidates are the start times worth trying for r from first on, in
// order: the window starts and the ends of bookings (inside the windows
// only, for a strict start), at most maxCandidates.
func (p *Plan) candidates(r Request, first time.Time) []time.Time {
	ws := r.Timing.Start
	cands := []time.Time{}
	for _, w := range ws {
		if w.To.IsZero() || !w.To.Before(first) {
			cands = append(cands, maxTime(w.From, first))
		}
	}
	for _, a := range p.agents {
		for i := range a.books {
			if t := a.books[i].to; !t.IsZero() && t.After(first) && (!r.Timing.StartStrict || inWindows(ws, t)) {
				cands = append(cands, t)
			}
		}
	}
	slices.SortFunc(cands, func(a, b time.Time) int { return a.Compare(b) })
	cands = slices.CompactFunc(cands, func(a, b time.Time) bool { return a.Equal(b) })
	if len(cands) > maxCandidates {
		cands = cands[:maxCandidates]
	}
	return cands
}

// strictOK reports whether a strict start at t is one the demand takes:
// inside its windows, and leaving its Duration room before a strict
// deadline.
func (p *Plan) strictOK(r Request, t time.Time) bool {
	if !inWindows(r.Timing.Start, t) {
		return false
	}
	tm := r.Timing
	return !tm.DeadlineStrict || tm.Length <= 0 || tm.Deadline.IsZero() || !t.Add(tm.Length).After(tm.Deadline)
}

// windowsText names the windows of a start for an error.
func windowsText(ws []timespec.Window, now time.Time) string {
	var parts []string
	for _, w := range ws {
		from, to := "…", "…"
		if !w.From.IsZero() {
			from = maxTime(w.From, now).UTC().Format(time.RFC3339)
		}
		if !w.To.IsZero() {
			to = w.To.UTC().Format(time.RFC3339)
		}
		parts = append(parts, "["+from+", "+to+"]")
	}
	return strings.Join(parts, " ∪ ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

func inWindows(ws []timespec.Window, t time.Time) bool {
	for _, w := range ws {
		if w.Contains(t) {
			return true
		}
	}
	return false
}

// placeAt places r starting at s: every task at once. Agents that stay
// free through the deadline come first (the deadline steers the choice:
// a demand there can overrun its length and still finish in time), then
// the fullest (best fit, leaving large holes for large demands).
func (p *Plan) placeAt(s time.Time, r Request, per vec, fixed bool) (Placement, bool) {
	end := time.Time{}
	if r.Timing.Length > 0 {
		end = s.Add(r.Timing.Length)
	}
	loaded := r.Loaded || r.Timing.StartStrict && s.Sub(r.Now) < r.Lead
	var cs []placeCand
	total := 0 // tasks that fit within the caps
	order := p.sortedIDs()
	var freeNow map[string]resources.Resources
	if r.Loaded && p.freeNowOf != nil {
		freeNow = p.freeNowOf(r.ID, r.Per)
		order = sortedKeys(freeNow) // few agents: all of them are looked at
	}
	n := len(order)
	start := 0
	if n > 0 && freeNow == nil {
		start = p.next % n
	}
	for i := 0; i < n; i++ {
		if total >= enough*r.Tasks && i >= scanMin && freeNow == nil {
			p.next = start + i
			break
		}
		id := order[(start+i)%n]
		a := p.agents[id]
		if a == nil {
			continue
		}
		n := min(fits(a.free(s, end, r.ID, vec{}), per), r.Tasks)
		switch {
		case n > 0 && freeNow != nil:
			n = min(n, fits(toVec(freeNow[id]), per))
		case n > 0 && loaded:
			if busy, ok := p.busyNow(id, r.ID, r.Loaded, fixed); ok {
				n = min(fits(a.free(s, end, r.ID, busy), per), r.Tasks)
			}
		}
		if n == 0 {
			continue
		}
		c := placeCand{id: id, n: n, cap: p.spreadCap(a, per, n), free: n}
		if dl := r.Timing.Deadline; !dl.IsZero() && (end.IsZero() || dl.After(end)) {
			c.through = fits(a.free(s, dl, r.ID, vec{}), per) >= n
		}
		cs = append(cs, c)
		total += c.cap
	}
	all := 0
	for _, c := range cs {
		all += c.n
	}
	if all < r.Tasks {
		return Placement{}, false
	}
	return Placement{Start: s, End: end, Slots: slotsOf(cs, r.Tasks)}, true
}

// placeCand is an agent placeAt may use: n tasks fit there, cap of them
// within the spread cap; through: it stays free through the deadline.
type placeCand struct {
	id      string
	n, cap  int
	through bool
	free    int
}

// spreadCap is how many of n tasks of per an agent takes within the
// spread cap (SetSpread): at least one, n without a cap.
func (p *Plan) spreadCap(a *agentPlan, per vec, n int) int {
	if p.spread <= 0 {
		return n
	}
	var share vec
	for d := range share {
		share[d] = a.total[d] / int64(p.spread)
	}
	return min(n, max(1, fits(share, per)))
}

// slotsOf spreads tasks over the candidates, those free through the
// deadline first, then the fullest: within the caps first, then up to
// what fits when the caps leave tasks over. The slots are sorted by agent.
func slotsOf(cs []placeCand, tasks int) []Slot {
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].through != cs[j].through {
			return cs[i].through
		}
		return cs[i].free < cs[j].free
	})
	// Within the caps first (spread), then up to what fits when the caps
	// leave tasks over.
	take := make([]int, len(cs))
	left := tasks
	for _, limit := range []func(c placeCand) int{func(c placeCand) int { return c.cap }, func(c placeCand) int { return c.n }} {
		for i, c := range cs {
			k := min(limit(c)-take[i], left)
			take[i] += k
			left -= k
		}
	}
	var slots []Slot
	for i, c := range cs {
		if take[i] > 0 {
			slots = append(slots, Slot{Agent: c.id, Tasks: take[i]})
		}
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i].Agent < slots[j].Agent })
	return slots
}

// Fits reports whether slots of per fit over [from, to) (to zero: open)
// besides every booking but demand id's own.
func (p *Plan) Fits(id string, per resources.Resources, slots []Slot, from, to time.Time) bool {
	v := toVec(per)
	for _, s := range slots {
		a := p.agents[s.Agent]
		if a == nil {
			return false
		}
		if fits(a.free(from, to, id, vec{}), v) < s.Tasks {
			return false
		}
	}
	return true
}

// Room is how many tasks of per demand id could have on agent over
// [from, to) (to zero: open) beside every other booking: its own
// booking there aside, so what it has there counts in the answer.
func (p *Plan) Room(id string, per resources.Resources, agent string, from, to time.Time) int {
	a := p.agents[agent]
	if a == nil {
		return 0
	}
	return fits(a.free(from, to, id, vec{}), toVec(per))
}

// Agents is the plan's agents, sorted (the plan's own slice: not to be changed).
func (p *Plan) Agents() []string { return p.sortedIDs() }

// roomNow reports whether the slots' tasks not yet handed over fit beside
// what is busy there now (busyNow) as well as the bookings over [from,
// to) (always, when the plan cannot know what is busy).
func (p *Plan) roomNow(id string, per resources.Resources, slots []Slot, from, to time.Time) bool {
	v := toVec(per)
	var freeNow map[string]resources.Resources
	if p.freeNowOf != nil && p.freeOnOf == nil {
		freeNow = p.freeNowOf(id, per)
	}
	for _, s := range slots {
		a := p.agents[s.Agent]
		if a == nil {
			return false
		}
		if p.freeOnOf != nil {
			if min(fits(a.free(from, to, id, vec{}), v), fits(toVec(p.freeOnOf(id, s.Agent)), v)) < s.Unhanded() {
				return false
			}
			continue
		}
		if freeNow != nil {
			if min(fits(a.free(from, to, id, vec{}), v), fits(toVec(freeNow[s.Agent]), v)) < s.Unhanded() {
				return false
			}
			continue
		}
		busy, ok := p.busyNow(s.Agent, id, true, false)
		if !ok {
			return true
		}
		if fits(a.free(from, to, id, busy), v) < s.Unhanded() {
			return false
		}
	}
	return true
}

// Book records a placement of demand id (replacing any earlier one).
func (p *Plan) Book(id string, per resources.Resources, pl Placement) {
	p.Release(id)
	v := toVec(per)
	for _, s := range pl.Slots {
		a := p.agents[s.Agent]
		if a == nil { // restored before its agent is back: no capacity yet
			p.SetAgent(s.Agent, nil)
			a = p.agents[s.Agent]
			p.gen++
		}
		var use vec
		for d := range use {
			use[d] = v[d] * int64(s.Tasks)
		}
		a.books = append(a.books, booking{id: id, from: pl.Start, to: pl.End, use: use})
		p.where[id] = append(p.where[id], s.Agent)
	}
}

// Release forgets demand id's bookings.
func (p *Plan) Release(id string) {
	for _, ag := range p.where[id] {
		if a := p.agents[ag]; a != nil {
			a.books = slices.DeleteFunc(a.books, func(b booking) bool { return b.id == id })
		}
	}
	delete(p.where, id)
}

// Extend moves the end of demand id's bookings to end (zero: open): a
// loose demand running past its length keeps its capacity.
func (p *Plan) Extend(id string, end time.Time) {
	for _, ag := range p.where[id] {
		if a := p.agents[ag]; a != nil {
			for i := range a.books {
				if a.books[i].id == id {
					a.books[i].to = end
				}
			}
		}
	}
}
