package master_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/master/boltstore"
	"github.com/brimnode/brim/resources"
)

// Reservations, quota and weights a store kept for roles over the limit
// (written before there was one) are left out at load, the valid ones
// kept: no capacity stays reserved for a role nobody can subscribe with.
func TestStoredLongRolesLeftOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "master.db")
	st, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("r", 100_000)
	over := strings.Repeat("q", master.MaxRoleBytes+1) // within bbolt's key limit
	if err := st.PutReservations("a1", resources.MustParse("cpus("+long+",ops):1;cpus(ads,ops):2")); err != nil {
		t.Fatal(err)
	}
	if err := st.PutQuota(over, allocator.Quota{Limit: resources.MustParse("cpus:1")}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutWeights(map[string]float64{over: 2, "ads": 3}); err != nil {
		t.Fatal(err)
	}
	m, err := master.New(master.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := m.StoredReservations("a1").String(); got != "cpus(ads,ops):2" {
		t.Errorf("reservations of a1 %.200s, want cpus(ads,ops):2 alone", got)
	}
	st2 := m.State()
	if len(st2.Quota) != 0 {
		t.Errorf("quota of a long role loaded: %d", len(st2.Quota))
	}
	if len(st2.Weights) != 1 || st2.Weights["ads"] != 3 {
		t.Errorf("weights %d loaded, want ads=3 alone", len(st2.Weights))
	}
}
