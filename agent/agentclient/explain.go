package agentclient

import (
	"time"

	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/resources"
)

// Explain is the stable JSON form of the agent's Explain answer (brim
// agent explain --json): the revocable estimate with its terms and the QoS
// corrections.
type Explain struct {
	Enabled        bool         `json:"enabled"`
	Current        *Estimate    `json:"current,omitempty"`
	Forwarded      *Estimate    `json:"forwarded,omitempty"`
	Blocking       string       `json:"blocking,omitempty"`
	RevocableTotal string       `json:"revocableTotal,omitempty"`
	RevocableUsed  string       `json:"revocableUsed,omitempty"`
	RevocableFree  string       `json:"revocableFree,omitempty"`
	QoS            string       `json:"qos,omitempty"`
	RunQueueSource string       `json:"runqueueSource,omitempty"`
	Active         []Correction `json:"active"`
	Recent         []Correction `json:"recent"`
}

// Estimate is one revocable estimate with the terms of its computation.
type Estimate struct {
	Estimator  string    `json:"estimator"`
	Summary    string    `json:"summary"`
	Revocable  string    `json:"revocable"`
	CPUs       float64   `json:"cpus"`
	MemMiB     float64   `json:"memMiB"`
	ComputedAt time.Time `json:"computedAt"`
	Terms      []Term    `json:"terms"`
}

// Term is one named figure of an estimate's computation.
type Term struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
	Note  string  `json:"note,omitempty"`
}

// Correction is one QoS correction, in force or recent.
type Correction struct {
	Type      string     `json:"type"`
	Container string     `json:"container"`
	CPUQuota  float64    `json:"cpuQuota,omitempty"`
	Reason    string     `json:"reason"`
	Trigger   Trigger    `json:"trigger"`
	At        *time.Time `json:"at,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// Trigger is the signal that caused a correction.
type Trigger struct {
	Signal    string  `json:"signal"`
	Victim    string  `json:"victim,omitempty"`
	Value     float64 `json:"value"`
	Baseline  float64 `json:"baseline"`
	Threshold float64 `json:"threshold"`
}

func estimateOf(e *agentpb.Estimate) *Estimate {
	if e == nil {
		return nil
	}
	out := &Estimate{Estimator: e.Estimator, Summary: e.Summary, Revocable: e.Revocable, Terms: []Term{}}
	if e.ComputedAtUnixNano != 0 {
		out.ComputedAt = time.Unix(0, e.ComputedAtUnixNano).UTC()
	}
	if r, err := resources.Parse(e.Revocable); err == nil {
		out.CPUs, out.MemMiB = r.CPUs().Float64(), r.Mem().Float64()
	}
	for _, t := range e.Terms {
		out.Terms = append(out.Terms, Term{Name: t.Name, Value: t.Value, Unit: t.Unit, Note: t.Note})
	}
	return out
}

func correctionOf(c *agentpb.Correction) Correction {
	out := Correction{Type: c.Type, Container: c.ContainerId, CPUQuota: float64(c.CpuQuotaMilli) / 1000, Reason: c.Reason, Error: c.Error}
	if t := c.Trigger; t != nil {
		out.Trigger = Trigger{Signal: t.Signal, Victim: t.Victim, Value: t.Value, Baseline: t.Baseline, Threshold: t.Threshold}
	}
	if c.AtUnixNano != 0 {
		at := time.Unix(0, c.AtUnixNano).UTC()
		out.At = &at
	}
	return out
}

// ExplainOf converts the agent's Explain answer into its Explain view.
func ExplainOf(r *agentpb.ExplainResponse) Explain {
	ex := Explain{
		Enabled: r.Enabled, Current: estimateOf(r.Current), Forwarded: estimateOf(r.Forwarded),
		Blocking: r.Blocking, RevocableTotal: r.RevocableTotal, RevocableUsed: r.RevocableUsed,
		RevocableFree: r.RevocableFree, QoS: r.QosController, RunQueueSource: r.RunqueueSource,
		Active: []Correction{}, Recent: []Correction{},
	}
	for _, c := range r.Active {
		ex.Active = append(ex.Active, correctionOf(c))
	}
	for _, c := range r.Recent {
		ex.Recent = append(ex.Recent, correctionOf(c))
	}
	return ex
}
