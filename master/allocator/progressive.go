package allocator

import "math"

// ProgressiveFill computes the task-level DRF allocation of seed 000 by
// progressive filling: repeatedly launch one task of the user with the lowest
// dominant share (ties to the lower index) whose next task still fits; a
// user whose next task does not fit stops receiving tasks. It returns the
// number of tasks per user. capacity[d] is the amount of resource d and
// demands[u][d] what one task of user u needs (a missing trailing entry is
// zero). A user whose demand vector is all zero gets no task (it would be
// unbounded). Pure and safe for concurrent use.
func ProgressiveFill(capacity []float64, demands [][]float64) []int {
	n := len(demands)
	tasks := make([]int, n)
	used := make([]float64, len(capacity))
	share := make([]float64, n)
	step := make([]float64, n) // dominant share of one task
	active := make([]bool, n)
	for u, dem := range demands {
		for d, x := range dem {
			if x <= 0 {
				continue
			}
			if d >= len(capacity) || capacity[d] <= 0 {
				step[u] = math.Inf(1)
				break
			}
			step[u] = math.Max(step[u], x/capacity[d])
		}
		active[u] = step[u] > 0 && !math.IsInf(step[u], 1)
	}
	// The seed's sample rebuilds a heap per pick; a linear scan is simpler
	// and as fast for the handful of users this is meant for.
	for {
		best := -1
		for u := range n {
			if active[u] && (best < 0 || share[u] < share[best]) {
				best = u
			}
		}
		if best < 0 {
			return tasks
		}
		if !fits(capacity, used, demands[best]) {
			active[best] = false
			continue
		}
		for d, x := range demands[best] {
			used[d] += x
		}
		tasks[best]++
		share[best] = float64(tasks[best]) * step[best]
	}
}

// fitSlack absorbs float rounding when a task exactly fills a resource.
const fitSlack = 1e-9

func fits(capacity, used, dem []float64) bool {
	for d, x := range dem {
		if x > 0 && used[d]+x > capacity[d]*(1+fitSlack)+fitSlack {
			return false
		}
	}
	return true
}

// FairShares computes the continuous (divisible tasks) DRF allocation by
// water-filling: every user's dominant share rises at the same rate until a
// resource it uses saturates, then that user is frozen. It returns the
// number of (fractional) tasks per user; user u receives tasks[u]*demands[u].
// This is the allocation the DRF paper proves Pareto-efficient, envy-free,
// sharing-incentive and strategy-proof; ProgressiveFill is its integral
// approximation. Pure and safe for concurrent use.
func FairShares(capacity []float64, demands [][]float64) []float64 {
	n := len(demands)
	tasks := make([]float64, n)
	// per unit of dominant share, user u consumes norm[u][d] of resource d.
	norm := make([][]float64, n)
	active := make([]bool, n)
	for u, dem := range demands {
		var s float64
		for d, x := range dem {
			if x <= 0 {
				continue
			}
			if d >= len(capacity) || capacity[d] <= 0 {
				s = math.Inf(1)
				break
			}
			s = math.Max(s, x/capacity[d])
		}
		if s == 0 || math.IsInf(s, 1) {
			continue
		}
		active[u] = true
		norm[u] = make([]float64, len(capacity))
		for d, x := range dem {
			if x > 0 {
				norm[u][d] = x / s
			}
		}
	}
	used := make([]float64, len(capacity))
	level := 0.0 // common dominant share of the active users
	for {
		// rate of consumption of each resource per unit of level
		rate := make([]float64, len(capacity))
		any := false
		for u := range n {
			if !active[u] {
				continue
			}
			any = true
			for d, x := range norm[u] {
				rate[d] += x
			}
		}
		if !any {
			break
		}
		delta := math.Inf(1)
		for d, r := range rate {
			if r > 0 {
				delta = math.Min(delta, (capacity[d]-used[d])/r)
			}
		}
		delta = math.Max(delta, 0)
		level += delta
		for d, r := range rate {
			used[d] += r * delta
		}
		// freeze every active user touching a saturated resource
		for u := range n {
			if !active[u] {
				continue
			}
			for d, x := range norm[u] {
				if x > 0 && capacity[d]-used[d] <= fitSlack*math.Max(1, capacity[d]) {
					active[u] = false
					break
				}
			}
			if !active[u] {
				tasks[u] = level * taskPerShare(demands[u], capacity)
			}
		}
	}
	return tasks
}

// taskPerShare is the number of tasks per unit of dominant share.
func taskPerShare(dem, capacity []float64) float64 {
	var s float64
	for d, x := range dem {
		if x > 0 {
			s = math.Max(s, x/capacity[d])
		}
	}
	return 1 / s
}
