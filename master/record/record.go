package record

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/resources"
)

// The record families: a store keeps each apart (a bucket, a key
// prefix), keyed by an ID (an agent's, a framework's, a demand's) or a
// role (quota, weights).
const (
	Agents       = "agents"
	Frameworks   = "frameworks"
	Reservations = "reservations"
	Quota        = "quota"
	Weights      = "weights"
	Demands      = "demands"
)

// Families are every family, in the order a store creates them.
var Families = []string{Agents, Frameworks, Reservations, Quota, Weights, Demands}

// ErrUnknownFamily: a record of a family this master does not know (a
// newer master's), which it would otherwise drop without a word.
var ErrUnknownFamily = errors.New("unknown record family")

// EncodeAgent is an agent's record: its hostname and principal.
func EncodeAgent(a master.PersistedAgent) ([]byte, error) { return json.Marshal(a) }

// EncodeFramework is a framework's record: its roles, principal and the
// tasks it was answered LOST.
func EncodeFramework(f master.PersistedFramework) ([]byte, error) { return json.Marshal(f) }

// EncodeReservations is an agent's dynamic reservations; ok is false
// for none: the record is deleted.
func EncodeReservations(res resources.Resources) (v []byte, ok bool, err error) {
	if res.IsEmpty() {
		return nil, false, nil
	}
	v, err = json.Marshal(res.String())
	return v, true, err
}

// quota is a quota's record.
type quota struct {
	Guarantee string `json:"guarantee,omitempty"`
	Limit     string `json:"limit,omitempty"`
}

// EncodeQuota is a role's quota; ok is false for an empty one: the
// record is deleted.
func EncodeQuota(q allocator.Quota) (v []byte, ok bool, err error) {
	if q.Guarantee.IsEmpty() && q.Limit.IsEmpty() {
		return nil, false, nil
	}
	v, err = json.Marshal(quota{Guarantee: q.Guarantee.String(), Limit: q.Limit.String()})
	return v, true, err
}

// EncodeWeight is a role's weight.
func EncodeWeight(w float64) ([]byte, error) { return json.Marshal(w) }

// EncodeDemand is a time-aware demand: its spec, state, history and
// plan.
func EncodeDemand(d *demand.Demand) ([]byte, error) { return json.Marshal(d) }

// NewPersisted is an empty Persisted to Decode records into.
func NewPersisted() *master.Persisted {
	return &master.Persisted{Agents: map[string]master.PersistedAgent{}, Frameworks: map[string]master.PersistedFramework{},
		Reservations: map[string]resources.Resources{}, Quota: map[string]allocator.Quota{}, Weights: map[string]float64{}}
}

// Decode reads the record of family and id into p (made by
// NewPersisted). Errors are the record's decoding errors, or wrap
// ErrUnknownFamily.
func Decode(p *master.Persisted, family, id string, v []byte) error {
	var err error
	switch family {
	case Agents:
		p.Agents[id], err = DecodeAgent(v)
	case Frameworks:
		p.Frameworks[id], err = decodeFramework(v)
	case Reservations:
		p.Reservations[id], err = decodeReservations(v)
	case Quota:
		p.Quota[id], err = decodeQuota(v)
	case Weights:
		var w float64
		err = json.Unmarshal(v, &w)
		p.Weights[id] = w
	case Demands:
		d := &demand.Demand{}
		if err = json.Unmarshal(v, d); err == nil {
			p.Demands = append(p.Demands, d)
		}
	default:
		return fmt.Errorf("%w %q", ErrUnknownFamily, family)
	}
	return err
}

// DecodeAgent reads an agent record: an object, or the bare hostname
// that stores written before principals were kept hold.
func DecodeAgent(v []byte) (master.PersistedAgent, error) {
	return decodeRecord(v, '"', func(a *master.PersistedAgent) any { return &a.Hostname })
}

// decodeFramework reads a framework record: an object, or the bare list
// of roles that stores written before principals were kept hold.
func decodeFramework(v []byte) (master.PersistedFramework, error) {
	return decodeRecord(v, '[', func(f *master.PersistedFramework) any { return &f.Roles })
}

// decodeRecord reads a JSON object into a T, or a record of an older
// format (starting with legacy) into the field of T that field returns.
func decodeRecord[T any](v []byte, legacy byte, field func(*T) any) (T, error) {
	var r T
	if len(v) > 0 && v[0] == legacy {
		err := json.Unmarshal(v, field(&r))
		return r, err
	}
	err := json.Unmarshal(v, &r)
	return r, err
}

func decodeReservations(v []byte) (resources.Resources, error) {
	var text string
	if err := json.Unmarshal(v, &text); err != nil {
		return nil, err
	}
	return resources.Parse(text)
}

func decodeQuota(v []byte) (allocator.Quota, error) {
	var q quota
	if err := json.Unmarshal(v, &q); err != nil {
		return allocator.Quota{}, err
	}
	g, err := resources.Parse(q.Guarantee)
	if err != nil {
		return allocator.Quota{}, err
	}
	l, err := resources.Parse(q.Limit)
	return allocator.Quota{Guarantee: g, Limit: l}, err
}
