package etcdstore

import (
	"testing"
	"time"
)

// TestRefreshPacing: a term refreshes its lease every TTL/4 while etcd
// acknowledges in time; once a refresh is overdue it sends one on every
// tick, a few in flight at most, so that the first member able to answer
// after an outage acknowledges one at once.
func TestRefreshPacing(t *testing.T) {
	const every = time.Second
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name             string
		lastOK, lastSent time.Duration // from t0
		inflight         int
		now              time.Duration
		want             bool
	}{
		{"acknowledged, not yet due", 0, 0, 0, 500 * time.Millisecond, false},
		{"acknowledged, due", 0, 0, 0, every, true},
		{"in flight, answer not late yet", every, 2 * every, 1, 2*every + 200*time.Millisecond, false},
		{"overdue: another while one is in flight", every, 2 * every, 1, 2*every + 300*time.Millisecond, true},
		{"overdue: on every tick", 0, 2 * every, 2, 2*every + 250*time.Millisecond, true},
		{"overdue, but as many in flight as allowed", 0, 2 * every, maxRefreshes, 3 * every, false},
	} {
		r := refreshes{every: every, inflight: tc.inflight, lastSent: t0.Add(tc.lastSent)}
		if got := r.due(t0.Add(tc.now), t0.Add(tc.lastOK)); got != tc.want {
			t.Errorf("%s: due = %v, want %v", tc.name, got, tc.want)
		}
	}
}
