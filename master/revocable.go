package master

import (
	"cmp"
	"slices"

	"github.com/brimnode/brim/resources"
)

// The agent's estimate is what it may lend out *now*: the revocable
// resources its running tasks hold are already subtracted, and it knows
// nothing of the master's outstanding offers. The allocator wants the
// pool's total. So the total is the estimate plus what the agent's
// revocable containers held when it computed the estimate — the agent
// sends both, from one snapshot (docs/oversubscription.md: "the master
// adds those back") — and outstanding revocable offers must fit in the
// estimate: those that do not are rescinded, newest first. The allocator
// then never takes back a running task's share, and never offers again
// what an outstanding offer covers.
//
// The master's own view of the tasks is not used when the agent says
// what was in use: it may lag the agent's. A revocable task that ended
// on the agent after the snapshot before last, whose update is still in
// flight, is already in the new estimate's free part; adding it back
// from the master's view would count it twice once its update arrives
// (found by the chaos harness: revocable offers 0.1 cpu and 32 MiB above
// the estimate). Agents older than the field get the master's view.

// revocablePoolLocked is the allocator's revocable total for the agent's
// estimate.
func revocablePoolLocked(ag *agentEntry, estimate resources.Resources) resources.Resources {
	if ag.revInUseSet {
		return asRevocable(estimate).Add(asRevocable(ag.revInUse))
	}
	return asRevocable(estimate).Add(tasksRevocableLocked(ag))
}

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
	for _, o := range ag.offers {
		if !o.res.Revocable().IsEmpty() {
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
	return revocablePoolLocked(ag, free)
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
