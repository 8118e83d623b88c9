package allocator

// refreshTotals recomputes the cluster totals (and, under meDRF, the node
// factors η and every weighted allocation) after agents changed.
func (a *Allocator) refreshTotals() {
	if !a.dirty {
		return
	}
	a.dirty = false
	etaChanged := false
	if a.sorter == SorterMeDRF && len(a.live) > 0 {
		var sum float64
		for _, ai := range a.live {
			sum += score(a.agents[ai])
		}
		mean := sum / float64(len(a.live))
		for _, ai := range a.live {
			ag := a.agents[ai]
			if eta := score(ag) / mean; eta != ag.eta {
				ag.eta = eta
				etaChanged = true
			}
		}
	} else {
		for _, ai := range a.live {
			if ag := a.agents[ai]; ag.eta != 1 {
				ag.eta = 1
				etaChanged = true
			}
		}
	}
	a.totalW, a.total = fvec{}, vec{}
	for _, ai := range a.live {
		ag := a.agents[ai]
		for i := range ag.pools {
			a.totalW.addScaled(&ag.pools[i].total, ag.eta)
			a.total.add(&ag.pools[i].total)
		}
		// Lent capacity is the unreserved pool's, counted there once.
		a.totalW.subScaled(&ag.lent, ag.eta)
		a.total.sub(&ag.lent)
	}
	for d := range a.invW {
		a.invW[d] = 0
		if a.totalW[d] > 0 {
			a.invW[d] = 1 / a.totalW[d]
		}
	}
	if !etaChanged {
		return
	}
	for _, c := range a.clients {
		if c != nil {
			c.w = fvec{}
		}
	}
	for _, r := range a.roles {
		r.w = fvec{}
	}
	for _, ai := range a.live {
		ag := a.agents[ai]
		for j := range ag.allocs {
			e := &ag.allocs[j]
			if e.client < 0 {
				continue
			}
			c := a.clients[e.client]
			c.w.addScaled(&e.v, ag.eta)
			a.roles[c.role].w.addScaled(&e.v, ag.eta)
		}
	}
}

func score(ag *agent) float64 {
	if ag.info.Score > 0 {
		return ag.info.Score
	}
	return 1
}

// freshKeys stores every client's and role's current sorter key: the
// dominant share (÷ weight) for drf and medrf, the persisted lottery time
// for random.
func (a *Allocator) freshKeys() {
	if a.sorter == SorterRandom {
		return
	}
	for _, c := range a.clients {
		if c != nil {
			c.key = a.shareKey(&c.alloc, &c.w, 1)
		}
	}
	for _, r := range a.roles {
		r.key = a.shareKey(&r.alloc, &r.w, r.weight)
	}
}

// shareKey is the sorter key of an allocation (and its meDRF-weighted
// form w) for weight: exact under drf, real-valued under meDRF.
func (a *Allocator) shareKey(alloc *vec, w *fvec, weight float64) shareKey {
	if a.sorter == SorterMeDRF {
		return realKey(w.dominant(&a.invW, len(a.kinds)) / weight)
	}
	num, den, d := dominant(alloc, &a.total, len(a.kinds))
	// The float is only for the fast path: 1/total rounded will do.
	f := float64(num) * a.invW[d]
	if weight != 1 {
		f /= weight
	}
	return makeKey(num, den, weight, f)
}

// share is the dominant share reported by Shares and FrameworkShares.
func (a *Allocator) share(alloc *vec, w *fvec) float64 {
	k := a.shareKey(alloc, w, 1)
	return k.value()
}

// nextKey advances a client's or role's key after it was served.
func (a *Allocator) nextClientKey(c *client) {
	if a.sorter == SorterRandom {
		c.key = realKey(c.key.value() + a.rng.ExpFloat64())
		return
	}
	c.key = a.shareKey(&c.alloc, &c.w, 1)
}

func (a *Allocator) nextRoleKey(r *role) {
	if a.sorter == SorterRandom {
		// Weighted lottery: a role's next turn comes after an exponential
		// time of rate weight, so it is first with probability
		// proportional to its weight (Mesos's random sorter).
		r.key = realKey(r.key.value() + a.rng.ExpFloat64()/r.weight)
		return
	}
	r.key = a.shareKey(&r.alloc, &r.w, r.weight)
}

func grow(s []int32, n int) []int32 {
	if cap(s) < n {
		s = make([]int32, n, n+n/2)
	}
	s = s[:n]
	for i := range s {
		s[i] = -1
	}
	return s
}

// buildHeaps rebuilds every sorter from the current keys: O(clients +
// roles) per cycle, which lets events stay O(1). Besides the role heap and
// a client heap per role, revocable-capable clients are also kept in heaps
// of their own so revocable resources left on an agent find a taker
// without walking every framework.
func (a *Allocator) buildHeaps() {
	a.freshKeys()
	a.clientPos = grow(a.clientPos, len(a.clients))
	a.capPos = grow(a.capPos, len(a.clients))
	a.rolePos = grow(a.rolePos, len(a.roles))
	a.capRolePos = grow(a.capRolePos, len(a.roles))
	a.roleHeap.pos, a.capRoleHeap.pos = a.rolePos, a.capRolePos
	a.roleHeap.reset()
	a.capRoleHeap.reset()
	a.nCapable = 0
	for _, r := range a.roles {
		h, ch := &r.clients, &r.capClients
		h.pos, ch.pos = a.clientPos, a.capPos
		h.reset()
		ch.reset()
		for _, ci := range r.members {
			c := a.clients[ci]
			if c.suppressed {
				continue
			}
			e := entry{key: c.key, tie: c.tie, id: ci}
			h.e = append(h.e, e)
			if c.fw.revocable {
				ch.e = append(ch.e, e)
			}
		}
		h.init()
		ch.init()
		a.nCapable += ch.len()
		if h.len() > 0 {
			a.roleHeap.e = append(a.roleHeap.e, entry{key: r.key, tie: r.tie, id: r.idx})
		}
		if ch.len() > 0 {
			a.capRoleHeap.e = append(a.capRoleHeap.e, entry{key: r.key, tie: r.tie, id: r.idx})
		}
	}
	a.roleHeap.init()
	a.capRoleHeap.init()
}
