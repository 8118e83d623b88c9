package master

import (
	"cmp"
	"slices"

	"github.com/brimnode/brim/resources"
)

// The agent's estimate is what it may lend out *now*: the revocable
// resources its running tasks hold are already subtracted, and it knows
// nothing of the master's outstanding offers. The allocator wants the
// pool's total. So the total is the estimate plus what the agent's live
// tasks hold revocably (docs/oversubscription.md: "the master adds those
// back"), and outstanding revocable offers must fit in the estimate:
// those that do not are rescinded, newest first. The allocator then
// never takes back a running task's share, and never offers again what
// an outstanding offer covers.

// tasksRevocableLocked is the revocable part of what the agent's live
// tasks hold in the allocator.
func tasksRevocableLocked(ag *agentEntry) resources.Resources {
	var held resources.Resources
	for _, t := range ag.tasks {
		if !terminal(t.state) && !t.recovered {
			held = held.Add(t.held().Revocable())
		}
	}
	return held
}

// revocableTotalLocked rescinds the agent's outstanding offers whose
// revocable resources no longer fit in estimate (newest first) and
// returns the allocator's revocable total for that estimate.
func (m *Master) revocableTotalLocked(ag *agentEntry, estimate resources.Resources) resources.Resources {
	var offers []*offerEntry
	var offered resources.Resources
	for _, o := range m.offers {
		if o.agent == ag.id && !o.res.Revocable().IsEmpty() {
			offers = append(offers, o)
			offered = offered.Add(o.res.Revocable())
		}
	}
	slices.SortFunc(offers, func(x, y *offerEntry) int {
		if c := y.created.Compare(x.created); c != 0 {
			return c
		}
		return cmp.Compare(y.id, x.id)
	})
	free := asRevocable(estimate)
	for _, o := range offers {
		if free.Contains(offered) {
			break
		}
		offered = offered.Subtract(o.res.Revocable())
		m.rescindLocked(o, nil)
	}
	return free.Add(tasksRevocableLocked(ag))
}

// asRevocable marks every entry revocable (an estimate may omit {REV}).
func asRevocable(r resources.Resources) resources.Resources {
	out := make(resources.Resources, 0, len(r))
	for _, e := range r {
		e.Revocable = true
		out = out.Add(resources.Resources{e})
	}
	return out
}
