package demandplan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/resources"
)

// Preemption, as YARN's reservation system does with its preemption
// policy: a strict start's booking is the demand's from the start on.
// When, ReclaimAhead before the start, its hold on an agent is still
// short, what holds the rest is reclaimed in this order:
//
//  1. revocable work on lent capacity (lend/reclaim: it was only ever
//     lent until the start);
//  2. DRF's outstanding offers there (no work is lost);
//  3. DRF tasks of roles above their quota guarantee, youngest first.
//
// Never: a role's guarantee (a task is skipped when taking it would put
// its role below it), a reservation (reserved resources are not the
// plan's), a demand's own tasks (the plan booked them; a loose demand's
// are not preempted either). Tasks that started after the booking are
// younger than those that started before, so they go first; the older
// ones go only when they are not enough: the plan cannot know when a
// task that started before it booked the agent will end (DRF tasks
// declare no duration), and not reclaiming from it would make the
// guarantee depend on what DRF runs, which is what a heavy-tailed
// background breaks.
//
// Where: a short slot moves first to the agent where reclaiming its
// capacity throws away the least work (rebind). A loose start that is
// late reclaims by the same rules, but only work younger than a few
// times its wait (reclaimAge).
//
// Killed tasks get the agents' kill grace (SIGTERM, then SIGKILL); their
// framework is told CONTAINER_PREEMPTED with the demand that needed the
// capacity. What they free comes back when they end, and the demand's
// hold takes it before DRF.

// preempt reclaims for demand d (a strict start, or a late loose one:
// reclaimAge) on agent what its hold there still lacks of want tasks'
// worth, beyond what victims killed for it already will free, taking no
// work older than maxAge.
func (p *Planner) preempt(d *demand.Demand, agent string, want int, maxAge time.Duration, now time.Time) Effects {
	short := shortfall(d.Spec().Resources, want, p.alloc.Held(agent, d.ID))
	for _, x := range p.victims { // a sum: any order
		if x.demand == d.ID && x.agent == agent && !x.revocable {
			short = less(short, x.res)
		}
	}
	if isEmpty(short) {
		return Effects{}
	}
	var eff Effects
	for _, o := range p.cl.Offers(agent) {
		if _, mine := p.offers[o.ID]; mine {
			continue
		}
		r := o.Resources.NonRevocable().Unreserved()
		if !helps(short, r) {
			continue
		}
		eff.Rescind = append(eff.Rescind, o.ID) // given back at once: TopUp holds it
		if short = less(short, r); isEmpty(short) {
			return eff
		}
	}
	msg := fmt.Sprintf("preempted by demand %s: its strict start at %s is booked on agent %s", d.ID, d.Start.UTC().Format(time.RFC3339), agent)
	if !d.Timing().StartStrict {
		msg = fmt.Sprintf("preempted by demand %s: its loose start, due at %s, has waited %s; work younger than %s is reclaimed for it on agent %s",
			d.ID, d.Due().UTC().Format(time.RFC3339), now.Sub(d.Due()), maxAge, agent)
	}
	victims, _ := p.pick(agent, short, maxAge, now)
	for _, t := range victims {
		p.victims[t.ID] = victim{agent: agent, demand: d.ID, res: t.Resources.NonRevocable()}
		eff.Kill = append(eff.Kill, Kill{Task: t.ID, Framework: t.Framework, Agent: agent, Preempted: true, Message: msg})
	}
	return eff
}

// rebind moves, when demand d reclaims (reclaimAge: a strict start from
// ReclaimAhead before it, a late loose one), the tasks still short on
// an agent to another agent whose capacity costs less work to reclaim
// (lossOf: cpus × how long the tasks killed have run), when the plan has
// room there over the demand's span and it costs at most half as much.
// The plan chose the agents when the demand was admitted, maybe hours
// before; under heavy-tailed DRF work the tasks still running there at
// the start are the long ones, and youngest first could then take only
// tasks hours old (the bench: 431 tasks over an hour old were 63 % of
// the work preempted with a 1-minute lead), while elsewhere free
// capacity or tasks a minute old would do. It reports whether the
// placement changed.
func (p *Planner) rebind(d *demand.Demand, maxAge time.Duration, now time.Time) bool {
	if !d.Timing().StartStrict {
		if now.Sub(p.rebound[d.ID]) < rebindEvery {
			return false
		}
		p.rebound[d.ID] = now
	}
	per := d.Spec().Resources
	moved := false
	for _, s := range slices.Clone(d.Placement) {
		want := s.Unhanded()
		if want == 0 || !p.cl.Ready(s.Agent) {
			continue
		}
		have := p.top(d, s.Agent, want)
		if have >= want {
			continue
		}
		short := p.pending(d, s.Agent, shortfall(per, want, p.alloc.Held(s.Agent, d.ID)))
		if isEmpty(short) {
			continue // being reclaimed already
		}
		here := math.Inf(1)
		if vs, ok := p.pick(s.Agent, short, maxAge, now); ok {
			here = lossOf(vs, now)
		}
		if here == 0 {
			continue
		}
		n := want - have
		to, cost := p.cheapest(d, n, s.Agent, maxAge, now)
		if to == "" || cost > here/2 || !p.book.Move(d.ID, s.Agent, to, n) {
			continue
		}
		moved = true
		// What the slot held beyond the tasks it keeps goes back.
		p.alloc.Release(s.Agent, d.ID)
		p.unmarkHeld(d.ID, s.Agent)
		if have > 0 {
			p.top(d, s.Agent, have)
		}
	}
	return moved
}

// anyAge is a reclaim that may take work of any age (a strict start).
const anyAge = time.Duration(math.MaxInt64)

// rebindEvery spaces the moves of a loose start's tasks (each looks at
// up to rebindScan agents): a strict start's are looked at every cycle
// of its reclaim, a loose one may wait long.
const rebindEvery = 10 * time.Second

// reclaimAge reports whether demand d reclaims capacity at now
// (Options.Preempt), and how old the work it may take can be: a strict
// start from ReclaimAhead before it, any work; a loose start once it is
// late, work that started less than looseReclaimFactor times its wait
// ago (its wait counted from when it was due: Demand.Due). A loose
// demand only short of its start waited where the plan put it, maybe
// behind tasks of a heavy tail running for hours, while elsewhere tasks
// a minute old would have freed what it needs; plain DRF, where the
// demands' role is served first, starts it within minutes (the bench:
// p99 loose delay 72-97 min planned, 4-5 min under DRF). The work it
// throws away is bounded by a few times its own delay.
func (p *Planner) reclaimAge(d *demand.Demand, now time.Time) (time.Duration, bool) {
	if !p.opts.Preempt || d.State != demand.Allocating {
		return 0, false
	}
	if d.Timing().StartStrict {
		return anyAge, !now.Before(d.Start.Add(-p.opts.ReclaimAhead))
	}
	wait := now.Sub(d.Due())
	return looseReclaimFactor * wait, wait > 0
}

// looseReclaimFactor: a late loose start may take work that started
// less than this many times its wait ago (reclaimAge). With 1, only
// tasks DRF launched after it was due, and the bench's p99 loose delay
// was 7m11s; with 4, 1m41s, the work preempted the same (seed 1 at a
// tenth of the default size).
const looseReclaimFactor = 4

// rebindScan bounds the agents rebind looks at for one slot of a strict
// start (rebindScanLoose: of a loose one, looked at every rebindEvery
// while it waits): enough to find young work or free capacity on a busy
// cluster, a bounded cost on a large one. Scans start where the last one
// stopped.
const (
	rebindScan      = 64
	rebindScanLoose = 16
)

// cheapest is the agent other than except where n more tasks of d fit
// the plan over its span and reclaiming their capacity costs the least
// work (free capacity and DRF's outstanding offers cost none), with that
// cost; "" when none of those looked at has room.
func (p *Planner) cheapest(d *demand.Demand, n int, except string, maxAge time.Duration, now time.Time) (string, float64) {
	per := d.Spec().Resources
	plan := p.book.Plan()
	agents := plan.Agents()
	best, bestCost := "", math.Inf(1)
	mine := map[string]int{}
	for _, s := range d.Placement {
		mine[s.Agent] = s.Tasks
	}
	scan := rebindScan
	if !d.Timing().StartStrict {
		scan = rebindScanLoose
	}
	for i := 0; i < len(agents) && i < scan; i++ {
		ag := agents[(p.scan+i)%len(agents)]
		if ag == except || !p.cl.Ready(ag) || plan.Room(d.ID, per, ag, d.Start, d.End) < mine[ag]+n {
			continue
		}
		// What it would still lack there with the n more: its slot's
		// tasks there count, less what it holds and what its victims
		// there will free (slots moved there earlier this cycle).
		short := p.pending(d, ag, less(shortfall(per, mine[ag]+n, p.alloc.Held(ag, d.ID)), p.alloc.Free(ag)))
		if isEmpty(short) {
			p.scan += i + 1
			return ag, 0
		}
		if vs, ok := p.pick(ag, short, maxAge, now); ok {
			if c := lossOf(vs, now); c < bestCost {
				best, bestCost = ag, c
			}
		}
	}
	p.scan += scan
	return best, bestCost
}

// drfOffered is what DRF's outstanding offers have on agent (the
// planner's own aside): rescinding them loses no work.
func (p *Planner) drfOffered(agent string) resources.Resources {
	var r resources.Resources
	for _, o := range p.cl.Offers(agent) {
		if _, mine := p.offers[o.ID]; !mine {
			r = r.Add(o.Resources.NonRevocable().Unreserved())
		}
	}
	return r
}

// pending is short less what victims killed for demand d on agent will
// free and what DRF's outstanding offers there have.
func (p *Planner) pending(d *demand.Demand, agent string, short resources.Resources) resources.Resources {
	for _, x := range p.victims { // a sum: any order
		if x.demand == d.ID && x.agent == agent && !x.revocable {
			short = less(short, x.res)
		}
	}
	return less(short, p.drfOffered(agent))
}

// pick chooses the DRF tasks on agent whose ends free short, youngest
// first: not a demand's, not one being killed already, not one on a
// reservation, none that would put its role below its quota guarantee,
// none that has run longer than maxAge (anyAge: no limit). ok is false
// when they do not free all of short.
func (p *Planner) pick(agent string, short resources.Resources, maxAge time.Duration, now time.Time) (victims []Task, ok bool) {
	if isEmpty(short) {
		return nil, true
	}
	taken := map[string]resources.Resources{}
	for _, t := range p.youngest(agent) {
		if t.Launched.IsZero() && maxAge < anyAge || now.Sub(t.Launched) > maxAge {
			break // the rest are older still
		}
		if _, own := p.tasks[t.ID]; own {
			continue // a demand's task
		}
		if _, dying := p.victims[t.ID]; dying {
			continue
		}
		nr := t.Resources.NonRevocable()
		if slices.ContainsFunc(nr, func(r resources.Resource) bool { return r.IsReserved() }) {
			continue // runs on a reservation
		}
		if !helps(short, nr) || !p.alloc.AboveGuarantee(t.Role, taken[t.Role].Add(nr)) {
			continue
		}
		taken[t.Role] = taken[t.Role].Add(nr)
		victims = append(victims, t)
		if short = less(short, nr); isEmpty(short) {
			return victims, true
		}
	}
	return victims, false
}

// youngest is the agent's tasks, youngest first, asked of the cluster
// once per Cycle (rebind looks at many agents for many demands; tasks
// change only when the driver carries out the effects).
func (p *Planner) youngest(agent string) []Task {
	if ts, ok := p.byAge[agent]; ok {
		return ts
	}
	ts := youngestFirst(p.cl.Tasks(agent))
	if p.byAge != nil {
		p.byAge[agent] = ts
	}
	return ts
}

// lossOf is the work preempting victims at now throws away: each one's
// cpus times how long it has run (a task of unknown launch counts a
// day).
func lossOf(victims []Task, now time.Time) float64 {
	loss := 0.0
	for _, t := range victims {
		age := 24 * time.Hour
		if !t.Launched.IsZero() {
			age = max(now.Sub(t.Launched), 0)
		}
		loss += max(t.Resources.NonRevocable().Scalar(resources.CPUs).Float64(), 0.001) * age.Seconds()
	}
	return loss
}

// fixedLoad is what of DRF's load on an agent preemption cannot reclaim
// (demand.Plan.SetFixedLoadFunc): the tasks a role needs to stay at its
// quota guarantee (its oldest there).
func (p *Planner) fixedLoad(agent string) resources.Resources {
	var fixed resources.Resources
	taken := map[string]resources.Resources{}
	for _, t := range youngestFirst(p.cl.Tasks(agent)) {
		if _, own := p.tasks[t.ID]; own {
			continue // a demand's: in the plan already
		}
		nr := t.Resources.NonRevocable().Unreserved()
		if isEmpty(nr) {
			continue
		}
		if p.alloc.AboveGuarantee(t.Role, taken[t.Role].Add(nr)) {
			taken[t.Role] = taken[t.Role].Add(nr)
			continue
		}
		fixed = fixed.Add(nr)
	}
	return fixed
}

// youngestFirst sorts tasks by launch, the latest first (ties by ID).
func youngestFirst(ts []Task) []Task {
	ts = slices.Clone(ts)
	slices.SortStableFunc(ts, func(x, y Task) int {
		if c := y.Launched.Compare(x.Launched); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
	return ts
}

// lend sets what each agent lends: what demands hold there and will not
// hand over this cycle (Planner.handsOver: ahead of their start, until
// ReclaimAhead before it; a loose one still short after it). An agent
// whose lent capacity shrank is reclaimed (reclaim) for the demand that
// stopped lending there. Only agents where a hold changed, or a demand
// holding there began or stopped handing over, are looked at
// (Planner.dirty): the rest lend what they lent.
func (p *Planner) lend() {
	for id, k := range p.keep {
		if p.kept[id] != k {
			p.touchHolds(id)
		}
	}
	for id, k := range p.kept {
		if p.keep[id] != k {
			p.touchHolds(id)
		}
	}
	clear(p.kept)
	for id, k := range p.keep {
		p.kept[id] = k
	}
	for _, ag := range sortedKeys(p.dirty) {
		var w resources.Resources
		var by []string
		for _, id := range sortedKeys(p.holdsOn[ag]) {
			d, err := p.book.Get(id)
			if err != nil || d.State.Final() || p.keep[id] {
				continue
			}
			if h := p.alloc.Held(ag, id); len(h) > 0 {
				w = w.Add(h) // not a reused buffer: Add may return h itself
				by = append(by, id)
			}
		}
		p.setLent(ag, w, by)
	}
	clear(p.dirty)
}

// setLent has agent ag lend w on behalf of demands by.
func (p *Planner) setLent(ag string, w resources.Resources, by []string) {
	defer func() {
		if len(by) == 0 {
			delete(p.lentBy, ag)
		} else {
			p.lentBy[ag] = by
		}
	}()
	if w.Equal(p.lent[ag]) {
		return
	}
	if err := p.alloc.Lend(ag, w); err != nil {
		return // the agent left the allocator
	}
	if shrank := !w.Contains(p.lent[ag]); shrank {
		for _, id := range p.lentBy[ag] {
			if !slices.Contains(by, id) {
				p.reclaimFor[ag] = id
				break
			}
		}
		if p.reclaimFor[ag] == "" {
			p.reclaimFor[ag] = "-"
		}
	}
	if len(w) == 0 {
		delete(p.lent, ag)
	} else {
		p.lent[ag] = w
	}
}

// reclaim takes back what revocable allocations hold beyond an agent's
// revocable pool once its lent capacity shrank: revocable offers are
// withdrawn, then revocable tasks killed, youngest first, beyond what
// those already killed will free.
func (p *Planner) reclaim() Effects {
	var eff Effects
	for _, ag := range sortedKeys(p.reclaimFor) {
		over := p.alloc.Overdraft(ag)
		if len(over) == 0 {
			delete(p.reclaimFor, ag)
			continue
		}
		for _, x := range p.victims { // a sum: any order
			if x.agent == ag && x.revocable {
				over = less(over, x.res)
			}
		}
		if isEmpty(over) {
			continue
		}
		for _, o := range p.cl.Offers(ag) {
			if r := o.Resources.Revocable(); helps(over, r) {
				eff.Rescind = append(eff.Rescind, o.ID)
				if over = less(over, r); isEmpty(over) {
					break
				}
			}
		}
		msg := "preempted: revocable capacity lent until a demand's start is taken back"
		if id := p.reclaimFor[ag]; id != "-" {
			msg = fmt.Sprintf("preempted by demand %s: the revocable capacity its hold lent on agent %s is taken back", id, ag)
		}
		for _, t := range youngestFirst(p.cl.Tasks(ag)) {
			if isEmpty(over) {
				break
			}
			if _, dying := p.victims[t.ID]; dying {
				continue
			}
			r := t.Resources.Revocable()
			if !helps(over, r) {
				continue
			}
			p.victims[t.ID] = victim{agent: ag, res: r, revocable: true}
			eff.Kill = append(eff.Kill, Kill{Task: t.ID, Framework: t.Framework, Agent: ag, Preempted: true, Message: msg})
			over = less(over, r)
		}
	}
	return eff
}

// drain keeps from DRF what revocable tasks being reclaimed still use of
// capacity no hold keeps (a lending demand that ended or moved): the
// agent's overdraft beyond what holds that no longer lend keep there.
func (p *Planner) drain() {
	for _, ag := range sortedKeys(p.reclaimFor) {
		over := nonRevocable(p.alloc.Overdraft(ag))
		kept := p.alloc.HeldOn(ag, drainHold)
		if l := p.lent[ag]; len(l) > 0 && kept.Contains(l) {
			kept = kept.Subtract(l)
		}
		if over = less(over, kept); isEmpty(over) {
			continue
		}
		if got, _ := p.alloc.Hold(ag, drainHold, over); len(got) > 0 {
			p.drained[ag] = true
		}
	}
}

// releaseDrains gives back the drain holds; drain takes again what is
// still needed at the end of the cycle.
func (p *Planner) releaseDrains() {
	for ag := range p.drained {
		p.alloc.Release(ag, drainHold)
	}
	clear(p.drained)
}

// isEmpty reports whether r has no positive scalar.
func isEmpty(r resources.Resources) bool {
	for _, x := range r {
		if x.Type == resources.Scalar && x.Scalar > 0 {
			return false
		}
	}
	return true
}

// helps reports whether r has some of a scalar short still lacks.
func helps(short, r resources.Resources) bool {
	for _, s := range short {
		if s.Type == resources.Scalar && s.Scalar > 0 && r.Scalar(s.Name) > 0 {
			return true
		}
	}
	return false
}

// less is short less r per scalar name (revocability and role aside),
// never below zero.
func less(short, r resources.Resources) resources.Resources {
	out := make(resources.Resources, 0, len(short))
	for _, s := range short {
		s.Scalar = max(0, s.Scalar-r.Scalar(s.Name))
		out = append(out, s)
	}
	return out
}

// nonRevocable is r with the revocable marks cleared.
func nonRevocable(r resources.Resources) resources.Resources {
	out := make(resources.Resources, 0, len(r))
	for _, x := range r {
		x.Revocable = false
		out = append(out, x)
	}
	return out
}

// Units is how many copies of per (scalars) fit in r.
func Units(r, per resources.Resources) int { return unitsIn(r, per) }

// Scale is n copies of per (scalars).
func Scale(per resources.Resources, n int) resources.Resources { return scale(per, n) }

// unitsIn is how many copies of per fit in r.
func unitsIn(r, per resources.Resources) int {
	n := -1
	for _, p := range per {
		if p.Type != resources.Scalar || p.Scalar <= 0 {
			continue
		}
		k := int(r.Scalar(p.Name) / p.Scalar)
		if n < 0 || k < n {
			n = k
		}
	}
	return max(n, 0)
}

// shortfall is what n copies of per need beyond held, per scalar (a
// partial hold of one scalar is not taken again).
func shortfall(per resources.Resources, n int, held resources.Resources) resources.Resources {
	out := make(resources.Resources, 0, len(per))
	for _, p := range per {
		p.Scalar = max(0, p.Scalar*resources.Value(n)-held.Scalar(p.Name))
		out = append(out, p)
	}
	return out
}

// scale is n copies of per.
func scale(per resources.Resources, n int) resources.Resources {
	out := make(resources.Resources, 0, len(per))
	for _, p := range per {
		p.Scalar *= resources.Value(n)
		out = append(out, p)
	}
	return out
}
