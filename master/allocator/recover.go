package allocator

import (
	"fmt"
	"slices"
	"time"

	"github.com/brimnode/brim/resources"
)

type filter struct {
	until       time.Time
	nonrev, rev vec
}

// Recover returns resources a framework held on an agent: a declined or
// rescinded offer, or the resources of a finished task. refuse is the
// filter to install: nil means Options.DefaultRefuse (a decline without
// refuse_seconds), 0 none (task end, rescind). While the filter lasts, the
// framework is not offered that agent again unless the offer would carry
// more than what it refused. Errors wrap ErrNotFound, or ErrInsufficient
// when the framework does not hold res there; nothing changes then.
//
// A framework with several roles may hold unreserved resources of an agent
// in more than one role; Recover then takes them from its roles in any
// order. RecoverRole names the role (the Offer's Role) and is exact.
func (a *Allocator) Recover(frameworkID, agentID string, res resources.Resources, refuse *time.Duration) error {
	return a.RecoverRole(frameworkID, "", agentID, res, refuse)
}

// RecoverRole is Recover for what the framework holds in one role ("" for
// any of its roles). Errors wrap ErrNotFound or ErrInsufficient.
func (a *Allocator) RecoverRole(frameworkID, roleName, agentID string, res resources.Resources, refuse *time.Duration) error {
	f, ok := a.fws[frameworkID]
	if !ok {
		return a.recoverOrphan(frameworkID, agentID, res)
	}
	ai, ok := a.agentIdx[agentID]
	if !ok {
		return fmt.Errorf("recover from %s: agent %s: %w", frameworkID, agentID, ErrNotFound)
	}
	ag := a.agents[ai]
	kvs, oth, err := a.split(res, false)
	if err != nil {
		return fmt.Errorf("recover from %s on %s: %w", frameworkID, agentID, err)
	}
	ri := int32(-1)
	if roleName != "" {
		i, ok := a.roleIdx[roleName]
		if !ok {
			return fmt.Errorf("recover from %s: role %s: %w", frameworkID, roleName, ErrNotFound)
		}
		ri = i
	}
	mine := func(e *allocEntry) bool {
		return e.client >= 0 && a.clients[e.client].fw == f && (ri < 0 || a.clients[e.client].role == ri)
	}
	type refused struct{ nonrev, rev vec }
	got := map[int32]*refused{}
	taken := func(c int32, part *vec, revocable bool) {
		if got[c] == nil {
			got[c] = &refused{}
		}
		if revocable {
			got[c].rev.add(part)
		} else {
			got[c].nonrev.add(part)
		}
	}
	if !a.takeBack(ag, kvs, oth, mine, taken) {
		return fmt.Errorf("recover %s from %s on %s: %w", res, frameworkID, agentID, ErrInsufficient)
	}
	d := a.opts.DefaultRefuse
	if refuse != nil {
		d = *refuse
	}
	if d > 0 {
		until := a.clock.Now().Add(d)
		for c, r := range got {
			cl := a.clients[c]
			if cl.filters == nil {
				cl.filters = map[int32]filter{}
			}
			cl.filters[ai] = filter{until: until, nonrev: r.nonrev, rev: r.rev}
		}
	}
	return nil
}

// recoverOrphan returns res of a framework the allocator does not know yet
// to agentID: usage an agent reported at (re-)registration for a framework
// that has not subscribed again (AddAgent keeps it as an orphan). A task
// of such a framework may end before the framework comes back; without
// this its usage would stay held and be claimed by the framework when it
// re-subscribes, with no task behind it. No refusal filter applies (the
// framework is unknown). Errors wrap ErrNotFound (no such agent, or no
// orphan usage of the framework there) or ErrInsufficient.
func (a *Allocator) recoverOrphan(frameworkID, agentID string, res resources.Resources) error {
	ai, ok := a.agentIdx[agentID]
	if !ok {
		return fmt.Errorf("recover from %s: agent %s: %w", frameworkID, agentID, ErrNotFound)
	}
	ag := a.agents[ai]
	mine := func(e *allocEntry) bool { return e.client < 0 && e.fw == frameworkID }
	if !slices.ContainsFunc(ag.allocs, func(e allocEntry) bool { return mine(&e) }) {
		return fmt.Errorf("recover from %s: framework: %w", frameworkID, ErrNotFound)
	}
	kvs, oth, err := a.split(res, false)
	if err != nil {
		return fmt.Errorf("recover from %s on %s: %w", frameworkID, agentID, err)
	}
	if !a.takeBack(ag, kvs, oth, mine, nil) {
		return fmt.Errorf("recover %s from %s on %s: %w", res, frameworkID, agentID, ErrInsufficient)
	}
	return nil
}

// takeBack returns kvs and oth, held by the entries of ag that mine
// selects, to the agent: all of it, or nothing (false) when those entries
// hold less. taken, if not nil, hears of every scalar part taken from a
// client (for refusal filters); a non-scalar part is reported as an empty
// vec.
func (a *Allocator) takeBack(ag *agent, kvs []keyedVec, oth resources.Resources, mine func(*allocEntry) bool, taken func(c int32, part *vec, revocable bool)) bool {
	for _, kv := range kvs {
		pi := ag.poolIndex(kv.key)
		var held vec
		for j := range ag.allocs {
			if e := &ag.allocs[j]; int(e.pool) == pi && mine(e) {
				held.add(&e.v)
			}
		}
		if pi < 0 || !kv.v.le(&held) {
			return false
		}
	}
	var heldOther resources.Resources
	for j := range ag.allocs {
		if e := &ag.allocs[j]; mine(e) {
			heldOther = heldOther.Add(e.other)
		}
	}
	if !heldOther.Contains(oth) {
		return false
	}
	for _, kv := range kvs {
		pi := ag.poolIndex(kv.key)
		left := kv.v
		for j := range ag.allocs {
			e := &ag.allocs[j]
			if int(e.pool) != pi || !mine(e) {
				continue
			}
			part := left
			part.clampMin(&e.v)
			left.sub(&part)
			if taken != nil {
				taken(e.client, &part, kv.key.revocable)
			}
			a.take(ag, j, &part, nil)
		}
	}
	left := oth
	for j := range ag.allocs {
		e := &ag.allocs[j]
		if !mine(e) || len(left) == 0 {
			continue
		}
		var part resources.Resources
		for _, r := range left {
			if e.other.Contains(resources.Resources{r}) {
				part = append(part, r)
			}
		}
		if len(part) > 0 {
			if taken != nil {
				taken(e.client, &vec{}, false)
			}
			a.take(ag, j, &vec{}, part)
			left = left.Subtract(part)
		}
	}
	ag.dropEmpty()
	return true
}
