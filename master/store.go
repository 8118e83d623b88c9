package master

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/resources"
	bolt "go.etcd.io/bbolt"
)

var (
	bucketAgents       = []byte("agents")
	bucketFrameworks   = []byte("frameworks")
	bucketReservations = []byte("reservations")
	bucketQuota        = []byte("quota")
	bucketWeights      = []byte("weights")
)

// BoltStore is the master's Store in an embedded bbolt file. Every Put is
// one fsynced transaction. Safe for concurrent use; Close releases it.
type BoltStore struct {
	db *bolt.DB
}

var _ Store = (*BoltStore)(nil)

// OpenBoltStore opens (creating) the store at path. A second master on
// the same file waits up to 5 s for its lock, then fails.
func OpenBoltStore(path string) (*BoltStore, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open master store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketAgents, bucketFrameworks, bucketReservations, bucketQuota, bucketWeights} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close() // failing with err
		return nil, fmt.Errorf("init master store: %w", err)
	}
	return &BoltStore{db: db}, nil
}

// Close closes the file.
func (s *BoltStore) Close() error { return s.db.Close() }

func (s *BoltStore) put(bucket []byte, key string, v any) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if v == nil {
			return b.Delete([]byte(key))
		}
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return b.Put([]byte(key), data)
	})
}

// PutAgent records an agent ID, its hostname and principal.
func (s *BoltStore) PutAgent(id string, a PersistedAgent) error {
	return s.put(bucketAgents, id, a)
}

// PutFramework records a framework ID, its roles and principal.
func (s *BoltStore) PutFramework(id string, f PersistedFramework) error {
	return s.put(bucketFrameworks, id, f)
}

// DeleteFramework forgets a framework.
func (s *BoltStore) DeleteFramework(id string) error { return s.put(bucketFrameworks, id, nil) }

// PutReservations replaces an agent's dynamic reservations.
func (s *BoltStore) PutReservations(agentID string, res resources.Resources) error {
	if res.IsEmpty() {
		return s.put(bucketReservations, agentID, nil)
	}
	return s.put(bucketReservations, agentID, res.String())
}

type quotaRec struct {
	Guarantee string `json:"guarantee,omitempty"`
	Limit     string `json:"limit,omitempty"`
}

// PutQuota records (or with an empty Quota removes) a role's quota.
func (s *BoltStore) PutQuota(role string, q allocator.Quota) error {
	if q.Guarantee.IsEmpty() && q.Limit.IsEmpty() {
		return s.put(bucketQuota, role, nil)
	}
	return s.put(bucketQuota, role, quotaRec{Guarantee: q.Guarantee.String(), Limit: q.Limit.String()})
}

// PutWeights records roles' weights in one transaction.
func (s *BoltStore) PutWeights(weights map[string]float64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketWeights)
		for role, w := range weights {
			data, err := json.Marshal(w)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(role), data); err != nil {
				return err
			}
		}
		return nil
	})
}

// Load reads everything.
func (s *BoltStore) Load() (*Persisted, error) {
	p := &Persisted{Agents: map[string]PersistedAgent{}, Frameworks: map[string]PersistedFramework{}, Reservations: map[string]resources.Resources{},
		Quota: map[string]allocator.Quota{}, Weights: map[string]float64{}}
	err := s.db.View(func(tx *bolt.Tx) error {
		each := func(bucket []byte, fn func(k string, v []byte) error) error {
			return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
				if err := fn(string(k), v); err != nil {
					return fmt.Errorf("%s/%s: %w", bucket, k, err)
				}
				return nil
			})
		}
		if err := each(bucketAgents, func(k string, v []byte) error {
			a, err := decodeAgent(v)
			p.Agents[k] = a
			return err
		}); err != nil {
			return err
		}
		if err := each(bucketFrameworks, func(k string, v []byte) error {
			f, err := decodeFramework(v)
			p.Frameworks[k] = f
			return err
		}); err != nil {
			return err
		}
		if err := each(bucketReservations, func(k string, v []byte) error {
			var text string
			if err := json.Unmarshal(v, &text); err != nil {
				return err
			}
			r, err := resources.Parse(text)
			p.Reservations[k] = r
			return err
		}); err != nil {
			return err
		}
		if err := each(bucketQuota, func(k string, v []byte) error {
			var q quotaRec
			if err := json.Unmarshal(v, &q); err != nil {
				return err
			}
			g, err := resources.Parse(q.Guarantee)
			if err != nil {
				return err
			}
			l, err := resources.Parse(q.Limit)
			p.Quota[k] = allocator.Quota{Guarantee: g, Limit: l}
			return err
		}); err != nil {
			return err
		}
		return each(bucketWeights, func(k string, v []byte) error {
			var w float64
			err := json.Unmarshal(v, &w)
			p.Weights[k] = w
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("load master store: %w", err)
	}
	return p, nil
}

// decodeFramework reads a framework record: an object, or the bare list of
// roles that stores written before principals were kept hold.
func decodeFramework(v []byte) (PersistedFramework, error) {
	return decodeRecord(v, '[', func(f *PersistedFramework) any { return &f.Roles })
}

// decodeAgent reads an agent record: an object, or the bare hostname that
// stores written before principals were kept hold.
func decodeAgent(v []byte) (PersistedAgent, error) {
	return decodeRecord(v, '"', func(a *PersistedAgent) any { return &a.Hostname })
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
