package etcdstore_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/brimnode/brim/demand"
)

// TestDemandRecords: a leader's demands are in the registry as JSON and
// load back whole (state, plan, history), as the bbolt store keeps them.
func TestDemandRecords(t *testing.T) {
	c := startEtcd(t, 1)
	a := open(t, c.clients, "/brim-demands", 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	term, err := a.Campaign(ctx, "10.0.0.1:5050")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	d := &demand.Demand{ID: "1234", Doc: json.RawMessage(`{"DemandID":"1234","Resources":"cpus:1","Tasks":1}`), Framework: "fw-1", Role: "ads",
		State: demand.Accepted, Submitted: at, Start: at.Add(time.Hour), Placement: []demand.Slot{{Agent: "agent-1", Tasks: 1}},
		History: []demand.Transition{{At: at, From: demand.New, To: demand.Accepted}}}
	if err := term.Store().PutDemand(d); err != nil {
		t.Fatal(err)
	}
	p, err := term.Store().Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Demands) != 1 {
		t.Fatalf("loaded %d demands, want 1", len(p.Demands))
	}
	got := p.Demands[0]
	if got.ID != "1234" || got.State != demand.Accepted || !got.Start.Equal(d.Start) || len(got.Placement) != 1 || len(got.History) != 1 {
		t.Fatalf("loaded %+v, want %+v", got, d)
	}
	if err := got.Restore(); err != nil {
		t.Fatalf("restore: %v", err)
	}
}
