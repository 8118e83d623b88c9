package allocator

import (
	"fmt"
	"slices"

	"github.com/brimnode/brim/resources"
)

// Capabilities are the framework capabilities the allocator honours.
type Capabilities struct {
	// Revocable: the framework accepts revocable resources
	// (REVOCABLE_RESOURCES).
	Revocable bool
}

// OfferFilter restricts which agents a framework is offered, the two
// filters of seed 000: "only agents from list L" and "only agents with at
// least R free resources". An agent that fails it is skipped as if the
// framework had declined it.
type OfferFilter struct {
	// Agents, when non-empty, is the only set of agents offered.
	Agents []string
	// MinFree, when non-empty, is the least amount of each named scalar an
	// offer must carry.
	MinFree resources.Resources
}

// FrameworkInfo describes a framework to the allocator.
type FrameworkInfo struct {
	ID string
	// Roles the framework subscribes with; at least one.
	Roles        []string
	Capabilities Capabilities
	OfferFilter  OfferFilter
	// SuppressedRoles start suppressed (no offers until Revive).
	SuppressedRoles []string
}

// client is a framework in one role: the unit the framework sorters order.
type client struct {
	fw     *framework
	idx    int32
	role   int32
	tie    uint64
	alloc  vec
	w      fvec
	key    shareKey
	parity uint32 // meDRF: allocations received, odd ones from fast nodes
	// suppressed clients are left out of the sorter.
	suppressed bool
	touched    uint64
	visited    uint64
	filters    map[int32]filter
}

type framework struct {
	id        string
	info      FrameworkInfo
	revocable bool
	clients   []int32
	whitelist map[string]struct{}
	minFree   vec
	hasMin    bool
}

// clientFor picks the client of f that resources with these pools belong
// to: the role of a reservation, else the framework's first role.
func (a *Allocator) clientFor(f *framework, kvs []keyedVec) int32 {
	for _, kv := range kvs {
		if kv.key.role >= 0 {
			for _, c := range f.clients {
				if a.clients[c].role == kv.key.role {
					return c
				}
			}
		}
	}
	return f.clients[0]
}

// AddFramework adds a framework. used is what it already holds (agent ID
// -> resources); usage an agent reported for it earlier is claimed instead.
// Errors wrap ErrExist, ErrInvalid, ErrNotFound (unknown agent) or
// ErrInsufficient.
func (a *Allocator) AddFramework(info FrameworkInfo, used map[string]resources.Resources) error {
	if info.ID == "" || len(info.Roles) == 0 {
		return fmt.Errorf("add framework %q: id and at least one role required: %w", info.ID, ErrInvalid)
	}
	if _, ok := a.fws[info.ID]; ok {
		return fmt.Errorf("add framework %s: %w", info.ID, ErrExist)
	}
	f := &framework{id: info.ID}
	if err := a.setFrameworkInfo(f, info); err != nil {
		return fmt.Errorf("add framework %s: %w", info.ID, err)
	}
	for _, rn := range info.Roles {
		if _, err := a.role(rn); err != nil {
			return fmt.Errorf("add framework %s: %w", info.ID, err)
		}
	}
	// Validate usage.
	type use struct {
		ag   *agent
		kvs  []keyedVec
		pidx []int
		oth  resources.Resources
	}
	var uses []use
	for _, aid := range sortedKeys(used) {
		ai, ok := a.agentIdx[aid]
		if !ok {
			return fmt.Errorf("add framework %s: used on agent %s: %w", info.ID, aid, ErrNotFound)
		}
		ag := a.agents[ai]
		if slices.ContainsFunc(ag.allocs, func(e allocEntry) bool { return e.client < 0 && e.fw == info.ID }) {
			continue // the agent reported it already
		}
		kvs, oth, err := a.split(used[aid], false)
		if err != nil {
			return fmt.Errorf("add framework %s: used on agent %s: %w", info.ID, aid, err)
		}
		u := use{ag: ag, kvs: kvs, oth: oth}
		for _, kv := range kvs {
			pi := ag.poolIndex(kv.key)
			if pi < 0 || !kv.v.le(&ag.pools[pi].free) {
				return fmt.Errorf("add framework %s: used on agent %s: %w", info.ID, aid, ErrInsufficient)
			}
			u.pidx = append(u.pidx, pi)
		}
		if !ag.other.Contains(oth) {
			return fmt.Errorf("add framework %s: used on agent %s: %w", info.ID, aid, ErrInsufficient)
		}
		uses = append(uses, u)
	}
	a.fws[info.ID] = f
	a.gen++
	for _, rn := range info.Roles {
		r, _ := a.role(rn)
		if slices.ContainsFunc(f.clients, func(c int32) bool { return a.clients[c].role == r.idx }) {
			continue
		}
		c := &client{fw: f, role: r.idx, tie: a.nextSeq()}
		c.suppressed = slices.Contains(info.SuppressedRoles, rn)
		if n := len(a.freeCli); n > 0 {
			c.idx = a.freeCli[n-1]
			a.freeCli = a.freeCli[:n-1]
			a.clients[c.idx] = c
		} else {
			c.idx = int32(len(a.clients))
			a.clients = append(a.clients, c)
		}
		if a.sorter == SorterRandom {
			c.key = realKey(a.rng.ExpFloat64())
		}
		f.clients = append(f.clients, c.idx)
		r.members = append(r.members, c.idx)
	}
	// Claim orphan usage.
	for _, ai := range a.orphans[info.ID] {
		if int(ai) >= len(a.agents) || a.agents[ai] == nil {
			continue
		}
		ag := a.agents[ai]
		for j := range ag.allocs {
			e := &ag.allocs[j]
			if e.client >= 0 || e.fw != info.ID {
				continue
			}
			v, oth, pi := e.v, e.other, e.pool
			c := a.clientFor(f, []keyedVec{{key: ag.pools[pi].key}})
			// re-account the entry as the client's
			e.client, e.fw, e.v, e.other = c, "", vec{}, nil
			ag.pools[pi].free.add(&v)
			if pi == 0 {
				a.freeUnres.add(&v)
			}
			a.give(ag, c, "", pi, &v, nil)
			a.mergeOther(ag, c, pi, oth)
		}
		ag.dropEmpty()
	}
	delete(a.orphans, info.ID)
	for _, u := range uses {
		c := a.clientFor(f, u.kvs)
		for i, kv := range u.kvs {
			a.give(u.ag, c, "", int32(u.pidx[i]), &kv.v, nil)
		}
		if len(u.oth) > 0 {
			u.ag.other = u.ag.other.Subtract(u.oth)
			a.give(u.ag, c, "", 0, &vec{}, u.oth)
		}
	}
	return nil
}

// mergeOther records non-scalar resources already taken from ag.other as
// held by client c.
func (a *Allocator) mergeOther(ag *agent, c, pi int32, oth resources.Resources) {
	if len(oth) == 0 {
		return
	}
	for j := range ag.allocs {
		if e := &ag.allocs[j]; e.client == c && e.pool == pi {
			e.other = e.other.Add(oth)
			return
		}
	}
	ag.allocs = append(ag.allocs, allocEntry{client: c, pool: pi, other: oth})
}

func (a *Allocator) setFrameworkInfo(f *framework, info FrameworkInfo) error {
	f.info = info
	f.revocable = info.Capabilities.Revocable
	f.whitelist = nil
	if len(info.OfferFilter.Agents) > 0 {
		f.whitelist = make(map[string]struct{}, len(info.OfferFilter.Agents))
		for _, id := range info.OfferFilter.Agents {
			f.whitelist[id] = struct{}{}
		}
	}
	f.minFree, f.hasMin = vec{}, false
	for _, r := range info.OfferFilter.MinFree {
		if r.Type != resources.Scalar {
			return fmt.Errorf("offer filter %s: only scalars: %w", r.Name, ErrInvalid)
		}
		d, err := a.kind(r.Name)
		if err != nil {
			return err
		}
		f.minFree[d] += int64(r.Scalar)
		f.hasMin = true
	}
	return nil
}

// UpdateFramework changes a framework's capabilities, offer filter and
// suppressed roles. Its roles cannot change (remove and add it again).
// Errors wrap ErrNotFound or ErrInvalid.
func (a *Allocator) UpdateFramework(info FrameworkInfo) error {
	f, ok := a.fws[info.ID]
	if !ok {
		return fmt.Errorf("update framework %s: %w", info.ID, ErrNotFound)
	}
	if !slices.Equal(info.Roles, f.info.Roles) {
		return fmt.Errorf("update framework %s: roles cannot change: %w", info.ID, ErrInvalid)
	}
	if err := a.setFrameworkInfo(f, info); err != nil {
		return fmt.Errorf("update framework %s: %w", info.ID, err)
	}
	a.gen++
	for _, c := range f.clients {
		cl := a.clients[c]
		cl.suppressed = slices.Contains(info.SuppressedRoles, a.roles[cl.role].name)
	}
	return nil
}

// RemoveFramework forgets a framework; everything allocated to it returns
// to the agents. Errors wrap ErrNotFound.
func (a *Allocator) RemoveFramework(id string) error {
	f, ok := a.fws[id]
	if !ok {
		return fmt.Errorf("remove framework %s: %w", id, ErrNotFound)
	}
	for _, ai := range a.live {
		ag := a.agents[ai]
		found := false
		for j := range ag.allocs {
			e := ag.allocs[j]
			if e.client >= 0 && a.clients[e.client].fw == f {
				a.take(ag, j, &e.v, e.other)
				ag.allocs[j].other = nil
				found = true
			}
		}
		if found {
			ag.dropEmpty()
		}
	}
	for _, c := range f.clients {
		cl := a.clients[c]
		r := a.roles[cl.role]
		r.members = slices.DeleteFunc(r.members, func(x int32) bool { return x == c })
		a.clients[c] = nil
		a.freeCli = append(a.freeCli, c)
	}
	delete(a.fws, id)
	return nil
}

// Suppress stops offers to the framework in the given roles (all its roles
// when none is given). Unknown frameworks and roles are ignored.
func (a *Allocator) Suppress(frameworkID string, roles ...string) {
	a.eachClient(frameworkID, roles, func(c *client) { c.suppressed = true })
}

// Revive resumes offers to the framework in the given roles (all when none
// is given) and clears its filters in those roles.
func (a *Allocator) Revive(frameworkID string, roles ...string) {
	a.eachClient(frameworkID, roles, func(c *client) {
		c.suppressed = false
		c.filters = nil
	})
	a.gen++
}

func (a *Allocator) eachClient(frameworkID string, roles []string, fn func(*client)) {
	f, ok := a.fws[frameworkID]
	if !ok {
		return
	}
	for _, c := range f.clients {
		cl := a.clients[c]
		if len(roles) == 0 || slices.Contains(roles, a.roles[cl.role].name) {
			fn(cl)
		}
	}
}
