package allocator

import (
	"errors"
	"fmt"
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
	total     vec  // sum of every pool's total over agents
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
		_, _ = a.kind(n) // the four built-in kinds: never more than maxKinds
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

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
