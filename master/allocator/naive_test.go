package allocator

import (
	"container/heap"
	"math"
	"math/rand/v2"
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

// allocate runs one cycle and returns the number of offers.
func (n *naive) allocate() int {
	order := n.rng.Perm(len(n.agents))
	offers := 0
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
		r := n.roles[heap.Pop(roles).(userShare).user]
		fws := &naiveHeap{}
		for id, alloc := range r.fws {
			*fws = append(*fws, userShare{id, n.share(alloc)})
		}
		heap.Init(fws)
		fw := r.fws[heap.Pop(fws).(userShare).user]
		for name, v := range ag.free {
			fw[name] += v
			r.alloc[name] += v
			ag.free[name] = 0
		}
		offers++
	}
	return offers
}
