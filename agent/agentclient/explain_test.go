package agentclient

import (
	"testing"

	"github.com/brimnode/brim/agent/agentpb"
)

func TestExplainOf(t *testing.T) {
	ex := ExplainOf(&agentpb.ExplainResponse{
		Enabled: true,
		Current: &agentpb.Estimate{Estimator: "fixed", Revocable: "cpus:1.5;mem:256", ComputedAtUnixNano: 5e9,
			Terms: []*agentpb.Term{{Name: "idle", Value: 2, Unit: "cpus"}}},
		Active: []*agentpb.Correction{{Type: "THROTTLE", ContainerId: "c1", CpuQuotaMilli: 500, AtUnixNano: 7e9,
			Trigger: &agentpb.Trigger{Signal: "psi-cpu", Value: 0.3}}},
	})
	if !ex.Enabled || ex.Forwarded != nil || ex.Recent == nil || len(ex.Recent) != 0 {
		t.Fatalf("explain = %+v", ex)
	}
	c := ex.Current
	if c.CPUs != 1.5 || c.MemMiB != 256 || c.ComputedAt.UnixNano() != 5e9 || len(c.Terms) != 1 || c.Terms[0].Name != "idle" {
		t.Errorf("estimate = %+v", c)
	}
	a := ex.Active[0]
	if a.CPUQuota != 0.5 || a.At == nil || a.At.UnixNano() != 7e9 || a.Trigger.Signal != "psi-cpu" || a.Trigger.Value != 0.3 {
		t.Errorf("correction = %+v", a)
	}
}
