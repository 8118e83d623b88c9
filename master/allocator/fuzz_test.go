package allocator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/brimnode/brim/resources"
)

// ops decodes a byte string into allocator events; exhausted input reads
// as zeros.
type ops struct {
	b []byte
	i int
}

func (o *ops) next(n int) int {
	if o.i >= len(o.b) {
		o.i++
		return 0
	}
	v := int(o.b[o.i])
	o.i++
	return v % n
}

func (o *ops) done() bool { return o.i >= len(o.b) }

var fuzzRoles = []string{"r0", "r1", "r2"}

// world drives an Allocator with events and keeps an independent ledger
// (in resources.Resources arithmetic) to check the invariants against.
type world struct {
	t      testing.TB
	a      *Allocator
	clk    *fakeClock
	nextID int
	totals map[string]resources.Resources            // agent -> everything it has
	held   map[string]map[string]resources.Resources // agent -> "fw/role" -> held
	fws    map[string]FrameworkInfo
	limits map[string]resources.Resources
	log    []string // every offer made, in order
}

func newWorld(t testing.TB, sorter string, seed int64) *world {
	a, clk := newTest(t, Options{Sorter: sorter, Seed: seed})
	return &world{t: t, a: a, clk: clk, totals: map[string]resources.Resources{},
		held: map[string]map[string]resources.Resources{}, fws: map[string]FrameworkInfo{}, limits: map[string]resources.Resources{}}
}

func revocable(r resources.Resources) resources.Resources {
	out := slices.Clone(r)
	for i := range out {
		out[i].Revocable = true
	}
	return out
}

func (w *world) agents() []string     { return sortedKeys(w.totals) }
func (w *world) frameworks() []string { return sortedKeys(w.fws) }

func (w *world) step(o *ops) {
	t := w.t
	switch o.next(12) {
	case 0, 1: // add agent
		id := fmt.Sprint("a", w.nextID)
		w.nextID++
		total := resources.MustParse(fmt.Sprintf("cpus:%d;mem:%d;ports:[%d-%d]", 1+o.next(8), 256*(1+o.next(16)), 31000, 31000+o.next(4)))
		if o.next(3) == 0 {
			total = total.Add(resources.MustParse(fmt.Sprintf("cpus(%s):%d;mem(%s):512", fuzzRoles[o.next(3)], 1+o.next(2), fuzzRoles[o.next(3)])))
		}
		var rev resources.Resources
		if o.next(2) == 0 {
			rev = revocable(resources.MustParse(fmt.Sprintf("cpus:%d;mem:%d", 1+o.next(4), 128*(1+o.next(4)))))
		}
		must(t, w.a.AddAgent(AgentInfo{ID: id, Total: total, Revocable: rev, Score: float64(1 + o.next(9))}, nil))
		w.totals[id] = total.Add(rev)
		w.held[id] = map[string]resources.Resources{}
	case 2: // remove agent
		if ags := w.agents(); len(ags) > 0 {
			id := ags[o.next(len(ags))]
			must(t, w.a.RemoveAgent(id))
			delete(w.totals, id)
			delete(w.held, id)
		}
	case 3: // add framework
		id := fmt.Sprint("f", w.nextID)
		w.nextID++
		info := FrameworkInfo{ID: id, Roles: []string{fuzzRoles[o.next(3)]}, Capabilities: Capabilities{Revocable: o.next(2) == 0}}
		if extra := fuzzRoles[o.next(3)]; extra != info.Roles[0] && o.next(2) == 0 {
			info.Roles = append(info.Roles, extra)
		}
		must(t, w.a.AddFramework(info, nil))
		w.fws[id] = info
	case 4: // remove framework
		if fws := w.frameworks(); len(fws) > 0 {
			id := fws[o.next(len(fws))]
			must(t, w.a.RemoveFramework(id))
			delete(w.fws, id)
			for _, h := range w.held {
				for k := range h {
					if k[:len(id)+1] == id+"/" {
						delete(h, k)
					}
				}
			}
		}
	case 5, 6: // allocate
		w.allocate()
	case 7: // decline or task end: recover all or part of what is held
		ags := w.agents()
		if len(ags) == 0 {
			return
		}
		ag := ags[o.next(len(ags))]
		keys := sortedKeys(w.held[ag])
		if len(keys) == 0 {
			return
		}
		k := keys[o.next(len(keys))]
		res := w.held[ag][k]
		if o.next(2) == 0 { // a part: one unit of one scalar
			for _, r := range res {
				if r.Type == resources.Scalar && r.Scalar >= 1000 {
					r.Scalar = 1000
					res = resources.Resources{r}
					break
				}
			}
		}
		var refuse *time.Duration
		if d := time.Duration(o.next(3)) * 3 * time.Second; o.next(2) == 0 {
			refuse = &d
		}
		slash := slices.Index([]byte(k), '/')
		fw, role := k[:slash], k[slash+1:]
		if len(w.fws[fw].Roles) == 1 {
			role = "" // exercise Recover's any-role path too
		}
		must(t, w.a.RecoverRole(fw, role, ag, res, refuse))
		w.held[ag][k] = w.held[ag][k].Subtract(res)
		if w.held[ag][k].IsEmpty() {
			delete(w.held[ag], k)
		}
	case 8: // reserve / unreserve
		ags := w.agents()
		if len(ags) == 0 {
			return
		}
		ag := ags[o.next(len(ags))]
		role := fuzzRoles[o.next(3)]
		amount := resources.MustParse(fmt.Sprintf("cpus:%d", 1+o.next(2)))
		dyn, err := amount.Reserve(role, "ops")
		must(t, err)
		if o.next(2) == 0 {
			err := w.a.Reserve(ag, role, "ops", amount)
			if err == nil {
				w.totals[ag] = w.totals[ag].Subtract(amount).Add(dyn)
			} else if !errors.Is(err, ErrInsufficient) {
				t.Fatal(err)
			}
		} else {
			err := w.a.Unreserve(ag, dyn)
			if err == nil {
				w.totals[ag] = w.totals[ag].Subtract(dyn).Add(amount)
			} else if !errors.Is(err, ErrInsufficient) {
				t.Fatal(err)
			}
		}
	case 9: // suppress / revive / weights / quota
		fws := w.frameworks()
		switch o.next(4) {
		case 0:
			if len(fws) > 0 {
				w.a.Suppress(fws[o.next(len(fws))])
			}
		case 1:
			if len(fws) > 0 {
				w.a.Revive(fws[o.next(len(fws))])
			}
		case 2:
			must(t, w.a.SetWeight(fuzzRoles[o.next(3)], float64(1+o.next(4))))
		case 3:
			role := fuzzRoles[o.next(3)]
			q := Quota{
				Guarantee: resources.MustParse(fmt.Sprintf("cpus:%d", o.next(4))),
				Limit:     resources.MustParse(fmt.Sprintf("cpus:%d;mem:%d", 4+o.next(8), 1024*(1+o.next(8)))),
			}
			must(t, w.a.SetQuota(role, q))
			w.limits[role] = q.Limit
		}
	case 10:
		w.clk.Advance(time.Duration(o.next(8)) * time.Second)
	case 11: // new revocable estimate
		ags := w.agents()
		if len(ags) == 0 {
			return
		}
		ag := ags[o.next(len(ags))]
		nonrev := w.totals[ag].NonRevocable()
		rev := revocable(resources.MustParse(fmt.Sprintf("cpus:%d", o.next(3))))
		var rescinded []Offer
		var err error
		if o.next(2) == 0 {
			rescinded, err = w.a.UpdateRevocable(ag, rev)
		} else {
			rescinded, err = w.a.UpdateAgent(AgentInfo{ID: ag, Total: nonrev, Revocable: rev})
		}
		must(t, err)
		w.totals[ag] = nonrev.Add(rev)
		for _, r := range rescinded {
			k := r.FrameworkID + "/" + r.Role
			if !w.held[ag][k].Contains(r.Resources) {
				t.Fatalf("rescinded %v from %s on %s, which holds %v", r.Resources, k, ag, w.held[ag][k])
			}
			w.held[ag][k] = w.held[ag][k].Subtract(r.Resources)
			if w.held[ag][k].IsEmpty() {
				delete(w.held[ag], k)
			}
		}
		w.checkFits()
	}
}

// consumed is the role's quota consumption in the ledger.
func (w *world) consumed(role string) resources.Resources {
	var c resources.Resources
	for ag, h := range w.held {
		for k, res := range h {
			if k[slices.Index([]byte(k), '/')+1:] == role {
				c = c.Add(res.NonRevocable().Unreserved())
			}
		}
		c = c.Add(w.totals[ag].Reserved(role).Flatten())
	}
	return c
}

func (w *world) allocate() {
	t := w.t
	before := map[string]resources.Resources{}
	for role := range w.limits {
		before[role] = w.consumed(role)
	}
	offers := w.a.Allocate()
	for _, o := range offers {
		info, ok := w.fws[o.FrameworkID]
		if !ok {
			t.Fatalf("offer to unknown framework %s", o.FrameworkID)
		}
		if !slices.Contains(info.Roles, o.Role) {
			t.Fatalf("offer to %s in role %s, not one of %v", o.FrameworkID, o.Role, info.Roles)
		}
		if !info.Capabilities.Revocable && !o.Resources.Revocable().IsEmpty() {
			t.Fatalf("revocable %v offered to %s without the capability", o.Resources.Revocable(), o.FrameworkID)
		}
		for _, r := range o.Resources {
			if r.IsReserved() && r.Role != o.Role {
				t.Fatalf("%v reserved for %s offered to role %s", r, r.Role, o.Role)
			}
		}
		if o.Resources.IsEmpty() {
			t.Fatalf("empty offer %+v", o)
		}
		h := w.held[o.AgentID]
		if h == nil {
			t.Fatalf("offer on unknown agent %s", o.AgentID)
		}
		k := o.FrameworkID + "/" + o.Role
		h[k] = h[k].Add(o.Resources)
		w.log = append(w.log, fmt.Sprintf("%s %s %s %s", o.FrameworkID, o.AgentID, o.Role, o.Resources))
	}
	w.log = append(w.log, "--")
	w.checkFits()
	// Quota limits: allocation never grows a role past its limit.
	for role, limit := range w.limits {
		after := w.consumed(role)
		for _, l := range limit {
			b, a := before[role].Scalar(l.Name), after.Scalar(l.Name)
			if a > l.Scalar && a > b {
				t.Fatalf("role %s %s consumption %v -> %v over limit %v", role, l.Name, b, a, l.Scalar)
			}
		}
	}
	// The allocator's own accounting agrees with the ledger.
	perRole := map[string]resources.Resources{}
	for _, h := range w.held {
		for k, res := range h {
			role := k[slices.Index([]byte(k), '/')+1:]
			perRole[role] = perRole[role].Add(res.Flatten().Filter(func(r resources.Resource) bool { return r.Type == resources.Scalar }))
		}
	}
	for _, s := range w.a.Shares() {
		got := s.Allocated
		want := perRole[s.Role]
		if !sameScalars(got, want) {
			t.Fatalf("role %s: allocator says %v, ledger %v", s.Role, got, want)
		}
	}
}

func sameScalars(a, b resources.Resources) bool {
	names := map[string]bool{}
	for _, r := range a.Add(b) {
		names[r.Name] = true
	}
	for n := range names {
		if a.Scalar(n) != b.Scalar(n) {
			return false
		}
	}
	return true
}

// checkFits: no agent has more held than it has (no resource offered
// twice, nothing invented).
func (w *world) checkFits() {
	for ag, h := range w.held {
		var all resources.Resources
		for _, res := range h {
			all = all.Add(res)
		}
		if !w.totals[ag].Contains(all) {
			w.t.Fatalf("agent %s: held %v exceeds total %v", ag, all, w.totals[ag])
		}
	}
}

func runOps(t testing.TB, data []byte, sorter string) *world {
	return runOpsWith(t, data, sorter, false)
}

func runOpsWith(t testing.TB, data []byte, sorter string, noIdle bool) *world {
	// The ledger's checks are quadratic in the sequence length; longer
	// inputs add nothing the fuzzer cannot reach with shorter ones.
	data = data[:min(len(data), 2048)]
	w := newWorld(t, sorter, 1+int64(len(data)))
	w.a.noIdle = noIdle
	o := &ops{b: data}
	for !o.done() {
		w.step(o)
	}
	w.allocate()
	return w
}

// TestIdleShortcutIsInvisible: skipping agents every framework passed on
// changes no offer. The same random sequences run with and without the
// shortcut must produce identical offer logs.
func TestIdleShortcutIsInvisible(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 2026))
	skipped := 0
	for range 150 {
		data := make([]byte, 100+r.IntN(900))
		for j := range data {
			// bias towards allocate (5, 6) and decline (7)
			data[j] = byte(r.UintN(256))
			if r.IntN(3) == 0 {
				data[j] = byte(5 + r.IntN(3))
			}
		}
		for _, s := range []string{SorterDRF, SorterRandom, SorterMeDRF} {
			with := runOpsWith(t, data, s, false)
			without := runOpsWith(t, data, s, true)
			if !slices.Equal(with.log, without.log) {
				for i := range min(len(with.log), len(without.log)) {
					if with.log[i] != without.log[i] {
						t.Fatalf("%s: offer %d differs: %q with the shortcut, %q without", s, i, with.log[i], without.log[i])
					}
				}
				t.Fatalf("%s: %d offers with the shortcut, %d without", s, len(with.log), len(without.log))
			}
			skipped += int(with.a.idleSkips)
		}
	}
	if skipped == 0 {
		t.Fatal("no agent ever went idle: the test does not exercise the shortcut")
	}
	t.Logf("%d agents skipped by the shortcut", skipped)
}

// TestRandomEventSequences runs thousands of random event sequences
// (fixed seeds) against every sorter, checking the cycle invariants.
func TestRandomEventSequences(t *testing.T) {
	r := rand.New(rand.NewPCG(2026, 11))
	n := 600
	if testing.Short() {
		n = 60
	}
	for range n {
		data := make([]byte, 50+r.IntN(400))
		for j := range data {
			data[j] = byte(r.UintN(256))
		}
		for _, s := range []string{SorterDRF, SorterRandom, SorterMeDRF} {
			runOps(t, data, s)
		}
	}
}

// FuzzEvents: go test -fuzz FuzzEvents ./master/allocator
func FuzzEvents(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 3, 5, 7, 7, 5})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 3, 5, 8, 0, 5, 9, 3, 5})
	f.Add([]byte("allocator fuzz seed with reservations and quota"))
	f.Fuzz(func(t *testing.T, data []byte) {
		runOps(t, data, []string{SorterDRF, SorterRandom, SorterMeDRF}[len(data)%3])
	})
}
