package allocator

import (
	"cmp"
	"slices"
	"time"

	"github.com/brimnode/brim/resources"
)

// Offer is resources of one agent allocated to one framework in one role.
// Offered resources count as allocated until Recover'd.
type Offer struct {
	FrameworkID string
	AgentID     string
	Role        string
	Resources   resources.Resources
}

type offerRec struct {
	client     int32
	agent      int32
	start, end int32 // into pieces
	other      resources.Resources
}

// piece is what one offer takes from one pool, with what emit needs to
// label it (so emit does not touch the agent again).
type piece struct {
	role      int32 // -1: unreserved
	revocable bool
	res       *resources.Reservation
	v         vec
}

// Allocate runs one allocation cycle and returns the offers, Mesos's way:
// agents shuffled (meDRF: alternately from the fast and the slow end of the
// score order); stage 1 serves roles below their quota guarantee, stage 2
// every role; on each agent roles in sorter order, then the role's
// frameworks in sorter order, each taking everything still allowed there.
// Offered resources count as allocated until Recover'd.
func (a *Allocator) Allocate() []Offer {
	a.refreshTotals()
	a.now = a.clock.Now()
	a.recs = a.recs[:0]
	a.pieces = a.pieces[:0]
	a.buildHeaps()
	a.order = append(a.order[:0], a.live...)
	a.rng.Shuffle(len(a.order), func(i, j int) { a.order[i], a.order[j] = a.order[j], a.order[i] })
	if a.sorter == SorterMeDRF {
		slices.SortStableFunc(a.order, func(x, y int32) int { return cmp.Compare(a.agents[y].eta, a.agents[x].eta) })
	}
	a.owedNow = vec{}
	if a.anyQuota {
		a.epoch++
		stage := a.epoch
		a.quotaHeap.pos = grow(a.quotaHeap.pos, len(a.roles))
		a.quotaHeap.reset()
		for _, r := range a.roles {
			o := r.owed()
			a.owedNow.add(&o)
			if !o.isZero() && r.clients.len() > 0 {
				r.inStage = stage
				a.quotaHeap.e = append(a.quotaHeap.e, entry{key: r.key, tie: r.tie, id: r.idx})
			}
		}
		if a.quotaHeap.len() > 0 {
			a.quotaHeap.init()
			a.runStage(1, stage, &a.quotaHeap)
		}
	}
	a.runStage(2, 0, &a.roleHeap)
	return a.emit()
}

func (a *Allocator) runStage(stage int, mark uint64, rh *minHeap) {
	if a.sorter != SorterMeDRF {
		// The shuffled walk is bound by cache misses. Loading the next
		// batch of agents in two tight loops (pointers, then the lines
		// the walk reads) lets the CPU keep many misses in flight at once
		// instead of taking them one agent at a time.
		const batch = 16
		var next [batch]*agent
		for i := 0; i < len(a.order); i += batch {
			n := min(batch, len(a.order)-i)
			for k := range n {
				next[k] = a.agents[a.order[i+k]]
			}
			for k := range n {
				a.sink += a.touch(next[k])
			}
			for k := range n {
				if rh.len() == 0 {
					return
				}
				a.allocateAgent(next[k], stage, mark, rh)
			}
		}
		return
	}
	// meDRF (seed 002, §2): the framework with the lowest share takes its
	// odd-numbered allocations from the best remaining node and its
	// even-numbered ones from the worst.
	hi, lo := 0, len(a.order)-1
	for hi <= lo && rh.len() > 0 {
		head := a.roles[rh.e[0].id].clients.e[0].id
		var ai int32
		if a.clients[head].parity%2 == 0 {
			ai = a.order[hi]
			hi++
		} else {
			ai = a.order[lo]
			lo--
		}
		a.allocateAgent(a.agents[ai], stage, mark, rh)
	}
}

// touch loads the memory allocateAgent will need for ag a few agents
// ahead, so the cache misses of the shuffled order overlap with work.
func (a *Allocator) touch(ag *agent) int64 {
	x := ag.pools[0].free[0] + ag.pools[1].free[0]
	if cap(ag.allocs) > 0 {
		x += int64(ag.allocs[:1][0].pool)
	}
	return x
}

// sharedOpen reports whether the unreserved or revocable pool of ag still
// holds something allocatable.
func (a *Allocator) unresOpen(ag *agent) bool { return a.min.allocatable(&ag.pools[0].free) }

func (a *Allocator) revOpen(ag *agent) bool {
	return a.nCapable > 0 && a.min.allocatable(&ag.pools[1].free)
}

// openFor reports whether ag still has something allocatable that role r
// can take in the main pass (its revocable leftovers go to the second).
func (a *Allocator) openFor(ag *agent, r *role) bool {
	if a.unresOpen(ag) {
		return true
	}
	for i := 2; i < len(ag.pools); i++ {
		if p := &ag.pools[i]; p.key.role == r.idx && a.min.allocatable(&p.free) {
			return true
		}
	}
	return false
}

// allocateAgent offers one agent. Main pass: roles in order, then their
// clients in order, each taking everything it is allowed, until the
// unreserved pool is gone; then reservations, straight to their roles;
// then (stage 2) what is left of the revocable pool, to capable clients in
// the same order. The order is fixed for the agent, as in Mesos; keys of
// the clients and roles served move afterwards (settle).
func (a *Allocator) allocateAgent(ag *agent, stage int, mark uint64, rh *minHeap) {
	anyReserved := a.reservedOpen(ag)
	if !anyReserved && !a.unresOpen(ag) && (stage == 1 || !a.revOpen(ag)) {
		return
	}
	if ag.idle && ag.idleGen == a.gen && a.now.Before(ag.idleUntil) {
		a.idleSkips++
		return // every framework passed on it last time, and nothing changed
	}
	ep := a.beginAgent()
	for rh.len() > 0 && a.unresOpen(ag) {
		re := rh.pop()
		a.stashR = append(a.stashR, re)
		r := a.roles[re.id]
		r.visited = ep
		a.serveRole(ag, r, stage, ep)
	}
	if anyReserved {
		a.serveReservations(ag, stage, mark, ep)
	}
	if stage == 2 {
		a.serveRevocable(ag, ep)
	}
	if len(a.touchedC) == 0 && !a.anyQuota && !a.noIdle {
		a.markIdle(ag)
	}
	a.settle(stage, ep, rh)
}

// reservedOpen reports whether a reservation pool of ag still holds
// something allocatable.
func (a *Allocator) reservedOpen(ag *agent) bool {
	for i := 2; i < len(ag.pools); i++ {
		if a.min.allocatable(&ag.pools[i].free) {
			return true
		}
	}
	return false
}

// beginAgent starts the visit of one agent: a new epoch (what was
// visited and touched on it) and empty stashes.
func (a *Allocator) beginAgent() uint64 {
	a.epoch++
	a.filterUntil = time.Time{}
	a.stashR, a.stashC = a.stashR[:0], a.stashC[:0]
	a.stashCapR, a.stashCap = a.stashCapR[:0], a.stashCap[:0]
	a.touchedR, a.touchedC = a.touchedR[:0], a.touchedC[:0]
	return a.epoch
}

// serveReservations offers ag's reservations to their roles not served
// yet on it (in stage 1 only the roles in the stage).
func (a *Allocator) serveReservations(ag *agent, stage int, mark uint64, ep uint64) {
	for i := 2; i < len(ag.pools); i++ {
		p := &ag.pools[i]
		r := a.roles[p.key.role]
		if r.visited == ep || !a.min.allocatable(&p.free) || r.clients.len() == 0 || (stage == 1 && r.inStage != mark) {
			continue
		}
		r.visited = ep
		a.serveRole(ag, r, stage, ep)
	}
}

// serveRevocable offers what is left of ag's revocable pool to the
// revocable-capable clients, roles and clients in sorter order.
func (a *Allocator) serveRevocable(ag *agent, ep uint64) {
	var p offerPlan
	for a.capRoleHeap.len() > 0 && a.revOpen(ag) {
		re := a.capRoleHeap.pop()
		a.stashCapR = append(a.stashCapR, re)
		r := a.roles[re.id]
		h := &r.capClients
		for h.len() > 0 && a.revOpen(ag) {
			ce := h.pop()
			a.stashCap = append(a.stashCap, ce)
			if c := a.clients[ce.id]; c.visited != ep {
				c.visited = ep
				if a.planOffer(ag, c, r, 2, &p) {
					a.applyOffer(ag, c, r, ep, &p)
				}
			}
		}
	}
}

// markIdle: nobody took anything on ag. Every active client was tried on
// every open pool and refused it (filter, whitelist, minimum free, size).
// Until a filter expires, the agent's free resources change or the set of
// frameworks does, the answer is the same, so later cycles skip the agent
// (the classic all-frameworks-decline case stays O(agents)). Quota is
// excluded by the caller: headroom depends on other agents.
func (a *Allocator) markIdle(ag *agent) {
	ag.idle, ag.idleGen = true, a.gen
	ag.idleUntil = a.filterUntil
	if ag.idleUntil.IsZero() {
		ag.idleUntil = a.now.Add(100 * 365 * 24 * time.Hour)
	}
}

// settle ends the visit of an agent: new keys for whoever was served,
// then everything popped goes back (a role whose stage-1 guarantee is
// now met leaves stage 1) and the served ones are repositioned in the
// heaps they stayed in.
func (a *Allocator) settle(stage int, ep uint64, rh *minHeap) {
	for _, c := range a.touchedC {
		a.nextClientKey(a.clients[c])
	}
	for _, r := range a.touchedR {
		a.nextRoleKey(a.roles[r])
	}
	for _, ce := range a.stashC {
		c := a.clients[ce.id]
		ce.key = c.key
		a.roles[c.role].clients.push(ce)
	}
	for _, ce := range a.stashCap {
		c := a.clients[ce.id]
		ce.key = c.key
		a.roles[c.role].capClients.push(ce)
	}
	for _, re := range a.stashR {
		r := a.roles[re.id]
		if o := r.owed(); stage == 1 && r.touched == ep && o.isZero() {
			r.inStage = 0 // guarantee met: out of stage 1
			continue
		}
		re.key = r.key
		rh.push(re)
	}
	for _, re := range a.stashCapR {
		re.key = a.roles[re.id].key
		a.capRoleHeap.push(re)
	}
	a.refix(rh)
}

// refix repositions the clients and roles served on the agent in the
// heaps they stayed in (their keys moved).
func (a *Allocator) refix(rh *minHeap) {
	for _, ci := range a.touchedC {
		c := a.clients[ci]
		r := a.roles[c.role]
		if p := a.clientPos[ci]; p >= 0 && r.clients.e[p].key != c.key {
			r.clients.fix(int(p), c.key)
		}
		if p := a.capPos[ci]; p >= 0 && r.capClients.e[p].key != c.key {
			r.capClients.fix(int(p), c.key)
		}
	}
	for _, ri := range a.touchedR {
		r := a.roles[ri]
		for _, h := range [...]*minHeap{rh, &a.roleHeap, &a.capRoleHeap} {
			if p := h.pos[ri]; p >= 0 && h.e[p].key != r.key {
				h.fix(int(p), r.key)
			}
		}
	}
}

func (a *Allocator) serveRole(ag *agent, r *role, stage int, ep uint64) {
	h := &r.clients
	var p offerPlan
	for h.len() > 0 && a.openFor(ag, r) {
		ce := h.pop()
		a.stashC = append(a.stashC, ce)
		c := a.clients[ce.id]
		c.visited = ep
		if a.planOffer(ag, c, r, stage, &p) {
			a.applyOffer(ag, c, r, ep, &p)
		}
	}
}

// clipUnres limits the unreserved amount offered to role r by its quota
// limit, by the headroom owed to unsatisfied guarantees (stage 2, and
// stage 1 for kinds the role has no guarantee for) and, in stage 1, by what
// the role's guarantee still lacks.
func (a *Allocator) clipUnres(un *vec, r *role, stage int) {
	var owed, cons vec
	if r.guarMask != 0 {
		owed = r.owed()
	}
	if r.limitMask != 0 {
		cons = r.consumed()
	}
	for d := range maxKinds {
		if un[d] == 0 {
			continue
		}
		if stage == 1 && r.guarMask.has(d) {
			un[d] = min(un[d], owed[d])
		} else {
			surplus := a.freeUnres[d] - a.owedNow[d] + owed[d]
			un[d] = max(0, min(un[d], surplus))
		}
		if r.limitMask.has(d) {
			un[d] = max(0, min(un[d], r.limit[d]-cons[d]))
		}
	}
}

// offerPlan is what one client may take from one agent now: the
// unreserved (clipped by quota), revocable and reserved amounts.
type offerPlan struct {
	un, rev, resv vec
	hasResv       bool
}

// planOffer fills p (whatever it held) with what client c of role r may
// take from ag now and reports whether it is an offer (applyOffer gives
// it): allowed by the framework's whitelist, allocatable, at least the
// framework's minimum, and not refused by one of c's filters (an expired
// filter is dropped; an unexpired one that refuses moves filterUntil,
// when the agent may be worth a visit again).
func (a *Allocator) planOffer(ag *agent, c *client, r *role, stage int, p *offerPlan) bool {
	f := c.fw
	if f.whitelist != nil {
		if _, ok := f.whitelist[ag.id]; !ok {
			return false
		}
	}
	*p = offerPlan{un: ag.pools[0].free}
	if a.anyQuota {
		a.clipUnres(&p.un, r, stage)
	}
	if f.revocable {
		// A pool whose lent capacity was taken back is overdrawn in some
		// kinds until its allocations are reclaimed (Lend): offer the
		// others, never a negative amount.
		p.rev = ag.pools[1].free
		p.rev.clampNeg()
	}
	for i := 2; i < len(ag.pools); i++ {
		if q := &ag.pools[i]; q.key.role == r.idx {
			p.resv.add(&q.free)
			p.hasResv = true
		}
	}
	tot := p.un
	tot.add(&p.rev)
	tot.add(&p.resv)
	if !a.min.allocatable(&tot) || (f.hasMin && !f.minFree.le(&tot)) {
		return false
	}
	return c.filters == nil || !a.filtered(ag, c, p)
}

// filtered reports whether one of c's filters (c.filters is not nil)
// refuses p on ag.
func (a *Allocator) filtered(ag *agent, c *client, p *offerPlan) bool {
	flt, ok := c.filters[ag.idx]
	if !ok {
		return false
	}
	if !a.now.Before(flt.until) {
		delete(c.filters, ag.idx)
		return false
	}
	nonrev := p.un
	nonrev.add(&p.resv)
	if !nonrev.le(&flt.nonrev) || !p.rev.le(&flt.rev) {
		return false
	}
	if a.filterUntil.IsZero() || flt.until.Before(a.filterUntil) {
		a.filterUntil = flt.until
	}
	return true
}

// applyOffer gives c everything p holds on ag (and the non-scalar
// resources its role may take), records the offer and marks c and r
// touched on this agent.
func (a *Allocator) applyOffer(ag *agent, c *client, r *role, ep uint64, p *offerPlan) {
	rec := offerRec{client: c.idx, agent: ag.idx, start: int32(len(a.pieces))}
	if !p.un.isZero() {
		a.pieces = append(a.pieces, piece{role: -1, v: p.un})
		a.give(ag, c.idx, "", 0, &p.un, nil)
	}
	if !p.rev.isZero() {
		a.pieces = append(a.pieces, piece{role: -1, revocable: true, v: p.rev})
		a.give(ag, c.idx, "", 1, &p.rev, nil)
	}
	if p.hasResv {
		a.giveReserved(ag, c, r)
	}
	if len(ag.other) > 0 {
		revocable := c.fw.revocable
		oth := ag.other.Filter(func(x resources.Resource) bool {
			return (x.Role == "" || x.Role == resources.Unreserved || x.Role == r.name) && (!x.Revocable || revocable)
		})
		if len(oth) > 0 {
			ag.other = ag.other.Subtract(oth)
			a.mergeOther(ag, c.idx, 0, oth)
			rec.other = oth
		}
	}
	rec.end = int32(len(a.pieces))
	a.recs = append(a.recs, rec)
	if c.touched != ep {
		c.touched = ep
		a.touchedC = append(a.touchedC, c.idx)
	}
	if r.touched != ep {
		r.touched = ep
		a.touchedR = append(a.touchedR, r.idx)
	}
	c.parity++
}

// giveReserved gives c every non-empty reservation pool of its role r on
// ag, each as a piece of its own.
func (a *Allocator) giveReserved(ag *agent, c *client, r *role) {
	for i := 2; i < len(ag.pools); i++ {
		if p := &ag.pools[i]; p.key.role == r.idx && !p.free.isZero() {
			v := p.free
			a.pieces = append(a.pieces, piece{role: r.idx, res: p.res, v: v})
			a.give(ag, c.idx, "", int32(i), &v, nil)
		}
	}
}

// emit turns the cycle's records into offers, with every offer's resources
// carved out of one backing array.
func (a *Allocator) emit() []Offer {
	if len(a.recs) == 0 {
		return nil
	}
	n := 0
	for _, p := range a.pieces {
		for d := range a.kinds {
			if p.v[d] != 0 {
				n++
			}
		}
	}
	for _, rec := range a.recs {
		n += len(rec.other)
	}
	backing := make(resources.Resources, n)
	offers := make([]Offer, len(a.recs))
	k := 0
	for i, rec := range a.recs {
		ag := a.agents[rec.agent]
		c := a.clients[rec.client]
		start := k
		for _, p := range a.pieces[rec.start:rec.end] {
			roleName := resources.Unreserved
			if p.role >= 0 {
				roleName = a.roles[p.role].name
			}
			for d, name := range a.kinds {
				if p.v[d] == 0 {
					continue
				}
				r := &backing[k]
				r.Name, r.Scalar, r.Role, r.Reservation, r.Revocable = name, resources.Value(p.v[d]), roleName, p.res, p.revocable
				k++
			}
		}
		k += copy(backing[k:], rec.other)
		offers[i] = Offer{FrameworkID: c.fw.id, AgentID: ag.id, Role: a.roles[c.role].name, Resources: backing[start:k:k]}
	}
	return offers
}
