package allocator

import (
	"fmt"

	"github.com/brimnode/brim/resources"
)

// Reserve dynamically reserves unreserved, unallocated scalars of an agent
// for role, on behalf of principal (the operator's /reserve). Errors wrap
// ErrNotFound, ErrInvalid, ErrRevocable (revocable resources) or
// ErrInsufficient (not free on the agent).
func (a *Allocator) Reserve(agentID, roleName, principal string, res resources.Resources) error {
	ai, ok := a.agentIdx[agentID]
	if !ok {
		return fmt.Errorf("reserve on %s: %w", agentID, ErrNotFound)
	}
	ag := a.agents[ai]
	var v vec
	for _, x := range res {
		switch {
		case x.Revocable:
			return fmt.Errorf("reserve %s on %s: %w", x, agentID, ErrRevocable)
		case x.Type != resources.Scalar || (x.Role != "" && x.Role != resources.Unreserved) || x.Scalar < 0:
			return fmt.Errorf("reserve %s on %s: must be an unreserved scalar: %w", x, agentID, ErrInvalid)
		}
		d, err := a.kind(x.Name)
		if err != nil {
			return fmt.Errorf("reserve on %s: %w", agentID, err)
		}
		v[d] += int64(x.Scalar)
	}
	r, err := a.role(roleName)
	if err != nil {
		return fmt.Errorf("reserve on %s: %w", agentID, err)
	}
	if free := ag.pools[0].free; !v.le(&free) {
		return fmt.Errorf("reserve %s on %s: %w: unreserved and unallocated there: %s", res, agentID, ErrInsufficient, textOrNone(a.vecResources(&free)))
	}
	k := poolKey{role: r.idx, dynamic: true, principal: principal}
	a.accountTotals(ag, -1)
	pi := ag.poolIndex(k)
	if pi < 0 {
		pi = a.addPool(ag, k)
	}
	ag.pools[0].total.sub(&v)
	ag.pools[0].free.sub(&v)
	ag.pools[pi].total.add(&v)
	ag.pools[pi].free.add(&v)
	a.accountTotals(ag, +1)
	return nil
}

// Unreserve returns dynamically reserved, unallocated resources (entries
// with a role and a Reservation) of an agent to the unreserved pool. Errors
// wrap ErrNotFound, ErrInvalid or ErrInsufficient.
func (a *Allocator) Unreserve(agentID string, res resources.Resources) error {
	ai, ok := a.agentIdx[agentID]
	if !ok {
		return fmt.Errorf("unreserve on %s: %w", agentID, ErrNotFound)
	}
	ag := a.agents[ai]
	for _, x := range res {
		if x.Type != resources.Scalar || x.Reservation == nil || x.Revocable {
			return fmt.Errorf("unreserve %s on %s: must be a dynamically reserved scalar: %w", x, agentID, ErrInvalid)
		}
	}
	kvs, _, err := a.split(res, false)
	if err != nil {
		return fmt.Errorf("unreserve on %s: %w", agentID, err)
	}
	for _, kv := range kvs {
		pi := ag.poolIndex(kv.key)
		if pi < 0 || !kv.v.le(&ag.pools[pi].free) {
			return fmt.Errorf("unreserve %s on %s: %w", res, agentID, ErrInsufficient)
		}
	}
	a.accountTotals(ag, -1)
	for _, kv := range kvs {
		pi := ag.poolIndex(kv.key)
		ag.pools[pi].total.sub(&kv.v)
		ag.pools[pi].free.sub(&kv.v)
		ag.pools[0].total.add(&kv.v)
		ag.pools[0].free.add(&kv.v)
	}
	a.accountTotals(ag, +1)
	return nil
}

// textOrNone is r's text, or "none".
func textOrNone(r resources.Resources) string {
	if s := r.String(); s != "" {
		return s
	}
	return "none"
}
