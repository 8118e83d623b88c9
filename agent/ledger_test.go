package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/brimnode/brim/resources"
)

// ledgerStep is one operation on a ledger and what it must do.
type ledgerStep struct {
	op      string // reserve, adopt, commit, cancel, release, resize, pool
	id      string
	res     string // resources text (reserve, adopt, resize, pool)
	wantErr error  // nil: must succeed
	// msg, when set, must appear in the error.
	msg string
	// used and free, when set, are checked after the step (text syntax;
	// "-" means empty).
	used, free string
}

func TestLedger(t *testing.T) {
	const total = "cpus:4;mem:1024;net_bw:100"
	for _, tc := range []struct {
		name  string
		total string
		steps []ledgerStep
	}{
		{"reserve commit release", total, []ledgerStep{
			{op: "reserve", id: "a", res: "cpus:1;mem:256", used: "cpus:1;mem:256", free: "cpus:3;mem:768;net_bw:100"},
			{op: "commit", id: "a", used: "cpus:1;mem:256"},
			{op: "release", id: "a", used: "-", free: total},
		}},
		{"reservation counts before commit", total, []ledgerStep{
			{op: "reserve", id: "a", res: "cpus:3;mem:100"},
			{op: "reserve", id: "b", res: "cpus:2;mem:100", wantErr: ErrInsufficientResources, msg: "asked cpus:2, free cpus:1"},
			{op: "cancel", id: "a", used: "-"},
			{op: "reserve", id: "b", res: "cpus:2;mem:100", used: "cpus:2;mem:100"},
		}},
		{"exactly the total fits, one more does not", total, []ledgerStep{
			{op: "reserve", id: "a", res: total, free: "-"},
			{op: "reserve", id: "b", res: "mem:1", wantErr: ErrInsufficientResources, msg: "asked mem:1, free mem:0"},
		}},
		{"every short resource is named", total, []ledgerStep{
			{op: "reserve", id: "a", res: "cpus:5;mem:2048;net_bw:10", wantErr: ErrInsufficientResources,
				msg: "asked cpus:5;mem:2048, free cpus:4;mem:1024", used: "-"},
		}},
		{"a resource without total is refused, not charged", "cpus:4;mem:1024", []ledgerStep{
			{op: "reserve", id: "a", res: "cpus:1;mem:10;net_bw:50", wantErr: ErrInsufficientResources,
				msg: "asked net_bw:50, free net_bw:0 (net_bw not offered by this agent)", used: "-"},
			{op: "reserve", id: "b", res: "cpus:1;mem:10", used: "cpus:1;mem:10"},
		}},
		{"adopted use beyond the total blocks only that resource", "cpus:4;mem:1024", []ledgerStep{
			{op: "adopt", id: "old", res: "cpus:1;mem:10;net_bw:50", used: "cpus:1;mem:10;net_bw:50", free: "cpus:3;mem:1014"},
			{op: "reserve", id: "a", res: "cpus:1;mem:10", used: "cpus:2;mem:20;net_bw:50"},
			{op: "release", id: "old", used: "cpus:1;mem:10"},
		}},
		{"resize grows, holds the larger size until commit", total, []ledgerStep{
			{op: "reserve", id: "a", res: "cpus:1;mem:512"},
			{op: "commit", id: "a"},
			{op: "resize", id: "a", res: "cpus:2;mem:256", used: "cpus:2;mem:512"},
			{op: "commit", id: "a", used: "cpus:2;mem:256", free: "cpus:2;mem:768;net_bw:100"},
		}},
		{"resize cancelled reverts", total, []ledgerStep{
			{op: "adopt", id: "a", res: "cpus:1;mem:512"},
			{op: "resize", id: "a", res: "cpus:3;mem:512", used: "cpus:3;mem:512"},
			{op: "reserve", id: "b", res: "cpus:2", wantErr: ErrInsufficientResources, msg: "free cpus:1"},
			{op: "cancel", id: "a", used: "cpus:1;mem:512"},
			{op: "reserve", id: "b", res: "cpus:2", used: "cpus:3;mem:512"},
		}},
		{"resize needs only the growth free", total, []ledgerStep{
			{op: "adopt", id: "a", res: "cpus:3;mem:512"},
			{op: "adopt", id: "b", res: "cpus:1;mem:512"},
			{op: "resize", id: "a", res: "cpus:3.5", wantErr: ErrInsufficientResources, msg: "asked cpus:0.5, free cpus:0", used: "cpus:4;mem:1024"},
			{op: "resize", id: "a", res: "cpus:2;mem:512", used: "cpus:4;mem:1024"},
			{op: "commit", id: "a", free: "cpus:1;net_bw:100"},
		}},
		{"a release during a resize drops the claim", total, []ledgerStep{
			{op: "adopt", id: "a", res: "cpus:1"},
			{op: "resize", id: "a", res: "cpus:2"},
			{op: "release", id: "a", used: "-"},
			{op: "commit", id: "a", wantErr: ErrNotFound},
			{op: "cancel", id: "a", wantErr: ErrNotFound},
		}},
		{"unknown and wrong-state ids", total, []ledgerStep{
			{op: "release", id: "x", wantErr: ErrNotFound},
			{op: "commit", id: "x", wantErr: ErrNotFound},
			{op: "cancel", id: "x", wantErr: ErrNotFound},
			{op: "resize", id: "x", res: "cpus:1", wantErr: ErrNotFound},
			{op: "reserve", id: "a", res: "cpus:1"},
			{op: "reserve", id: "a", res: "cpus:1", wantErr: errClaimState, used: "cpus:1"},
			{op: "resize", id: "a", res: "cpus:2", wantErr: errClaimState},
			{op: "commit", id: "a"},
			{op: "resize", id: "a", res: "cpus:2"},
			{op: "resize", id: "a", res: "cpus:3", wantErr: errClaimState, used: "cpus:2"},
		}},
		{"revocable claims draw from the pool only", total, []ledgerStep{
			{op: "reserve", id: "r", res: "cpus{REV}:0.5", wantErr: ErrInsufficientResources, msg: "cpus not offered"},
			{op: "pool", res: "cpus:1;mem:100", free: "cpus:4;cpus{REV}:1;mem:1024;mem{REV}:100;net_bw:100"},
			{op: "reserve", id: "r", res: "cpus{REV}:0.75;mem{REV}:50"},
			{op: "reserve", id: "s", res: "cpus{REV}:0.5", wantErr: ErrInsufficientResources, msg: "asked cpus:0.5, free cpus:0.25"},
			{op: "reserve", id: "a", res: "cpus:4;mem:1024", used: "cpus:4;cpus{REV}:0.75;mem:1024;mem{REV}:50"},
		}},
		{"a shrinking pool leaves use above it, never negative free", total, []ledgerStep{
			{op: "pool", res: "cpus:2"},
			{op: "reserve", id: "r", res: "cpus{REV}:1.5"},
			{op: "pool", res: "cpus:1", free: "cpus:4;mem:1024;net_bw:100"},
			{op: "reserve", id: "s", res: "cpus{REV}:0.001", wantErr: ErrInsufficientResources},
			{op: "release", id: "r", free: "cpus:4;cpus{REV}:1;mem:1024;net_bw:100"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(resources.MustParse(tc.total))
			for i, s := range tc.steps {
				res := resources.MustParse(s.res)
				var err error
				switch s.op {
				case "reserve":
					err = l.Reserve(s.id, res)
				case "adopt":
					l.Adopt(s.id, res)
				case "commit":
					err = l.Commit(s.id)
				case "cancel":
					err = l.Cancel(s.id)
				case "release":
					err = l.Release(s.id)
				case "resize":
					err = l.Resize(s.id, res)
				case "pool":
					l.SetRevocable(res)
				default:
					t.Fatalf("step %d: unknown op %q", i, s.op)
				}
				switch {
				case s.wantErr == nil && err != nil:
					t.Fatalf("step %d %s %s %s: %v", i, s.op, s.id, s.res, err)
				case s.wantErr != nil && !errors.Is(err, s.wantErr):
					t.Fatalf("step %d %s %s %s: err %v, want %v", i, s.op, s.id, s.res, err, s.wantErr)
				case s.msg != "" && (err == nil || !strings.Contains(err.Error(), s.msg)):
					t.Fatalf("step %d %s %s %s: err %v, want it to contain %q", i, s.op, s.id, s.res, err, s.msg)
				}
				checkText(t, i, "used", l.Used(), s.used)
				checkText(t, i, "free", l.Free(), s.free)
			}
		})
	}
}

func checkText(t *testing.T, step int, what string, got resources.Resources, want string) {
	t.Helper()
	switch {
	case want == "":
	case want == "-" && !got.IsEmpty():
		t.Fatalf("step %d: %s %s, want nothing", step, what, got)
	case want != "-" && !got.Equal(resources.MustParse(want)):
		t.Fatalf("step %d: %s %s, want %s", step, what, got, want)
	}
}

// TestLedgerInvariant drives a ledger through a fixed pseudo-random
// sequence of operations and checks after each that Reserve and Resize
// never take the used resources beyond the total, that Free is Total
// minus Used, and that Used is the sum of the claims.
func TestLedgerInvariant(t *testing.T) {
	total := resources.MustParse("cpus:4;mem:1024;net_bw:100")
	l := newLedger(total)
	ids := []string{"a", "b", "c", "d", "e"}
	asks := []string{"cpus:1", "cpus:0.5;mem:300", "mem:700", "net_bw:60", "cpus:2.5;mem:100;net_bw:10", "cpus:0.001"}
	x := uint32(1)
	next := func(n int) int { x = x*1664525 + 1013904223; return int(x>>16) % n }
	for i := 0; i < 5000; i++ {
		id, ask := ids[next(len(ids))], resources.MustParse(asks[next(len(asks))])
		var err error
		switch next(5) {
		case 0:
			err = l.Reserve(id, ask)
		case 1:
			err = l.Commit(id)
		case 2:
			err = l.Cancel(id)
		case 3:
			err = l.Release(id)
		case 4:
			err = l.Resize(id, ask)
		}
		if err != nil && !errors.Is(err, ErrInsufficientResources) && !errors.Is(err, ErrNotFound) && !errors.Is(err, errClaimState) {
			t.Fatalf("op %d: unexpected error %v", i, err)
		}
		used := l.Used()
		if !total.Contains(used) {
			t.Fatalf("op %d: used %s beyond total %s", i, used, total)
		}
		if !l.Free().Equal(total.Subtract(used)) || !l.Free().Add(used).Equal(total) {
			t.Fatalf("op %d: free %s + used %s != total %s", i, l.Free(), used, total)
		}
		var sum resources.Resources
		for _, id := range ids {
			if h, ok := l.Held(id); ok {
				sum = sum.Add(h)
			}
		}
		if !sum.Equal(used) {
			t.Fatalf("op %d: claims sum to %s, used %s", i, sum, used)
		}
	}
}

func TestInsufficientResourcesErrorText(t *testing.T) {
	e := &InsufficientResourcesError{
		Asked: resources.MustParse("cpus{REV}:0.6;mem{REV}:100"),
		Free:  resources.MustParse("cpus{REV}:0.4"),
		Pool:  "revocable", Why: "revocable pool cpus:1",
	}
	if got, want := e.Error(), "insufficient revocable resources: asked cpus:0.6;mem:100, free cpus:0.4;mem:0 (revocable pool cpus:1)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(e, ErrInsufficientResources) {
		t.Error("not ErrInsufficientResources")
	}
}

// An ask beyond the total says so: no wait frees it (--cpus 1e9 said only
// "must be a positive number", --cpus 100 only what was free).
func TestInsufficientBeyondTotal(t *testing.T) {
	l := newLedger(resources.MustParse("cpus:2;mem:2048"))
	if err := l.Reserve("a", resources.MustParse("cpus:1;mem:64")); err != nil {
		t.Fatal(err)
	}
	for ask, want := range map[string]string{
		"cpus:1000000000;mem:32": "insufficient resources: asked cpus:1000000000, free cpus:1 (more than this agent's total, cpus:2)",
		"cpus:1.5;mem:32":        "insufficient resources: asked cpus:1.5, free cpus:1",
	} {
		err := l.Reserve("b", resources.MustParse(ask))
		if err == nil || err.Error() != want {
			t.Errorf("Reserve(%s) = %v, want %q", ask, err, want)
		}
	}
}
