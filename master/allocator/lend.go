package allocator

import (
	"fmt"

	"github.com/brimnode/brim/resources"
)

// Lending: capacity a planner holds ahead of a start idles until then.
// Lend offers it meanwhile as revocable resources: the agent's revocable
// pool grows by what is lent, on top of its estimator's revocable
// resources, and the holds stay as they are in the unreserved pool (the
// capacity is theirs; revocable tasks only borrow it). Shares do not
// count lent capacity twice: the cluster total leaves it out.
//
// Taking it back is Lend with less: the pool shrinks, and what its
// allocations hold beyond it is the agent's Overdraft, which the planner
// reclaims by rescinding revocable offers and killing revocable tasks
// (the allocator never kills anything). Until those end, the overdrawn
// capacity is still in use on the agent.

// Lend sets what the holds on the agent lend out as revocable resources
// (unreserved scalars, within its unreserved total; nil: nothing). Errors
// wrap ErrNotFound or ErrInvalid; nothing changes then.
func (a *Allocator) Lend(agentID string, lent resources.Resources) error {
	ai, ok := a.agentIdx[agentID]
	if !ok {
		return fmt.Errorf("lend on %s: agent: %w", agentID, ErrNotFound)
	}
	ag := a.agents[ai]
	var v vec
	for _, r := range lent {
		if r.Type != resources.Scalar || r.IsReserved() || r.Scalar < 0 {
			return fmt.Errorf("lend on %s: %s: want unreserved scalars: %w", agentID, r, ErrInvalid)
		}
		d, err := a.kind(r.Name)
		if err != nil {
			return fmt.Errorf("lend on %s: %w", agentID, err)
		}
		v[d] += int64(r.Scalar)
	}
	if !v.le(&ag.pools[0].total) {
		return fmt.Errorf("lend on %s: %s: more than the agent's unreserved total: %w", agentID, lent, ErrInvalid)
	}
	if v == ag.lent {
		return nil
	}
	p := &ag.pools[1]
	p.total.sub(&ag.lent)
	p.free.sub(&ag.lent)
	p.total.add(&v)
	p.free.add(&v)
	ag.lent = v
	ag.idle = false
	return nil
}

// Lent is what the holds on the agent lend out now (Lend).
func (a *Allocator) Lent(agentID string) resources.Resources {
	ai, ok := a.agentIdx[agentID]
	if !ok {
		return nil
	}
	ag := a.agents[ai]
	return a.appendPool(nil, &ag.pools[1], &ag.lent)
}

// Overdraft is what the agent's revocable allocations (offers and tasks)
// hold beyond its revocable pool, per scalar: after Lend took lent
// capacity back, what must be rescinded or killed before that capacity
// is free on the agent. Nil when within the pool, or for an unknown agent.
func (a *Allocator) Overdraft(agentID string) resources.Resources {
	ai, ok := a.agentIdx[agentID]
	if !ok {
		return nil
	}
	ag := a.agents[ai]
	var v vec
	for d, x := range ag.pools[1].free {
		if x < 0 {
			v[d] = -x
		}
	}
	return a.appendPool(nil, &ag.pools[1], &v)
}

// AboveGuarantee reports whether role still consumes at least its quota
// guarantee after giving up less (unreserved non-revocable scalars): a
// planner may take less from it without taking what the guarantee
// protects. A role without a guarantee is always above it; an unknown
// role has none.
func (a *Allocator) AboveGuarantee(roleName string, less resources.Resources) bool {
	ri, ok := a.roleIdx[roleName]
	if !ok {
		return true
	}
	r := a.roles[ri]
	if r.guarMask == 0 {
		return true
	}
	c := r.consumed()
	for _, x := range less {
		if x.Type != resources.Scalar || x.Revocable {
			continue
		}
		if d, ok := a.kindIdx[x.Name]; ok {
			c[d] -= int64(x.Scalar)
		}
	}
	for d := range maxKinds {
		if r.guarMask.has(d) && c[d] < r.guar[d] {
			return false
		}
	}
	return true
}
