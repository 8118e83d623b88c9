package allocator

import (
	"fmt"
	"slices"
	"strings"

	"github.com/brimnode/brim/resources"
)

// Holds: the narrow hook through which a planner (the master's demands)
// keeps capacity away from DRF. A hold is an allocation entry of the
// agent's unreserved pool that belongs to no client: the cycle sees it as
// used, shares do not count it, and nothing else changes. Hold IDs live in
// their own namespace (holdPrefix) so they can never meet a framework's.

const holdPrefix = "\x00hold/"

func holdKey(id string) string { return holdPrefix + id }

func (a *Allocator) holdAgent(agentID, holdID string) (*agent, error) {
	if holdID == "" {
		return nil, fmt.Errorf("hold: empty id: %w", ErrInvalid)
	}
	ai, ok := a.agentIdx[agentID]
	if !ok {
		return nil, fmt.Errorf("hold %s on %s: agent: %w", holdID, agentID, ErrNotFound)
	}
	return a.agents[ai], nil
}

// Hold takes up to want (unreserved non-revocable scalars) of the agent's
// free capacity into hold holdID and returns what it took (possibly
// nothing). Errors wrap ErrNotFound or ErrInvalid.
func (a *Allocator) Hold(agentID, holdID string, want resources.Resources) (resources.Resources, error) {
	ag, err := a.holdAgent(agentID, holdID)
	if err != nil {
		return nil, err
	}
	var v vec
	for _, r := range want {
		if r.Type != resources.Scalar || r.IsReserved() || r.Revocable || r.Scalar < 0 {
			return nil, fmt.Errorf("hold %s on %s: %s: want unreserved non-revocable scalars: %w", holdID, agentID, r, ErrInvalid)
		}
		d, err := a.kind(r.Name)
		if err != nil {
			return nil, fmt.Errorf("hold %s on %s: %w", holdID, agentID, err)
		}
		v[d] += int64(r.Scalar)
	}
	v.clampMin(&ag.pools[0].free)
	if v.isZero() {
		return nil, nil
	}
	a.give(ag, -1, holdKey(holdID), 0, &v, nil)
	return a.appendPool(nil, &ag.pools[0], &v), nil
}

// Held is what hold holdID keeps on the agent (nothing for an unknown
// agent or hold).
func (a *Allocator) Held(agentID, holdID string) resources.Resources {
	return a.AppendHeld(nil, agentID, holdID)
}

// AppendHeld appends what hold holdID keeps on the agent to dst and
// returns it: Held into a buffer the caller reuses (a planner asks for
// every hold every cycle; allocating each answer was a fifth of its
// time, with the collections it caused).
func (a *Allocator) AppendHeld(dst resources.Resources, agentID, holdID string) resources.Resources {
	ai, ok := a.agentIdx[agentID]
	if !ok {
		return dst
	}
	ag := a.agents[ai]
	for j := range ag.allocs {
		if e := &ag.allocs[j]; e.client < 0 && isHoldKey(e.fw, holdID) {
			return a.appendPool(dst, &ag.pools[e.pool], &e.v)
		}
	}
	return dst
}

// isHoldKey reports whether key is holdKey(id), without building it.
func isHoldKey(key, id string) bool {
	return len(key) == len(holdPrefix)+len(id) && key[len(holdPrefix):] == id && key[:len(holdPrefix)] == holdPrefix
}

// Release gives everything hold holdID keeps on the agent back to it.
func (a *Allocator) Release(agentID, holdID string) {
	ai, ok := a.agentIdx[agentID]
	if !ok {
		return
	}
	ag := a.agents[ai]
	key := holdKey(holdID)
	for j := range ag.allocs {
		if e := &ag.allocs[j]; e.client < 0 && e.fw == key {
			v := e.v
			a.take(ag, j, &v, nil)
		}
	}
	ag.dropEmpty()
}

// Grant moves res out of hold holdID on the agent to the framework, in
// role (one of its roles), as an allocation like any offer's, and returns
// that offer. Errors wrap ErrNotFound, ErrInvalid or ErrInsufficient (the
// hold keeps less); nothing changes then.
func (a *Allocator) Grant(agentID, holdID, frameworkID, roleName string, res resources.Resources) (Offer, error) {
	ag, err := a.holdAgent(agentID, holdID)
	if err != nil {
		return Offer{}, err
	}
	f, ok := a.fws[frameworkID]
	if !ok {
		return Offer{}, fmt.Errorf("grant %s to %s: framework: %w", holdID, frameworkID, ErrNotFound)
	}
	ri, ok := a.roleIdx[roleName]
	if !ok {
		return Offer{}, fmt.Errorf("grant %s to %s: role %s: %w", holdID, frameworkID, roleName, ErrNotFound)
	}
	ci := slices.IndexFunc(f.clients, func(c int32) bool { return a.clients[c].role == ri })
	if ci < 0 {
		return Offer{}, fmt.Errorf("grant %s to %s: role %s is not the framework's: %w", holdID, frameworkID, roleName, ErrInvalid)
	}
	kvs, oth, err := a.split(res, false)
	if err != nil || len(oth) > 0 || len(kvs) != 1 || kvs[0].key != (poolKey{role: -1}) {
		return Offer{}, fmt.Errorf("grant %s to %s: %s: want unreserved non-revocable scalars: %w", holdID, frameworkID, res, ErrInvalid)
	}
	key := holdKey(holdID)
	if !a.takeBack(ag, kvs, nil, func(e *allocEntry) bool { return e.client < 0 && e.fw == key }, nil) {
		return Offer{}, fmt.Errorf("grant %s of hold %s on %s: %w", res, holdID, agentID, ErrInsufficient)
	}
	v := kvs[0].v
	a.give(ag, f.clients[ci], "", 0, &v, nil)
	return Offer{AgentID: ag.id, FrameworkID: frameworkID, Role: roleName, Resources: a.appendPool(nil, &ag.pools[0], &v)}, nil
}

// Allocated is what frameworks have of the agent's unreserved
// non-revocable resources now, in offers and tasks (orphans included,
// holds excluded): the load a planner must expect to still run there
// for a while (demand.Plan.SetLoad). Nil for an unknown agent.
func (a *Allocator) Allocated(agentID string) resources.Resources {
	ai, ok := a.agentIdx[agentID]
	if !ok {
		return nil
	}
	ag := a.agents[ai]
	var v vec
	for j := range ag.allocs {
		if e := &ag.allocs[j]; e.pool == 0 && (e.client >= 0 || !strings.HasPrefix(e.fw, holdPrefix)) {
			v.add(&e.v)
		}
	}
	return a.appendPool(nil, &ag.pools[0], &v)
}

// HeldOn is what every hold but hold except keeps on the agent: capacity
// that other demands keep, which a planner placing a start now cannot
// use (demand.Plan.SetHeldFunc). Nil for an unknown agent.
func (a *Allocator) HeldOn(agentID, except string) resources.Resources {
	ai, ok := a.agentIdx[agentID]
	if !ok {
		return nil
	}
	ag := a.agents[ai]
	skip := holdKey(except)
	var v vec
	for j := range ag.allocs {
		if e := &ag.allocs[j]; e.client < 0 && e.pool == 0 && strings.HasPrefix(e.fw, holdPrefix) && e.fw != skip {
			v.add(&e.v)
		}
	}
	return a.appendPool(nil, &ag.pools[0], &v)
}

// Free is what of the agent's unreserved non-revocable capacity no offer,
// task or hold takes now. Nil for an unknown agent.
func (a *Allocator) Free(agentID string) resources.Resources {
	ai, ok := a.agentIdx[agentID]
	if !ok {
		return nil
	}
	ag := a.agents[ai]
	v := ag.pools[0].free
	v.clampNeg()
	return a.appendPool(nil, &ag.pools[0], &v)
}

// FreeAgents returns the agents where at least atLeast (unreserved
// non-revocable scalars) is free now, with what is free there: where a
// start now can go (demand.Plan.SetFreeNowFunc). One pass over the
// agents' free vectors; nothing is allocated for the others. Errors wrap
// ErrInvalid (a resource the allocator cannot represent).
func (a *Allocator) FreeAgents(atLeast resources.Resources) (map[string]resources.Resources, error) {
	var want vec
	for _, r := range atLeast {
		if r.Type != resources.Scalar || r.Scalar < 0 {
			return nil, fmt.Errorf("free agents: %s: want scalars: %w", r, ErrInvalid)
		}
		d, err := a.kind(r.Name)
		if err != nil {
			return nil, fmt.Errorf("free agents: %w", err)
		}
		want[d] += int64(r.Scalar)
	}
	out := map[string]resources.Resources{}
	for _, ai := range a.live {
		ag := a.agents[ai]
		if f := &ag.pools[0].free; want.le(f) {
			v := *f
			out[ag.id] = a.appendPool(nil, &ag.pools[0], &v)
		}
	}
	return out, nil
}
