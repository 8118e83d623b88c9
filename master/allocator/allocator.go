package allocator

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/brimnode/brim/resources"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrNotFound: the agent, framework or role is unknown.
	ErrNotFound = errors.New("not found")
	// ErrExist: an agent or framework with that ID is already known.
	ErrExist = errors.New("already exists")
	// ErrInsufficient: the agent (or the framework's allocation) does not
	// hold the resources named.
	ErrInsufficient = errors.New("insufficient resources")
	// ErrRevocable: revocable resources cannot be reserved.
	ErrRevocable = errors.New("revocable resources cannot be reserved")
	// ErrInvalid: a malformed argument (options, role, weight, quota,
	// resources the allocator cannot represent).
	ErrInvalid = errors.New("invalid argument")
)

// Sorter names accepted in Options.Sorter.
const (
	SorterDRF    = "drf"
	SorterRandom = "random"
	SorterMeDRF  = "medrf"
)

// Clock tells the allocator the time; filters expire against it. Tests
// inject a fake.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Options configures an Allocator. The zero value is valid: DRF sorter,
// minimum allocatable "cpus:0.01 OR mem:32", 5 s default refusal, the
// system clock and a random seed.
type Options struct {
	// Sorter is "drf" (default), "random" or "medrf".
	Sorter string
	// MinAllocatable: an offer is made only when it reaches at least one
	// of these scalars (each entry is an alternative). Default cpus:0.01
	// and mem:32.
	MinAllocatable resources.Resources
	// DefaultRefuse is the filter installed by Recover with a nil refuse.
	// Default 5 s (Mesos's refuse_seconds).
	DefaultRefuse time.Duration
	// Seed makes agent shuffling (and the random sorter) reproducible; 0
	// picks a random seed.
	Seed int64
	// Clock defaults to the system clock.
	Clock Clock
}

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

// Quota is a role's guarantee (served first, and protected from other roles
// by headroom) and limit (never exceeded by allocation). Only unreserved or
// reserved non-revocable scalars count; reservations for the role count
// toward both, allocated or not.
type Quota struct {
	Guarantee resources.Resources
	Limit     resources.Resources
}

// Offer is resources of one agent allocated to one framework in one role.
// Offered resources count as allocated until Recover'd.
type Offer struct {
	FrameworkID string
	AgentID     string
	Role        string
	Resources   resources.Resources
}

// RoleShare reports a role's state for /state and the demo.
type RoleShare struct {
	Role   string
	Weight float64
	// Share is the dominant share of the role's allocation (meDRF-weighted
	// under the medrf sorter), not divided by the weight.
	Share     float64
	Allocated resources.Resources
}

// FrameworkShare reports a framework's state in one role.
type FrameworkShare struct {
	FrameworkID string
	Role        string
	Share       float64
	Allocated   resources.Resources
	Suppressed  bool
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
}

type filter struct {
	until       time.Time
	nonrev, rev vec
}

// client is a framework in one role: the unit the framework sorters order.
type client struct {
	fw     *framework
	idx    int32
	role   int32
	tie    uint64
	alloc  vec
	w      fvec
	key    float64
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

type role struct {
	name    string
	idx     int32
	tie     uint64
	weight  float64
	members []int32 // clients
	clients minHeap
	// capClients holds the revocable-capable clients, in the same order.
	capClients minHeap
	alloc      vec
	w          fvec
	key        float64
	touched    uint64
	// quota
	guar, limit         vec
	guarMask, limitMask mask
	quota               Quota
	allocUnres          vec // non-revocable unreserved allocated to the role
	reserved            vec // every reservation for the role, allocated or not
	inStage             uint64
	visited             uint64
}

// consumed is the role's quota consumption.
func (r *role) consumed() vec {
	c := r.allocUnres
	c.add(&r.reserved)
	return c
}

// owed is what the role's guarantee still lacks, per kind (>= 0).
func (r *role) owed() vec {
	var o vec
	if r.guarMask == 0 {
		return o
	}
	c := r.consumed()
	for d := range maxKinds {
		if r.guarMask.has(d) && r.guar[d] > c[d] {
			o[d] = r.guar[d] - c[d]
		}
	}
	return o
}

// Allocator is Mesos's hierarchical DRF allocator over an in-memory model
// of agents, frameworks and roles. It does no I/O. It is not safe for
// concurrent use: the master serializes every call.
type Allocator struct {
	opts   Options
	clock  Clock
	rng    *rand.Rand
	sorter string
	min    minimum

	kinds   []string
	kindIdx map[string]int

	agents   []*agent // by idx; nil for a free slot
	freeIdx  []int32
	agentIdx map[string]int32
	live     []int32

	clients  []*client
	freeCli  []int32
	fws      map[string]*framework
	roles    []*role
	roleIdx  map[string]int32
	seq      uint64
	anyQuota bool
	// orphans: agents holding usage of frameworks not added yet.
	orphans map[string][]int32

	// cluster totals
	totalW    fvec // sum of eta*total over agents
	invW      fvec
	freeUnres vec // unreserved non-revocable free on every agent
	dirty     bool

	// per-cycle scratch, kept to avoid allocations
	clientPos   []int32
	capPos      []int32
	rolePos     []int32
	capRolePos  []int32
	roleHeap    minHeap
	capRoleHeap minHeap
	quotaHeap   minHeap
	stashCapR   []entry
	stashCap    []entry
	touchedC    []int32
	touchedR    []int32
	order       []int32
	stashR      []entry
	stashC      []entry
	recs        []offerRec
	pieces      []piece
	epoch       uint64
	now         time.Time
	owedNow     vec   // headroom still owed to guarantees, during a cycle
	sink        int64 // keeps touch's loads alive
	// gen changes whenever a framework may start taking what it refused
	// before (added, updated, revived, quota changed); see agent.idle.
	gen         uint64
	filterUntil time.Time // earliest expiry of the filters met on this agent
	noIdle      bool      // tests: disable the idle-agent shortcut
	idleSkips   uint64    // agents skipped by the shortcut, for tests
	nCapable    int       // active clients taking revocable resources, this cycle
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

// New returns an empty allocator. It returns an error wrapping ErrInvalid
// for an unknown sorter or a bad minimum.
func New(opts Options) (*Allocator, error) {
	switch opts.Sorter {
	case "":
		opts.Sorter = SorterDRF
	case SorterDRF, SorterRandom, SorterMeDRF:
	default:
		return nil, fmt.Errorf("new allocator: sorter %q: %w", opts.Sorter, ErrInvalid)
	}
	if opts.DefaultRefuse == 0 {
		opts.DefaultRefuse = 5 * time.Second
	}
	if opts.DefaultRefuse < 0 {
		return nil, fmt.Errorf("new allocator: negative default refuse: %w", ErrInvalid)
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	seed := uint64(opts.Seed)
	if opts.Seed == 0 {
		seed = rand.Uint64()
	}
	a := &Allocator{
		opts:     opts,
		clock:    opts.Clock,
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		sorter:   opts.Sorter,
		kindIdx:  map[string]int{},
		agentIdx: map[string]int32{},
		fws:      map[string]*framework{},
		roleIdx:  map[string]int32{},
	}
	for _, n := range []string{resources.CPUs, resources.Mem, resources.Disk, resources.NetBandwidth} {
		a.kind(n)
	}
	minRes := opts.MinAllocatable
	if len(minRes) == 0 {
		minRes = resources.Resources{
			{Name: resources.CPUs, Type: resources.Scalar, Scalar: 10},
			{Name: resources.Mem, Type: resources.Scalar, Scalar: 32000},
		}
	}
	for _, r := range minRes {
		if r.Type != resources.Scalar || r.Scalar <= 0 {
			return nil, fmt.Errorf("new allocator: minimum %s: not a positive scalar: %w", r.Name, ErrInvalid)
		}
		d, err := a.kind(r.Name)
		if err != nil {
			return nil, fmt.Errorf("new allocator: %w", err)
		}
		a.min.set(d, int64(r.Scalar))
	}
	return a, nil
}

// kind interns a scalar name.
func (a *Allocator) kind(name string) (int, error) {
	if d, ok := a.kindIdx[name]; ok {
		return d, nil
	}
	if len(a.kinds) == maxKinds {
		return 0, fmt.Errorf("scalar %q: more than %d scalar kinds: %w", name, maxKinds, ErrInvalid)
	}
	a.kinds = append(a.kinds, name)
	a.kindIdx[name] = len(a.kinds) - 1
	return len(a.kinds) - 1, nil
}

func (a *Allocator) nextSeq() uint64 { a.seq++; return a.seq }

// role interns a role name.
func (a *Allocator) role(name string) (*role, error) {
	if i, ok := a.roleIdx[name]; ok {
		return a.roles[i], nil
	}
	if name == "" || name == resources.Unreserved {
		return nil, fmt.Errorf("role %q: %w", name, ErrInvalid)
	}
	r := &role{name: name, idx: int32(len(a.roles)), tie: a.nextSeq(), weight: 1}
	a.roles = append(a.roles, r)
	a.roleIdx[name] = r.idx
	return r, nil
}

// keyedVec is a scalar amount of one pool.
type keyedVec struct {
	key poolKey
	v   vec
}

// split turns resources into scalar amounts per pool key and the
// non-scalar rest; forceRevocable marks everything revocable.
func (a *Allocator) split(rs resources.Resources, forceRevocable bool) ([]keyedVec, resources.Resources, error) {
	var out []keyedVec
	var other resources.Resources
	for _, r := range rs {
		rev := r.Revocable || forceRevocable
		k := poolKey{role: -1, revocable: rev}
		if r.Role != "" && r.Role != resources.Unreserved {
			if rev {
				return nil, nil, fmt.Errorf("%s: %w", r, ErrRevocable)
			}
			ro, err := a.role(r.Role)
			if err != nil {
				return nil, nil, err
			}
			k.role = ro.idx
			if r.Reservation != nil {
				k.dynamic = true
				k.principal = r.Reservation.Principal
			}
		}
		if r.Type != resources.Scalar {
			rr := r
			rr.Revocable = rev
			other = append(other, rr)
			continue
		}
		if r.Scalar < 0 {
			return nil, nil, fmt.Errorf("%s: negative: %w", r, ErrInvalid)
		}
		d, err := a.kind(r.Name)
		if err != nil {
			return nil, nil, err
		}
		i := slices.IndexFunc(out, func(kv keyedVec) bool { return kv.key == k })
		if i < 0 {
			out = append(out, keyedVec{key: k})
			i = len(out) - 1
		}
		out[i].v[d] += int64(r.Scalar)
	}
	return out, other, nil
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

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
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
		if e.pool == 0 {
			r.allocUnres.sub(v)
		}
	}
}

// dropEmpty removes allocation entries that hold nothing.
func (ag *agent) dropEmpty() {
	ag.allocs = slices.DeleteFunc(ag.allocs, func(e allocEntry) bool { return e.v.isZero() && len(e.other) == 0 })
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
	probe := &agent{pools: slices.Clone(ag.pools)}
	if err := a.setTotals(probe, info); err != nil {
		return nil, fmt.Errorf("update agent %s: %w", info.ID, err)
	}
	allocated := make([]vec, len(probe.pools))
	for _, e := range ag.allocs {
		allocated[e.pool].add(&e.v)
	}
	var rescinded []Offer
	for pi := range probe.pools {
		for j := len(ag.allocs) - 1; j >= 0 && !allocated[pi].le(&probe.pools[pi].total); j-- {
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
			c.key = a.rng.ExpFloat64()
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
		return fmt.Errorf("recover from %s: framework: %w", frameworkID, ErrNotFound)
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
	// validate
	for _, kv := range kvs {
		pi := ag.poolIndex(kv.key)
		var held vec
		for j := range ag.allocs {
			if e := &ag.allocs[j]; int(e.pool) == pi && mine(e) {
				held.add(&e.v)
			}
		}
		if pi < 0 || !kv.v.le(&held) {
			return fmt.Errorf("recover %s from %s on %s: %w", res, frameworkID, agentID, ErrInsufficient)
		}
	}
	var heldOther resources.Resources
	for j := range ag.allocs {
		if e := &ag.allocs[j]; mine(e) {
			heldOther = heldOther.Add(e.other)
		}
	}
	if !heldOther.Contains(oth) {
		return fmt.Errorf("recover %s from %s on %s: %w", res, frameworkID, agentID, ErrInsufficient)
	}
	type refused struct{ nonrev, rev vec }
	got := map[int32]*refused{}
	note := func(c int32) *refused {
		if got[c] == nil {
			got[c] = &refused{}
		}
		return got[c]
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
			r := note(e.client)
			if kv.key.revocable {
				r.rev.add(&part)
			} else {
				r.nonrev.add(&part)
			}
			a.take(ag, j, &part, nil)
		}
	}
	if len(oth) > 0 {
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
				note(e.client)
				a.take(ag, j, &vec{}, part)
				left = left.Subtract(part)
			}
		}
	}
	ag.dropEmpty()
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

// SetQuota sets (or, with an empty Quota, clears) a role's quota. Only
// unreserved non-revocable scalars are allowed, each guarantee at most its
// limit. Errors wrap ErrInvalid.
func (a *Allocator) SetQuota(roleName string, q Quota) error {
	r, err := a.role(roleName)
	if err != nil {
		return fmt.Errorf("set quota: %w", err)
	}
	conv := func(rs resources.Resources) (vec, mask, error) {
		var v vec
		var m mask
		for _, x := range rs {
			if x.Type != resources.Scalar || x.Revocable || (x.Role != "" && x.Role != resources.Unreserved) || x.Scalar < 0 {
				return v, m, fmt.Errorf("set quota of %s: %s: must be an unreserved non-revocable scalar: %w", roleName, x, ErrInvalid)
			}
			d, err := a.kind(x.Name)
			if err != nil {
				return v, m, fmt.Errorf("set quota of %s: %w", roleName, err)
			}
			v[d] += int64(x.Scalar)
			m |= 1 << d
		}
		return v, m, nil
	}
	g, gm, err := conv(q.Guarantee)
	if err != nil {
		return err
	}
	l, lm, err := conv(q.Limit)
	if err != nil {
		return err
	}
	for d := range maxKinds {
		if gm.has(d) && lm.has(d) && g[d] > l[d] {
			return fmt.Errorf("set quota of %s: guarantee of %s above limit: %w", roleName, a.kinds[d], ErrInvalid)
		}
	}
	r.guar, r.guarMask, r.limit, r.limitMask, r.quota = g, gm, l, lm, q
	a.gen++
	a.anyQuota = false
	for _, x := range a.roles {
		if x.guarMask != 0 || x.limitMask != 0 {
			a.anyQuota = true
		}
	}
	return nil
}

// SetWeight sets a role's weight (> 0; default 1): a role with weight 2 is
// entitled to twice the dominant share of a role with weight 1. Errors
// wrap ErrInvalid.
func (a *Allocator) SetWeight(roleName string, w float64) error {
	if !(w > 0) || math.IsInf(w, 1) {
		return fmt.Errorf("set weight of %s: %v: %w", roleName, w, ErrInvalid)
	}
	r, err := a.role(roleName)
	if err != nil {
		return fmt.Errorf("set weight: %w", err)
	}
	r.weight = w
	return nil
}

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
	if !v.le(&ag.pools[0].free) {
		return fmt.Errorf("reserve %s on %s: %w", res, agentID, ErrInsufficient)
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

// Shares reports every role's dominant share and allocation, sorted by
// role name.
func (a *Allocator) Shares() []RoleShare {
	a.refreshTotals()
	out := make([]RoleShare, 0, len(a.roles))
	for _, r := range a.roles {
		out = append(out, RoleShare{Role: r.name, Weight: r.weight, Share: r.w.dominant(&a.invW, len(a.kinds)), Allocated: a.vecResources(&r.alloc)})
	}
	slices.SortFunc(out, func(x, y RoleShare) int { return cmpString(x.Role, y.Role) })
	return out
}

// FrameworkShares reports every framework's dominant share in each of its
// roles, sorted by framework ID then role.
func (a *Allocator) FrameworkShares() []FrameworkShare {
	a.refreshTotals()
	var out []FrameworkShare
	for _, c := range a.clients {
		if c == nil {
			continue
		}
		out = append(out, FrameworkShare{FrameworkID: c.fw.id, Role: a.roles[c.role].name,
			Share: c.w.dominant(&a.invW, len(a.kinds)), Allocated: a.vecResources(&c.alloc), Suppressed: c.suppressed})
	}
	slices.SortFunc(out, func(x, y FrameworkShare) int {
		if c := cmpString(x.FrameworkID, y.FrameworkID); c != 0 {
			return c
		}
		return cmpString(x.Role, y.Role)
	})
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// vecResources formats a scalar vector as unreserved resources.
func (a *Allocator) vecResources(v *vec) resources.Resources {
	var out resources.Resources
	for d, n := range a.kinds {
		if v[d] != 0 {
			out = append(out, resources.Resource{Name: n, Type: resources.Scalar, Scalar: resources.Value(v[d])})
		}
	}
	return out
}

// appendPool appends v of pool p as resources.
func (a *Allocator) appendPool(out resources.Resources, p *pool, v *vec) resources.Resources {
	roleName := resources.Unreserved
	if p.key.role >= 0 {
		roleName = a.roles[p.key.role].name
	}
	for d := range a.kinds {
		if v[d] != 0 {
			out = append(out, resources.Resource{Name: a.kinds[d], Type: resources.Scalar, Scalar: resources.Value(v[d]),
				Role: roleName, Reservation: p.res, Revocable: p.key.revocable})
		}
	}
	return out
}
