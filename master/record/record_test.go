package record_test

import (
	"errors"
	"testing"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/master/record"
	"github.com/brimnode/brim/resources"
)

// Every family decodes what it encodes, both stores sharing the one
// encoding; an empty reservation or quota is a deletion.
func TestRoundTrip(t *testing.T) {
	p := record.NewPersisted()
	put := func(family, id string, v []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if err := record.Decode(p, family, id, v); err != nil {
			t.Fatalf("decode %s/%s %s: %v", family, id, v, err)
		}
	}
	agent := master.PersistedAgent{Hostname: "h1", Principal: "agent1"}
	v, err := record.EncodeAgent(agent)
	put(record.Agents, "a1", v, err)
	fw := master.PersistedFramework{Roles: []string{"ads"}, Principal: "ops", Lost: []string{"t1"}}
	v, err = record.EncodeFramework(fw)
	put(record.Frameworks, "f1", v, err)
	res := resources.MustParse("cpus(ads,ops):2")
	v, ok, err := record.EncodeReservations(res)
	if !ok {
		t.Fatal("reservations encoded as a deletion")
	}
	put(record.Reservations, "a1", v, err)
	q := allocator.Quota{Guarantee: resources.MustParse("cpus:1"), Limit: resources.MustParse("cpus:4")}
	v, ok, err = record.EncodeQuota(q)
	if !ok {
		t.Fatal("quota encoded as a deletion")
	}
	put(record.Quota, "ads", v, err)
	v, err = record.EncodeWeight(2.5)
	put(record.Weights, "ads", v, err)
	v, err = record.EncodeDemand(&demand.Demand{ID: "d1", Framework: "f1", Role: "ads"})
	put(record.Demands, "d1", v, err)

	if p.Agents["a1"] != agent {
		t.Errorf("agent %+v, want %+v", p.Agents["a1"], agent)
	}
	if f := p.Frameworks["f1"]; f.Principal != "ops" || len(f.Roles) != 1 || f.Roles[0] != "ads" || len(f.Lost) != 1 {
		t.Errorf("framework %+v, want %+v", f, fw)
	}
	if !p.Reservations["a1"].Equal(res) {
		t.Errorf("reservations %v, want %v", p.Reservations["a1"], res)
	}
	if g := p.Quota["ads"]; !g.Guarantee.Equal(q.Guarantee) || !g.Limit.Equal(q.Limit) {
		t.Errorf("quota %+v, want %+v", g, q)
	}
	if p.Weights["ads"] != 2.5 {
		t.Errorf("weight %v, want 2.5", p.Weights["ads"])
	}
	if len(p.Demands) != 1 || p.Demands[0].ID != "d1" || p.Demands[0].Framework != "f1" {
		t.Errorf("demands %+v", p.Demands)
	}
	if _, ok, _ := record.EncodeReservations(nil); ok {
		t.Error("no reservations: want a deletion")
	}
	if _, ok, _ := record.EncodeQuota(allocator.Quota{}); ok {
		t.Error("an empty quota: want a deletion")
	}
}

// Records of masters before principals were kept — a bare hostname, a
// bare list of roles — read in either store.
func TestLegacyRecords(t *testing.T) {
	p := record.NewPersisted()
	if err := record.Decode(p, record.Agents, "a", []byte(`"h2"`)); err != nil {
		t.Fatal(err)
	}
	if err := record.Decode(p, record.Frameworks, "f", []byte(`["web"]`)); err != nil {
		t.Fatal(err)
	}
	if p.Agents["a"] != (master.PersistedAgent{Hostname: "h2"}) {
		t.Errorf("legacy agent: %+v", p.Agents["a"])
	}
	if f := p.Frameworks["f"]; len(f.Roles) != 1 || f.Roles[0] != "web" || f.Principal != "" {
		t.Errorf("legacy framework: %+v", f)
	}
}

// A family this master does not know, and a record that does not decode,
// are errors: nothing is dropped without a word.
func TestBadRecords(t *testing.T) {
	p := record.NewPersisted()
	if err := record.Decode(p, "leases", "x", []byte(`{}`)); !errors.Is(err, record.ErrUnknownFamily) {
		t.Errorf("unknown family: %v, want ErrUnknownFamily", err)
	}
	for _, family := range record.Families {
		if err := record.Decode(p, family, "x", []byte(`{not json`)); err == nil {
			t.Errorf("%s: a record that is not JSON decoded", family)
		}
	}
	if err := record.Decode(p, record.Reservations, "x", []byte(`"cpus:"`)); err == nil {
		t.Error("reservations that do not parse decoded")
	}
}
