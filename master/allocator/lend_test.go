package allocator

import (
	"errors"
	"testing"
	"time"

	"github.com/brimnode/brim/resources"
)

// TestLendOffersHeldCapacityAsRevocable: what a hold lends is offered as
// revocable to capable frameworks only, never counted twice in shares;
// taken back, what its allocations still hold is the agent's overdraft
// until they are recovered.
func TestLendOffersHeldCapacityAsRevocable(t *testing.T) {
	a, _ := newTest(t, Options{})
	must(t, a.AddAgent(AgentInfo{ID: "a1", Total: resources.MustParse("cpus:4;mem:4096")}, nil))
	must(t, a.AddFramework(FrameworkInfo{ID: "plain", Roles: []string{"r1"}}, nil))
	must(t, a.AddFramework(FrameworkInfo{ID: "rev", Roles: []string{"r2"}, Capabilities: Capabilities{Revocable: true}}, nil))
	if _, err := a.Hold("a1", "d1", resources.MustParse("cpus:3;mem:3072")); err != nil {
		t.Fatal(err)
	}
	must(t, a.Lend("a1", resources.MustParse("cpus:3;mem:3072")))
	if got := a.Lent("a1"); !got.Equal(markRev(resources.MustParse("cpus:3;mem:3072"))) {
		t.Fatalf("lent = %s", got)
	}
	var revOffer Offer
	for _, o := range a.Allocate() {
		rev := o.Resources.Revocable()
		switch {
		case o.FrameworkID == "plain" && !rev.IsEmpty():
			t.Fatalf("a framework without the capability was offered revocable %s", rev)
		case o.FrameworkID == "rev" && !rev.IsEmpty():
			revOffer = Offer{FrameworkID: o.FrameworkID, AgentID: o.AgentID, Role: o.Role, Resources: rev}
		}
		if nr := o.Resources.NonRevocable(); nr.CPUs() > resources.MustParse("cpus:1").CPUs() {
			t.Fatalf("offer %+v dips into the hold", o)
		}
	}
	if !revOffer.Resources.Equal(markRev(resources.MustParse("cpus:3;mem:3072"))) {
		t.Fatalf("revocable offer = %s, want the lent cpus:3;mem:3072", revOffer.Resources)
	}
	// The cluster total counts the agent's cpus once: 4, not 7.
	for _, s := range a.FrameworkShares() {
		if s.FrameworkID == "rev" && s.Share > 0.76 {
			t.Fatalf("share of the lent capacity %.2f: lent counted in the total", s.Share)
		}
	}
	if o := a.Overdraft("a1"); len(o) != 0 {
		t.Fatalf("overdraft while lent: %s", o)
	}
	// Taken back: the offer is over the pool until recovered.
	must(t, a.Lend("a1", nil))
	if o := a.Overdraft("a1"); !o.Equal(markRev(resources.MustParse("cpus:3;mem:3072"))) {
		t.Fatalf("overdraft = %s", o)
	}
	// An estimate arriving meanwhile does not take the overdrawn
	// allocation back a second time.
	if taken, err := a.UpdateRevocable("a1", nil); err != nil || len(taken) != 0 {
		t.Fatalf("update revocable took %v (%v)", taken, err)
	}
	zero := time.Duration(0)
	must(t, a.RecoverRole(revOffer.FrameworkID, revOffer.Role, "a1", revOffer.Resources, &zero))
	if o := a.Overdraft("a1"); len(o) != 0 {
		t.Fatalf("overdraft after recovery: %s", o)
	}
	if err := a.Lend("a1", resources.MustParse("cpus:5")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("lend over the total: %v", err)
	}
	if err := a.Lend("nope", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown agent: %v", err)
	}
}

// TestAboveGuarantee: a role may give up what it consumes beyond its
// guarantee, never more; roles without one always may.
func TestAboveGuarantee(t *testing.T) {
	a, _ := newTest(t, Options{})
	must(t, a.AddAgent(AgentInfo{ID: "a1", Total: resources.MustParse("cpus:8;mem:8192")}, nil))
	addFramework(t, a, "f1", "guarded")
	for _, o := range a.Allocate() {
		if o.FrameworkID == "f1" {
			// f1 keeps cpus:3 of its offer, as if its tasks ran there.
			keep := resources.MustParse("cpus:3;mem:1024")
			zero := time.Duration(0)
			must(t, a.RecoverRole(o.FrameworkID, o.Role, o.AgentID, o.Resources.Subtract(keep), &zero))
		}
	}
	addFramework(t, a, "f2", "free")
	must(t, a.SetQuota("guarded", Quota{Guarantee: resources.MustParse("cpus:2")}))
	for _, c := range []struct {
		role, less string
		want       bool
	}{
		{"guarded", "cpus:1", true},
		{"guarded", "cpus:1;mem:1024", true}, // mem is not guaranteed
		{"guarded", "cpus:2", false},
		{"free", "cpus:100", true},
		{"unknown", "cpus:1", true},
	} {
		if got := a.AboveGuarantee(c.role, resources.MustParse(c.less)); got != c.want {
			t.Errorf("AboveGuarantee(%s, %s) = %v, want %v", c.role, c.less, got, c.want)
		}
	}
}

func markRev(r resources.Resources) resources.Resources {
	out := make(resources.Resources, 0, len(r))
	for _, x := range r {
		x.Revocable = true
		out = append(out, x)
	}
	return out
}

// TestLendOverdrawnInOneKind: taken back while an allocation holds one
// kind of it, the pool still offers what is free of the others, never a
// negative amount (which made the framework's allocation unrecoverable).
func TestLendOverdrawnInOneKind(t *testing.T) {
	a, _ := newTest(t, Options{})
	must(t, a.AddAgent(AgentInfo{ID: "a1", Total: resources.MustParse("cpus:4;mem:4096")}, nil))
	must(t, a.AddFramework(FrameworkInfo{ID: "rev", Roles: []string{"r"}, Capabilities: Capabilities{Revocable: true}}, nil))
	if _, err := a.Hold("a1", "d1", resources.MustParse("cpus:4;mem:4096")); err != nil {
		t.Fatal(err)
	}
	must(t, a.Lend("a1", resources.MustParse("cpus:4;mem:4096")))
	zero := time.Duration(0)
	// The framework keeps cpus:1;mem:4096 of its revocable offer.
	keep := markRev(resources.MustParse("cpus:1;mem:4096"))
	for _, o := range a.Allocate() {
		must(t, a.RecoverRole(o.FrameworkID, o.Role, o.AgentID, o.Resources.Subtract(keep), &zero))
	}
	// Half taken back: mem is overdrawn, cpus are not.
	must(t, a.Lend("a1", resources.MustParse("cpus:2;mem:2048")))
	for _, o := range a.Allocate() {
		for _, r := range o.Resources {
			if r.Scalar < 0 {
				t.Fatalf("offer %s carries a negative amount", o.Resources)
			}
		}
		must(t, a.RecoverRole(o.FrameworkID, o.Role, o.AgentID, o.Resources, &zero))
	}
	must(t, a.RecoverRole("rev", "r", "a1", keep, &zero))
	if o := a.Overdraft("a1"); len(o) != 0 {
		t.Fatalf("overdraft after recovery: %s", o)
	}
}
