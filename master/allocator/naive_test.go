package allocator

import (
	"container/heap"
	"math"
	"math/rand/v2"

	"github.com/brimnode/brim/resources"
)

// naive is the baseline the benchmark compares against: the same
// hierarchical cycle written the way seed 000's sample writes DRF, with
// resources in string-keyed maps and a min-heap of dominant shares rebuilt
// for every pick (first among roles, then among the role's frameworks).
// It supports what the benchmark instances use: unreserved resources,
// weighted roles, no filters.
type naive struct {
	capacity map[string]float64
	agents   []naiveAgent
	roles    map[string]*naiveRole
	rng      *rand.Rand
}

type naiveAgent struct {
	id   string
	free map[string]float64
}

type naiveRole struct {
	weight float64
	alloc  map[string]float64
	fws    map[string]map[string]float64 // framework -> allocation
}

// userShare and minHeap follow the seed's sample.
type userShare struct {
	user  string
	share float64
}

type naiveHeap []userShare

func (h naiveHeap) Len() int { return len(h) }
func (h naiveHeap) Less(i, j int) bool {
	return h[i].share < h[j].share || (h[i].share == h[j].share && h[i].user < h[j].user)
}
func (h naiveHeap) Swap(i, j int)       { h[i], h[j] = h[j], h[i] }
func (h *naiveHeap) Push(x interface{}) { *h = append(*h, x.(userShare)) }
func (h *naiveHeap) Pop() interface{} {
	old := *h
	n := len(old)
	x := old[n-1]
	*h = old[:n-1]
	return x
}

func (n *naive) share(alloc map[string]float64) float64 {
	var s float64
	for name, v := range alloc {
		s = math.Max(s, v/n.capacity[name])
	}
	return s
}

// allocate runs one cycle and returns the offers, built the plain way (one
// resources.Resources per offer).
func (n *naive) allocate() []Offer {
	order := n.rng.Perm(len(n.agents))
	var offers []Offer
	for _, i := range order {
		ag := &n.agents[i]
		if ag.free["cpus"] < 0.01 && ag.free["mem"] < 32 {
			continue
		}
		roles := &naiveHeap{}
		for name, r := range n.roles {
			if len(r.fws) > 0 {
				*roles = append(*roles, userShare{name, n.share(r.alloc) / r.weight})
			}
		}
		heap.Init(roles)
		roleName := heap.Pop(roles).(userShare).user
		r := n.roles[roleName]
		fws := &naiveHeap{}
		for id, alloc := range r.fws {
			*fws = append(*fws, userShare{id, n.share(alloc)})
		}
		heap.Init(fws)
		fwID := heap.Pop(fws).(userShare).user
		fw := r.fws[fwID]
		var res resources.Resources
		for name, v := range ag.free {
			if v == 0 {
				continue
			}
			res = append(res, resources.Resource{Name: name, Type: resources.Scalar, Scalar: resources.FromFloat(v), Role: resources.Unreserved})
			fw[name] += v
			r.alloc[name] += v
			ag.free[name] = 0
		}
		offers = append(offers, Offer{FrameworkID: fwID, AgentID: ag.id, Role: roleName, Resources: res})
	}
	return offers
}
