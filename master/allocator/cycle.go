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
// the clients and roles served move afterwards.
func (a *Allocator) allocateAgent(ag *agent, stage int, mark uint64, rh *minHeap) {
	anyReserved := false
	for i := 2; i < len(ag.pools); i++ {
		if a.min.allocatable(&ag.pools[i].free) {
			anyReserved = true
			break
		}
	}
	if !anyReserved && !a.unresOpen(ag) && (stage == 1 || !a.revOpen(ag)) {
		return
	}
	if ag.idle && ag.idleGen == a.gen && a.now.Before(ag.idleUntil) {
		a.idleSkips++
		return // every framework passed on it last time, and nothing changed
	}
	a.epoch++
	ep := a.epoch
	a.filterUntil = time.Time{}
	a.stashR, a.stashC = a.stashR[:0], a.stashC[:0]
	a.stashCapR, a.stashCap = a.stashCapR[:0], a.stashCap[:0]
	a.touchedR, a.touchedC = a.touchedR[:0], a.touchedC[:0]
	for rh.len() > 0 && a.unresOpen(ag) {
		re := rh.pop()
		a.stashR = append(a.stashR, re)
		r := a.roles[re.id]
		r.visited = ep
		a.serveRole(ag, r, stage, ep)
	}
	if anyReserved {
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
	if stage == 2 {
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
					a.tryOffer(ag, c, r, stage, ep)
				}
			}
		}
	}
	if len(a.touchedC) == 0 && !a.anyQuota && !a.noIdle {
		// Nobody took anything: every active client was tried on every
		// open pool and refused it (filter, whitelist, minimum free,
		// size). Until a filter expires, the agent's free resources
		// change or the set of frameworks does, the answer is the same,
		// so later cycles skip the agent (the classic all-frameworks-
		// decline case stays O(agents)). Quota is excluded: headroom
		// depends on other agents.
		ag.idle, ag.idleGen = true, a.gen
		ag.idleUntil = a.filterUntil
		if ag.idleUntil.IsZero() {
			ag.idleUntil = a.now.Add(100 * 365 * 24 * time.Hour)
		}
	}
	// New keys for whoever was served, then everything popped goes back
	// and the served ones are repositioned in the heaps they stayed in.
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
	for h.len() > 0 && a.openFor(ag, r) {
		ce := h.pop()
		a.stashC = append(a.stashC, ce)
		c := a.clients[ce.id]
		c.visited = ep
		a.tryOffer(ag, c, r, stage, ep)
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

func (a *Allocator) tryOffer(ag *agent, c *client, r *role, stage int, ep uint64) {
	f := c.fw
	if f.whitelist != nil {
		if _, ok := f.whitelist[ag.id]; !ok {
			return
		}
	}
	un := ag.pools[0].free
	if a.anyQuota {
		a.clipUnres(&un, r, stage)
	}
	var rev, resv vec
	if f.revocable {
		rev = ag.pools[1].free
	}
	hasResv := false
	for i := 2; i < len(ag.pools); i++ {
		if p := &ag.pools[i]; p.key.role == r.idx {
			resv.add(&p.free)
			hasResv = true
		}
	}
	tot := un
	tot.add(&rev)
	tot.add(&resv)
	if !a.min.allocatable(&tot) {
		return
	}
	if f.hasMin && !f.minFree.le(&tot) {
		return
	}
	if c.filters != nil {
		if flt, ok := c.filters[ag.idx]; ok {
			if !a.now.Before(flt.until) {
				delete(c.filters, ag.idx)
			} else {
				nonrev := un
				nonrev.add(&resv)
				if nonrev.le(&flt.nonrev) && rev.le(&flt.rev) {
					if a.filterUntil.IsZero() || flt.until.Before(a.filterUntil) {
						a.filterUntil = flt.until
					}
					return
				}
			}
		}
	}
	rec := offerRec{client: c.idx, agent: ag.idx, start: int32(len(a.pieces))}
	if !un.isZero() {
		a.pieces = append(a.pieces, piece{role: -1, v: un})
		a.give(ag, c.idx, "", 0, &un, nil)
	}
	if !rev.isZero() {
		a.pieces = append(a.pieces, piece{role: -1, revocable: true, v: rev})
		a.give(ag, c.idx, "", 1, &rev, nil)
	}
	if hasResv {
		for i := 2; i < len(ag.pools); i++ {
			if p := &ag.pools[i]; p.key.role == r.idx && !p.free.isZero() {
				v := p.free
				a.pieces = append(a.pieces, piece{role: r.idx, res: p.res, v: v})
				a.give(ag, c.idx, "", int32(i), &v, nil)
			}
		}
	}
	if len(ag.other) > 0 {
		oth := ag.other.Filter(func(x resources.Resource) bool {
			return (x.Role == "" || x.Role == resources.Unreserved || x.Role == r.name) && (!x.Revocable || f.revocable)
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
