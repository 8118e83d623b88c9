package demandplan

import (
	"slices"
	"time"

	"github.com/brimnode/brim/demand"
)

// Cycle runs before every DRF cycle, at now: demands step on the clock;
// those ALLOCATING, or handed over but not whole, hold what frees on
// their agents (so DRF never sees it); a strict start due to be
// reclaimed (Options.Preempt) has what others still hold of its booking
// reclaimed; at or after its start every cycle is an allocation
// opportunity, and what is held is offered to the demand's framework
// (Effects.Offers). The driver carries out the effects, then calls TopUp
// before DRF's cycle.
func (p *Planner) Cycle(now time.Time) Effects {
	p.own = nil // within the cycle, grants and launches come after placements
	p.byAge = map[string][]Task{}
	defer func() { p.byAge = nil }()
	p.releaseDrains()
	clear(p.keep)
	eff := p.carry(p.book.Tick(now), now)
	for _, d := range p.book.ByUrgency() {
		known, online := p.cl.Framework(d.Framework)
		if !known {
			// Its framework was removed (failover timeout, teardown):
			// nobody is left to take the capacity.
			changes, _ := p.book.Cancel(d.ID, "framework "+d.Framework+" removed", now)
			eff.add(p.carry(changes, now))
			continue
		}
		if d.State != demand.Allocating && d.State != demand.Allocated && d.State != demand.Monitoring {
			continue
		}
		if d.Handed >= d.Spec().Tasks {
			p.releaseHolds(d) // what is left is less than a task
			continue
		}
		if p.book.Postpone(d.ID, now) || p.book.Replan(d.ID, now) {
			p.releaseOutside(d)
		}
		held, ready := p.hold(d, now, &eff)
		p.keep[d.ID] = p.handsOver(d, now, held)
		if now.Before(d.Start) || !online {
			continue // early, or nobody there to take it: no opportunity
		}
		if now.After(d.Start) && !d.Timing().StartStrict && !p.book.Stretch(d.ID, now) {
			// Handed over now, its tasks would run into capacity booked
			// for demands after it: it waits, its holds lent meanwhile (a
			// strict start is handed over in its window whatever).
			p.keep[d.ID] = false
			continue
		}
		units := 0
		for _, u := range ready {
			units += u
		}
		changes, _ := p.book.Held(d.ID, d.Handed+units, now)
		eff.add(p.carry(changes, now))
		switch {
		case d.State == demand.Allocated || d.State == demand.Monitoring:
			if offers := p.grant(d, ready, &eff); len(offers) > 0 {
				eff.Offers = append(eff.Offers, offers...)
				eff.Store = append(eff.Store, d) // its slots' hand counts
			}
		case d.Relaxed:
			// Delay scheduling: its ^N opportunities passed; the plan
			// places it again, now, wherever it has room.
			if moved, _ := p.book.Replace(d.ID, now); moved {
				p.releaseOutside(d)
			}
		}
	}
	return eff
}

// TopUp runs after the driver carried out Cycle's effects, before DRF's
// cycle: strict starts still short hold what those freed (withdrawn
// offers, loose holds moved) before DRF can take it; then capacity held
// ahead of starts is lent as revocable (Options.Lend), lent capacity due
// back is reclaimed (revocable offers withdrawn, revocable tasks
// preempted, youngest first), and what revocable tasks still use of
// capacity nobody holds is kept from DRF until they are gone.
func (p *Planner) TopUp(now time.Time) Effects {
	for _, d := range p.book.ByUrgency() {
		if !d.Timing().StartStrict {
			break
		}
		if d.State == demand.Allocating {
			for _, s := range d.Placement {
				if want := s.Unhanded(); want > 0 && p.cl.Ready(s.Agent) {
					p.top(d, s.Agent, want)
				}
			}
		}
	}
	var eff Effects
	if p.opts.Lend {
		p.lend()
	}
	eff.add(p.reclaim())
	p.drain()
	return eff
}

// handsOver reports whether d's holds are to be handed over, so not lent
// (Options.Lend): a strict start from ReclaimAhead before it; a loose one
// from then on once it holds enough to hand over (all its tasks for a
// gang, one task otherwise). Until then what it holds is lent: a loose
// demand short at its start may wait long for DRF's tasks on its agents
// to end, and its holds idled meanwhile (8 % of the cluster in
// demandbench).
func (p *Planner) handsOver(d *demand.Demand, now time.Time, held map[string]int) bool {
	if now.Before(d.Start.Add(-p.opts.ReclaimAhead)) {
		return false
	}
	if d.Timing().StartStrict {
		return true
	}
	need := 1
	if d.Spec().Gang {
		need = d.Spec().Tasks - d.Handed
	}
	units := 0
	for _, u := range held {
		units += u
	}
	return units >= need
}

// hold tops up d's holds on its agents and, for a strict start due to
// be reclaimed, preempts what still holds its booking. It returns how
// many tasks' worth each agent holds, and of that what is ready to hand
// over: not on an agent whose lent capacity is still being reclaimed, nor
// lent there in the last pass (its revocable tasks may still run on it).
func (p *Planner) hold(d *demand.Demand, now time.Time, eff *Effects) (held, ready map[string]int) {
	need := d.Spec().Tasks - d.Handed
	held, ready = map[string]int{}, map[string]int{}
	maxAge, reclaim := p.reclaimAge(d, now)
	if reclaim && p.rebind(d, maxAge, now) {
		eff.Store = append(eff.Store, d) // its placement moved
	}
	for _, s := range d.Placement {
		if need <= 0 {
			break
		}
		if !p.cl.Ready(s.Agent) {
			// Held on an agent that cannot take tasks, the capacity
			// could not be handed over (its offer would be rescinded,
			// or its launch refused): it counts once the agent is back.
			continue
		}
		// What was handed over on this agent already counts against its
		// slot: holding the slot's Tasks again would take capacity the
		// plan booked there for other demands.
		want := min(s.Unhanded(), need)
		if want == 0 {
			continue
		}
		have := p.top(d, s.Agent, want)
		if have < want && reclaim {
			eff.add(p.preempt(d, s.Agent, want, maxAge, now))
		}
		if have = min(have, want); have > 0 {
			held[s.Agent] = have
			if len(p.alloc.Overdraft(s.Agent)) == 0 && !slices.Contains(p.lentBy[s.Agent], d.ID) {
				ready[s.Agent] = have
			}
			need -= have
		}
	}
	return held, ready
}

// top tops up d's hold on agent toward want tasks' worth (a strict start
// takes the capacity of loose holds there) and returns how many tasks'
// worth it holds.
func (p *Planner) top(d *demand.Demand, agent string, want int) int {
	per := d.Spec().Resources
	p.buf = p.alloc.AppendHeld(p.buf[:0], agent, d.ID)
	have := unitsIn(p.buf, per)
	if have >= want {
		return have
	}
	if got, _ := p.alloc.Hold(agent, d.ID, shortfall(per, want, p.buf)); len(got) > 0 {
		p.markHeld(d.ID, agent)
		p.buf = p.alloc.AppendHeld(p.buf[:0], agent, d.ID)
		have = unitsIn(p.buf, per)
	}
	if have < want && d.Timing().StartStrict && p.yieldLoose(agent) {
		if got, _ := p.alloc.Hold(agent, d.ID, shortfall(per, want, p.buf)); len(got) > 0 {
			p.markHeld(d.ID, agent)
			p.buf = p.alloc.AppendHeld(p.buf[:0], agent, d.ID)
			have = unitsIn(p.buf, per)
		}
	}
	return have
}

func (p *Planner) markHeld(id, agent string) {
	p.dirty[agent] = true
	if p.holds[id] == nil {
		p.holds[id] = map[string]bool{}
	}
	p.holds[id][agent] = true
	if p.holdsOn[agent] == nil {
		p.holdsOn[agent] = map[string]bool{}
	}
	p.holdsOn[agent][id] = true
}

// unmarkHeld forgets that demand id holds on agent (after Release).
func (p *Planner) unmarkHeld(id, agent string) {
	p.dirty[agent] = true
	delete(p.holds[id], agent)
	if len(p.holds[id]) == 0 {
		delete(p.holds, id)
	}
	delete(p.holdsOn[agent], id)
	if len(p.holdsOn[agent]) == 0 {
		delete(p.holdsOn, agent)
	}
}

// touchHolds has lend look again at the agents where demand id holds.
func (p *Planner) touchHolds(id string) {
	for ag := range p.holds[id] {
		p.dirty[ag] = true
	}
}

// yieldLoose releases the holds of loose demands on an agent (a strict
// start takes precedence; the loose ones hold again when capacity frees)
// and reports whether there were any.
func (p *Planner) yieldLoose(agent string) bool {
	any := false
	for _, id := range sortedKeys(p.holdsOn[agent]) {
		d, err := p.book.Get(id)
		if err != nil || d.Timing().StartStrict {
			continue
		}
		p.alloc.Release(agent, id)
		p.unmarkHeld(id, agent)
		any = true
	}
	return any
}

// grant offers the held units to the demand's framework, at most what it
// still lacks.
func (p *Planner) grant(d *demand.Demand, held map[string]int, eff *Effects) []Offer {
	per := d.Spec().Resources
	var out []Offer
	for _, a := range sortedKeys(held) {
		o, err := p.alloc.Grant(a, d.ID, d.Framework, d.Role, scale(per, held[a]))
		if err != nil {
			eff.Errs = append(eff.Errs, err)
			continue
		}
		d.Hand(a, held[a])
		p.dirty[a] = true
		off := Offer{ID: p.opts.NewID(), Framework: d.Framework, Agent: a, Role: o.Role, Resources: o.Resources, Demand: d.ID}
		p.offers[off.ID] = off
		out = append(out, off)
	}
	return out
}
