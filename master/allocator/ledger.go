package allocator

import (
	"slices"

	"github.com/brimnode/brim/resources"
)

// give moves v of pool pi of ag to client c (or to orphan framework fw when
// c < 0), with the non-scalar part other.
func (a *Allocator) give(ag *agent, c int32, fw string, pi int32, v *vec, other resources.Resources) {
	p := &ag.pools[pi]
	p.free.sub(v)
	if pi == 0 {
		a.freeUnres.sub(v)
	}
	i := -1
	for j := range ag.allocs {
		e := &ag.allocs[j]
		if e.client == c && e.pool == pi && (c >= 0 || e.fw == fw) {
			i = j
			break
		}
	}
	if i < 0 {
		ag.allocs = append(ag.allocs, allocEntry{client: c, fw: fw, pool: pi})
		i = len(ag.allocs) - 1
	}
	e := &ag.allocs[i]
	e.v.add(v)
	if len(other) > 0 {
		e.other = e.other.Add(other)
	}
	if c < 0 {
		return
	}
	cl := a.clients[c]
	r := a.roles[cl.role]
	var before vec
	if r.guarMask != 0 && pi == 0 {
		before = r.owed()
	}
	cl.alloc.add(v)
	cl.w.addScaled(v, ag.eta)
	r.alloc.add(v)
	r.w.addScaled(v, ag.eta)
	if pi == 0 {
		r.allocUnres.add(v)
		if r.guarMask != 0 {
			after := r.owed()
			a.owedNow.sub(&before)
			a.owedNow.add(&after)
		}
	}
}

// take returns v (and other) of allocation entry i of ag to the agent.
func (a *Allocator) take(ag *agent, i int, v *vec, other resources.Resources) {
	ag.idle = false
	e := &ag.allocs[i]
	p := &ag.pools[e.pool]
	e.v.sub(v)
	p.free.add(v)
	if e.pool == 0 {
		a.freeUnres.add(v)
	}
	if len(other) > 0 {
		e.other = e.other.Subtract(other)
		ag.other = ag.other.Add(other)
	}
	if e.client >= 0 {
		cl := a.clients[e.client]
		r := a.roles[cl.role]
		cl.alloc.sub(v)
		cl.w.subScaled(v, ag.eta)
		r.alloc.sub(v)
		r.w.subScaled(v, ag.eta)
		if a.sorter == SorterMeDRF {
			// What is given back is weighted by a real factor η:
			// nothing held must weigh exactly nothing, not 1e-15.
			cl.w.clearEmpty(&cl.alloc)
			r.w.clearEmpty(&r.alloc)
		}
		if e.pool == 0 {
			r.allocUnres.sub(v)
		}
	}
}

// dropEmpty removes allocation entries that hold nothing.
func (ag *agent) dropEmpty() {
	ag.allocs = slices.DeleteFunc(ag.allocs, func(e allocEntry) bool { return e.v.isZero() && len(e.other) == 0 })
}
