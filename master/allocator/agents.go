package allocator

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/brimnode/brim/resources"
)

// AgentInfo describes an agent to the allocator.
type AgentInfo struct {
	ID string
	// Total includes static reservations (entries with a role) and, if
	// already present, dynamic ones.
	Total resources.Resources
	// Revocable is the estimator's current oversubscription; every entry is
	// treated as revocable and must be unreserved.
	Revocable resources.Resources
	// Attributes are kept for the master; the allocator does not use them.
	Attributes map[string]string
	// Score is the machine performance score used by meDRF (> 0; 0 reads
	// as 1).
	Score float64
}

// poolKey identifies a pool of an agent's resources: unreserved, revocable,
// or reserved for a role (statically, or dynamically by a principal).
type poolKey struct {
	role      int32 // -1: unreserved
	dynamic   bool
	principal string
	revocable bool
}

type pool struct {
	key   poolKey
	total vec
	free  vec
	res   *resources.Reservation // shared by every offer of this pool
}

// allocEntry is what one client holds of one pool of an agent.
type allocEntry struct {
	client int32  // -1 for an orphan: a framework the allocator does not know yet
	fw     string // framework ID, for orphans
	pool   int32
	v      vec
	other  resources.Resources // non-scalar resources (ports, sets)
}

type agent struct {
	// Hot fields first: the cycle reads them for every agent, in random
	// order, so they share cache lines with the inline storage below.
	pools  []pool // [0] unreserved, [1] revocable, then reservations
	allocs []allocEntry
	eta    float64
	idx    int32
	live   int32 // position in Allocator.live
	// idle: the last walk of this agent offered nothing; valid while
	// idleGen is the allocator's framework generation, before idleUntil,
	// and until the agent's resources change.
	idle      bool
	idleGen   uint64
	idleUntil time.Time
	// poolsInline and allocsInline back pools and allocs until they grow,
	// keeping an agent in one block of memory.
	poolsInline  [2]pool
	allocsInline [2]allocEntry
	id           string
	info         AgentInfo
	// other is the free non-scalar part (ports, sets), never in the hot
	// loop's arithmetic.
	other      resources.Resources
	otherTotal resources.Resources
	// lent is what holds on the agent lend out as revocable (Lend): part
	// of pools[1]'s total, on top of info.Revocable.
	lent vec
}

func (ag *agent) poolIndex(k poolKey) int {
	switch {
	case k.role < 0 && !k.revocable:
		return 0
	case k.role < 0:
		return 1
	}
	for i := 2; i < len(ag.pools); i++ {
		if ag.pools[i].key == k {
			return i
		}
	}
	return -1
}

func (a *Allocator) addPool(ag *agent, k poolKey) int {
	p := pool{key: k}
	if k.dynamic {
		p.res = &resources.Reservation{Principal: k.principal}
	}
	ag.pools = append(ag.pools, p)
	return len(ag.pools) - 1
}

// AddAgent adds an agent. used is what frameworks already run there
// (framework ID -> resources), e.g. after a master failover; usage of a
// framework not yet added is held until AddFramework claims it. Errors wrap
// ErrExist, ErrInvalid, ErrRevocable or ErrInsufficient (used exceeds
// total).
func (a *Allocator) AddAgent(info AgentInfo, used map[string]resources.Resources) error {
	if info.ID == "" {
		return fmt.Errorf("add agent: empty id: %w", ErrInvalid)
	}
	if _, ok := a.agentIdx[info.ID]; ok {
		return fmt.Errorf("add agent %s: %w", info.ID, ErrExist)
	}
	ag := &agent{id: info.ID, info: info, eta: 1}
	ag.poolsInline = [2]pool{{key: poolKey{role: -1}}, {key: poolKey{role: -1, revocable: true}}}
	ag.pools = ag.poolsInline[:2:2]
	ag.allocs = ag.allocsInline[:0:2]
	if err := a.setTotals(ag, info); err != nil {
		return fmt.Errorf("add agent %s: %w", info.ID, err)
	}
	for i := range ag.pools {
		ag.pools[i].free = ag.pools[i].total
	}
	ag.other = ag.otherTotal
	// Validate usage before anything changes.
	type use struct {
		fw   string
		c    int32
		kvs  []keyedVec
		oth  resources.Resources
		pidx []int
	}
	var uses []use
	need := make([]vec, len(ag.pools))
	for _, fwID := range sortedKeys(used) {
		kvs, oth, err := a.split(used[fwID], false)
		if err != nil {
			return fmt.Errorf("add agent %s: used by %s: %w", info.ID, fwID, err)
		}
		u := use{fw: fwID, c: -1, kvs: kvs, oth: oth}
		for _, kv := range kvs {
			pi := ag.poolIndex(kv.key)
			if pi < 0 {
				return fmt.Errorf("add agent %s: used by %s: %w", info.ID, fwID, ErrInsufficient)
			}
			need[pi].add(&kv.v)
			u.pidx = append(u.pidx, pi)
		}
		if !ag.other.Contains(oth) {
			return fmt.Errorf("add agent %s: used by %s: %w", info.ID, fwID, ErrInsufficient)
		}
		ag.other = ag.other.Subtract(oth)
		if f := a.fws[fwID]; f != nil {
			u.c = a.clientFor(f, kvs)
		}
		uses = append(uses, u)
	}
	for i := range need {
		if !need[i].le(&ag.pools[i].total) {
			ag.other = ag.otherTotal
			return fmt.Errorf("add agent %s: used exceeds total: %w", info.ID, ErrInsufficient)
		}
	}
	a.placeAgent(ag)
	for _, u := range uses {
		if u.c < 0 {
			if a.orphans == nil {
				a.orphans = map[string][]int32{}
			}
			a.orphans[u.fw] = append(a.orphans[u.fw], ag.idx)
		}
		for i, kv := range u.kvs {
			var oth resources.Resources
			if i == 0 {
				oth = u.oth
			}
			a.give(ag, u.c, u.fw, int32(u.pidx[i]), &kv.v, oth)
		}
		if len(u.kvs) == 0 && len(u.oth) > 0 {
			a.give(ag, u.c, u.fw, 0, &vec{}, u.oth)
		}
	}
	return nil
}

// setTotals (re)computes ag's pool totals and non-scalar total from info.
func (a *Allocator) setTotals(ag *agent, info AgentInfo) error {
	kvs, other, err := a.split(info.Total, false)
	if err != nil {
		return err
	}
	rkvs, rother, err := a.split(info.Revocable, true)
	if err != nil {
		return err
	}
	if info.Score < 0 || math.IsNaN(info.Score) || math.IsInf(info.Score, 0) {
		return fmt.Errorf("score %v: %w", info.Score, ErrInvalid)
	}
	for i := range ag.pools {
		ag.pools[i].total = vec{}
	}
	for _, kv := range append(kvs, rkvs...) {
		pi := ag.poolIndex(kv.key)
		if pi < 0 {
			pi = a.addPool(ag, kv.key)
		}
		ag.pools[pi].total.add(&kv.v)
	}
	ag.pools[1].total.add(&ag.lent)
	ag.otherTotal = other.Add(rother)
	return nil
}

func (a *Allocator) placeAgent(ag *agent) {
	if n := len(a.freeIdx); n > 0 {
		ag.idx = a.freeIdx[n-1]
		a.freeIdx = a.freeIdx[:n-1]
		a.agents[ag.idx] = ag
	} else {
		ag.idx = int32(len(a.agents))
		a.agents = append(a.agents, ag)
	}
	ag.live = int32(len(a.live))
	a.live = append(a.live, ag.idx)
	a.agentIdx[ag.id] = ag.idx
	a.accountTotals(ag, +1)
}

// accountTotals adds (sign +1) or removes (-1) ag's totals and free
// resources from the cluster sums.
func (a *Allocator) accountTotals(ag *agent, sign int) {
	ag.idle = false
	for i := range ag.pools {
		p := &ag.pools[i]
		if sign > 0 {
			if i == 0 {
				a.freeUnres.add(&p.free)
			}
			if p.key.role >= 0 {
				a.roles[p.key.role].reserved.add(&p.total)
			}
		} else {
			if i == 0 {
				a.freeUnres.sub(&p.free)
			}
			if p.key.role >= 0 {
				a.roles[p.key.role].reserved.sub(&p.total)
			}
		}
	}
	a.dirty = true
}

// UpdateAgent replaces an agent's totals (e.g. a new revocable estimate),
// attributes and score. When a pool shrinks below what is allocated from
// it, whole allocations of that pool are taken back, newest first, until it
// fits; they are returned so the master can rescind the offers or kill the
// tasks. Errors wrap ErrNotFound, ErrInvalid or ErrRevocable.
func (a *Allocator) UpdateAgent(info AgentInfo) ([]Offer, error) {
	i, ok := a.agentIdx[info.ID]
	if !ok {
		return nil, fmt.Errorf("update agent %s: %w", info.ID, ErrNotFound)
	}
	ag := a.agents[i]
	// Validate on a copy first.
	probe := &agent{pools: slices.Clone(ag.pools), lent: ag.lent}
	if err := a.setTotals(probe, info); err != nil {
		return nil, fmt.Errorf("update agent %s: %w", info.ID, err)
	}
	allocated := make([]vec, len(probe.pools))
	for _, e := range ag.allocs {
		allocated[e.pool].add(&e.v)
	}
	// What lent capacity taken back left overdrawn is being reclaimed by
	// the planner (Overdraft): not taken back here as well.
	var over vec
	for d, x := range ag.pools[1].free {
		over[d] = max(-x, 0)
	}
	var rescinded []Offer
	for pi := range probe.pools {
		limit := probe.pools[pi].total
		if pi == 1 {
			limit.add(&over)
		}
		for j := len(ag.allocs) - 1; j >= 0 && !allocated[pi].le(&limit); j-- {
			e := ag.allocs[j]
			if int(e.pool) != pi || (e.v.isZero() && len(e.other) == 0) {
				continue
			}
			rescinded = append(rescinded, a.entryOffer(ag, &e))
			allocated[pi].sub(&e.v)
			v := e.v
			a.take(ag, j, &v, e.other)
			ag.allocs[j].other = nil
		}
	}
	ag.dropEmpty()
	a.accountTotals(ag, -1)
	oldOtherAlloc := ag.otherTotal.Subtract(ag.other)
	ag.pools = probe.pools
	ag.otherTotal = probe.otherTotal
	ag.other = ag.otherTotal.Subtract(oldOtherAlloc)
	for pi := range ag.pools {
		ag.pools[pi].free = ag.pools[pi].total
		ag.pools[pi].free.sub(&allocated[pi])
	}
	ag.info = info
	a.accountTotals(ag, +1)
	return rescinded, nil
}

// UpdateRevocable replaces only an agent's revocable resources (a new
// estimate from its resource estimator), keeping everything else,
// dynamic reservations included. Like UpdateAgent it returns the
// revocable allocations that no longer fit, already taken back. Errors
// wrap ErrNotFound or ErrInvalid.
func (a *Allocator) UpdateRevocable(agentID string, revocable resources.Resources) ([]Offer, error) {
	i, ok := a.agentIdx[agentID]
	if !ok {
		return nil, fmt.Errorf("update revocable of %s: %w", agentID, ErrNotFound)
	}
	ag := a.agents[i]
	info := ag.info
	info.Total = ag.otherTotal.NonRevocable()
	for pi := range ag.pools {
		if pi != 1 {
			info.Total = a.appendPool(info.Total, &ag.pools[pi], &ag.pools[pi].total)
		}
	}
	info.Revocable = revocable
	return a.UpdateAgent(info)
}

// entryOffer describes an allocation entry as an Offer.
func (a *Allocator) entryOffer(ag *agent, e *allocEntry) Offer {
	o := Offer{AgentID: ag.id, FrameworkID: e.fw}
	if e.client >= 0 {
		cl := a.clients[e.client]
		o.FrameworkID = cl.fw.id
		o.Role = a.roles[cl.role].name
	}
	o.Resources = a.appendPool(nil, &ag.pools[e.pool], &e.v)
	o.Resources = append(o.Resources, e.other...)
	return o
}

// RemoveAgent forgets an agent and everything allocated on it. Errors wrap
// ErrNotFound.
func (a *Allocator) RemoveAgent(id string) error {
	i, ok := a.agentIdx[id]
	if !ok {
		return fmt.Errorf("remove agent %s: %w", id, ErrNotFound)
	}
	ag := a.agents[i]
	for j := range ag.allocs {
		e := ag.allocs[j]
		a.take(ag, j, &e.v, e.other)
	}
	ag.allocs = nil
	a.accountTotals(ag, -1)
	delete(a.agentIdx, id)
	last := a.live[len(a.live)-1]
	a.live[ag.live] = last
	a.agents[last].live = ag.live
	a.live = a.live[:len(a.live)-1]
	a.agents[i] = nil
	a.freeIdx = append(a.freeIdx, i)
	for _, c := range a.clients {
		if c != nil && c.filters != nil {
			delete(c.filters, i)
		}
	}
	return nil
}
