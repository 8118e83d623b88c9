package master

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brimnode/brim/master/allocator"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
)

// An agent offering resources reserved for a role over MaxRoleBytes is
// refused like any other entry of a role.
func TestRegisterAgentRoleLimit(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("r", MaxRoleBytes+1)
	reg := &pb.Register{Hostname: "h", Resources: "cpus:3;mem:1024;cpus(" + long + "):1"}
	_, _, err = m.registerAgent(registrationFromPB(reg), "", NewOutbox[ToAgent](func() {}, AgentQueue))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "255-byte limit") {
		t.Fatalf("register an agent with a long role: %.200v, want ErrInvalid naming the limit", err)
	}
	if len(m.State().Agents) != 0 {
		t.Fatal("the refused agent is registered")
	}
}

// Reservations, quota and weights a store kept for roles over the limit
// (written before there was one) are left out at load, the valid ones
// kept: no capacity stays reserved for a role nobody can subscribe with.
func TestStoredLongRolesLeftOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "master.db")
	st, err := OpenBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("r", 100_000)
	over := strings.Repeat("q", MaxRoleBytes+1) // within bbolt's key limit
	if err := st.PutReservations("a1", resources.MustParse("cpus("+long+",ops):1;cpus(ads,ops):2")); err != nil {
		t.Fatal(err)
	}
	if err := st.PutQuota(over, allocator.Quota{Limit: resources.MustParse("cpus:1")}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutWeights(map[string]float64{over: 2, "ads": 3}); err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := m.reservations["a1"].String(); got != "cpus(ads,ops):2" {
		t.Errorf("reservations of a1 %.200s, want cpus(ads,ops):2 alone", got)
	}
	if len(m.quota) != 0 {
		t.Errorf("quota of a long role loaded: %d", len(m.quota))
	}
	if len(m.weights) != 1 || m.weights["ads"] != 3 {
		t.Errorf("weights %d loaded, want ads=3 alone", len(m.weights))
	}
}
