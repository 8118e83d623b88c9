package master_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/masterlink"
	"github.com/brimnode/brim/resources"
)

// startScoredAgent runs an agent reporting a performance score.
func (c *cluster) startScoredAgent(dir string, r *fakeRunner, score float64) {
	c.t.Helper()
	cl, err := masterlink.New(masterlink.Options{Master: c.addr, StateDir: dir, Resources: resources.MustParse("cpus:4;mem:4096"),
		Runner: r, PerformanceScore: score, ReconnectMin: 50 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
	if err != nil {
		c.t.Fatal(err)
	}
	r.mu.Lock()
	r.client = cl
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = cl.Run(ctx) }()
	c.t.Cleanup(func() { cancel(); wg.Wait() })
}

// TestMeDRFUsesAgentScores: agents report their performance scores, /state
// shows them, and --sorter medrf weighs the allocation with them as the
// allocator's TestMeDRFWeightsShares predicts: holding the whole of a fast
// agent (score 3, η = 1.5) next to a slow one (score 1, η = 0.5) is a
// meDRF share of 1.5·4/(1.5·4+0.5·4) = 0.75, where DRF says 0.5. Before,
// the master never set a score and medrf computed 0.5.
func TestMeDRFUsesAgentScores(t *testing.T) {
	c := newCluster(t, master.Options{Allocator: allocator.Options{Sorter: allocator.SorterMeDRF}})
	c.startScoredAgent(t.TempDir(), newFakeRunner(), 3)
	c.startScoredAgent(t.TempDir(), newFakeRunner(), 1)
	f := c.startFramework("fw")
	scores := map[string]float64{}
	var slow []string
	seen := map[string]bool{}
	for len(seen) < 2 {
		for _, o := range f.nextOffers(t) {
			seen[o.AgentId] = true
			if len(scores) < 2 {
				for _, a := range c.m.State().Agents {
					scores[a.ID] = a.PerformanceScore
				}
			}
			if scores[o.AgentId] == 1 {
				slow = append(slow, o.Id)
			}
		}
	}
	if len(scores) != 2 {
		t.Fatalf("state shows scores %v", scores)
	}
	var got []float64
	for _, s := range scores {
		got = append(got, s)
	}
	if got[0]+got[1] != 4 || got[0]*got[1] != 3 {
		t.Fatalf("state shows scores %v, want 3 and 1", scores)
	}
	if err := f.d.Decline(context.Background(), slow, 3600); err != nil {
		t.Fatal(err)
	}
	var share float64
	for _, s := range c.m.State().Shares {
		share = s.Share
	}
	if math.Abs(share-0.75) > 1e-9 {
		t.Fatalf("meDRF share %v holding the fast agent, want 0.75 (DRF's would be 0.5)", share)
	}
}
