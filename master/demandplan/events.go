package demandplan

import (
	"fmt"
	"slices"
	"time"

	"github.com/brimnode/brim/demand"
)

// OfferGone handles an offer that went unused: declined, rescinded (its
// resources already given back to the allocator), or withdrawn with its
// agent (ready false: the agent cannot take tasks). Offers not the
// planner's are ignored. When the agent left and the demand is handed
// over whole (a gang, a strict start), that part of the hand-over cannot
// complete: the demand fails (hand-over failed), which kills its
// launched tasks and releases its bookings. Otherwise what the offer had
// goes back to the demand's hold.
func (p *Planner) OfferGone(id string, ready bool, now time.Time) Effects {
	o, ok := p.offers[id]
	if !ok {
		return Effects{}
	}
	delete(p.offers, id)
	d, err := p.book.Get(o.Demand)
	if err != nil || d.State.Final() {
		return Effects{}
	}
	if d.WholeHandOver() && !ready {
		msg := fmt.Sprintf("agent %s left before the tasks of its offer were launched; %d of %d tasks launched",
			o.Agent, d.Launched, d.Spec().Tasks)
		changes, _ := p.book.HandOverLost(d.ID, msg, now)
		return p.carry(changes, now)
	}
	if got, err := p.alloc.Hold(o.Agent, d.ID, o.Resources); err == nil && len(got) > 0 {
		n := unitsIn(got, d.Spec().Resources)
		d.Handed = max(0, d.Handed-n)
		d.Hand(o.Agent, -n)
		p.markHeld(d.ID, o.Agent)
		return Effects{Store: []*demand.Demand{d}}
	}
	return Effects{}
}

// Launched links the tasks a framework launched on offers to their
// demand and reports the claim. Offers not the planner's are ignored.
func (p *Planner) Launched(offerIDs, taskIDs []string, now time.Time) Effects {
	id, agent := "", ""
	for _, oid := range offerIDs {
		if o, ok := p.offers[oid]; ok {
			id, agent = o.Demand, o.Agent
			delete(p.offers, oid)
		}
	}
	if id == "" {
		return Effects{}
	}
	d, err := p.book.Get(id)
	if err != nil || len(taskIDs) == 0 {
		return Effects{}
	}
	for _, t := range taskIDs {
		p.tasks[t] = taskRef{demand: id, agent: agent}
		d.LiveTasks = append(d.LiveTasks, t)
	}
	d.Launched += len(taskIDs)
	changes, _ := p.book.Claim(id, now)
	if len(changes) == 0 {
		return Effects{Store: []*demand.Demand{d}} // its live tasks changed
	}
	return p.carry(changes, now)
}

// TaskEnded reports the end of framework fw's task id, any task: a
// victim's end frees what it was killed for; a demand's ended task is
// counted, and when the last one ends and every task was handed over,
// the demand ends (ok: it finished).
func (p *Planner) TaskEnded(id, fw string, ok bool, now time.Time) Effects {
	delete(p.victims, id)
	ref, found := p.tasks[id]
	if !found {
		return Effects{}
	}
	d, err := p.book.Get(ref.demand)
	if err != nil || d.Framework != fw {
		return Effects{} // not its task: another framework's of that ID
	}
	delete(p.tasks, id)
	d.LiveTasks = slices.DeleteFunc(d.LiveTasks, func(x string) bool { return x == id })
	if !ok {
		d.Failures++
	}
	done := len(d.LiveTasks) == 0 && d.Handed >= d.Spec().Tasks
	for _, o := range p.offers {
		if o.Demand == d.ID {
			done = false // an offer of it is still out
		}
	}
	if !done {
		return Effects{Store: []*demand.Demand{d}}
	}
	return p.ended(d, now)
}

// ended ends demand d once every task launched on it ended: FINISHED
// when they all finished, FAILED when some did not, or when a gang ran
// fewer tasks than it has (a gang runs whole). The message counts what
// was launched.
func (p *Planner) ended(d *demand.Demand, now time.Time) Effects {
	tasks, launched := d.Spec().Tasks, d.Launched
	if launched == 0 {
		launched = tasks // stored before launches were counted: as before
	}
	var msg string
	switch {
	case d.Failures > 0:
		msg = fmt.Sprintf("%d of %d tasks launched did not finish", d.Failures, launched)
	case launched >= tasks:
		msg = fmt.Sprintf("all %d tasks finished", tasks)
	default:
		msg = fmt.Sprintf("%d of %d tasks launched, all finished", launched, tasks)
	}
	if d.Spec().Gang && launched < tasks && d.Failures == 0 {
		msg = fmt.Sprintf("the gang ran %d of its %d tasks: %s", launched, tasks, msg)
		changes, _ := p.book.HandOverLost(d.ID, msg, now)
		return p.carry(changes, now)
	}
	changes, _ := p.book.Ended(d.ID, d.Failures == 0, msg, now)
	return p.carry(changes, now)
}
