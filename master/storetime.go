package master

import (
	"time"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/resources"
)

// timedStore times every write of the Store it wraps (bbolt, etcd or a
// test's) for brim_master_store_write_seconds: the master's view of a
// write, fencing transaction and network included.
type timedStore struct {
	Store
	observe func(start time.Time)
}

func (s timedStore) PutAgent(id string, a PersistedAgent) error {
	defer s.observe(time.Now())
	return s.Store.PutAgent(id, a)
}

func (s timedStore) PutFramework(id string, f PersistedFramework) error {
	defer s.observe(time.Now())
	return s.Store.PutFramework(id, f)
}

func (s timedStore) DeleteFramework(id string) error {
	defer s.observe(time.Now())
	return s.Store.DeleteFramework(id)
}

func (s timedStore) PutReservations(agentID string, res resources.Resources) error {
	defer s.observe(time.Now())
	return s.Store.PutReservations(agentID, res)
}

func (s timedStore) PutQuota(role string, q allocator.Quota) error {
	defer s.observe(time.Now())
	return s.Store.PutQuota(role, q)
}

func (s timedStore) PutWeights(weights map[string]float64) error {
	defer s.observe(time.Now())
	return s.Store.PutWeights(weights)
}

func (s timedStore) PutDemand(d *demand.Demand) error {
	defer s.observe(time.Now())
	return s.Store.PutDemand(d)
}
