package master

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/resources"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

var (
	bucketAgents       = []byte("agents")
	bucketFrameworks   = []byte("frameworks")
	bucketReservations = []byte("reservations")
	bucketQuota        = []byte("quota")
	bucketWeights      = []byte("weights")
	bucketDemands      = []byte("demands")
)

// BoltStore is the master's Store in an embedded bbolt file. Every Put is
// one fsynced transaction. Safe for concurrent use; Close releases it.
type BoltStore struct {
	db    *bolt.DB
	path  string
	aside string // where Fresh moved an unusable file; "" when none
}

var _ Store = (*BoltStore)(nil)

// StoreOptions configure OpenBoltStoreWith.
type StoreOptions struct {
	// Fresh starts an empty store when the file is empty or damaged,
	// moving the old file aside (PATH.broken-TIME) rather than deleting
	// it (brim master --fresh). Without it such a file is refused.
	Fresh bool
	// LockTimeout is how long to wait for another process's lock; 0: 5 s.
	LockTimeout time.Duration
}

// OpenBoltStore opens (creating) the store at path, refusing an empty or
// damaged file (OpenBoltStoreWith without Fresh).
func OpenBoltStore(path string) (*BoltStore, error) {
	return OpenBoltStoreWith(path, StoreOptions{})
}

// OpenBoltStoreWith opens the store at path, creating it when there is no
// file. It checks the whole file first (bbolt's consistency check): an
// empty file (bbolt would silently start it afresh, losing weights and
// quota) or one with damaged pages is refused with an error wrapping
// ErrCorruptStore that names the file and the commands that recover it —
// never a panic — unless o.Fresh. A second master on the same file waits
// o.LockTimeout for its lock, then fails with ErrStoreBusy.
func OpenBoltStoreWith(path string, o StoreOptions) (*BoltStore, error) {
	if o.LockTimeout <= 0 {
		o.LockTimeout = 5 * time.Second
	}
	db, err := openChecked(path, o.LockTimeout, false)
	aside := ""
	if errors.Is(err, ErrCorruptStore) && o.Fresh {
		aside = fmt.Sprintf("%s.broken-%s", path, time.Now().UTC().Format("20060102T150405Z"))
		if rerr := os.Rename(path, aside); rerr != nil {
			return nil, fmt.Errorf("move %s aside: %w", path, rerr)
		}
		db, err = openChecked(path, o.LockTimeout, false)
	}
	if err != nil {
		return nil, err
	}
	err = guard(path, func() error {
		return db.Update(func(tx *bolt.Tx) error {
			for _, b := range [][]byte{bucketAgents, bucketFrameworks, bucketReservations, bucketQuota, bucketWeights, bucketDemands} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("init master store: %w", err), db.Close())
	}
	return &BoltStore{db: db, path: path, aside: aside}, nil
}

// MovedAside is where OpenBoltStoreWith with Fresh moved an empty or
// damaged file ("" when it found none).
func (s *BoltStore) MovedAside() string { return s.aside }

// Path is the store's file.
func (s *BoltStore) Path() string { return s.path }

// corrupt is the error for an unusable store file: what is wrong and how
// to recover.
func corrupt(path string, cause error) error {
	dir := filepath.Dir(path)
	return fmt.Errorf("master store %s: %w: %v; restore a backup with `brim master restore --from %s/%s --state-dir %s` "+
		"(the newest backup is kept there), or start with an empty store with `brim master --fresh` (the file is kept as %s.broken-TIME)",
		path, ErrCorruptStore, cause, filepath.Join(dir, BackupDir), "master-….db", dir, path)
}

// openChecked opens the bbolt file at path and runs bbolt's consistency
// check on it. bbolt panics on some damaged pages (`invalid freelist
// page`, `Page expected to be …`): the panic is turned into an error
// wrapping ErrCorruptStore, as are damaged meta pages, an empty file and
// a file shorter than its meta page says (checkBoltSize: mapped, it
// killed the process with SIGBUS).
func openChecked(path string, timeout time.Duration, readOnly bool) (db *bolt.DB, err error) {
	if fi, serr := os.Stat(path); serr == nil && fi.Size() == 0 {
		return nil, corrupt(path, errors.New("the file is empty (0 bytes)"))
	} else if serr != nil && (readOnly || !errors.Is(serr, os.ErrNotExist)) {
		return nil, fmt.Errorf("open master store: %w", serr)
	}
	if serr := checkBoltSize(path); errors.Is(serr, errStoreTruncated) {
		return nil, corrupt(path, serr)
	} else if serr != nil && !errors.Is(serr, os.ErrNotExist) {
		return nil, fmt.Errorf("open master store: %w", serr)
	}
	// A fault reading the mapping (a page the check above did not cover)
	// panics instead of killing the process, and is recovered below.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				_ = db.Close()
			}
			db, err = nil, corrupt(path, fmt.Errorf("bbolt: %v", r))
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: readOnly})
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, fmt.Errorf("open master store %s: %w: another master holds its lock", path, ErrStoreBusy)
	case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrChecksum), errors.Is(err, bolterrors.ErrVersionMismatch):
		return nil, corrupt(path, err)
	case err != nil:
		return nil, fmt.Errorf("open master store %s: %w", path, err)
	}
	if err := checkDB(db); err != nil {
		_ = db.Close()
		return nil, corrupt(path, err)
	}
	return db, nil
}

// checkDB runs bbolt's consistency check (it recovers its own panics),
// keeping the first few problems.
func checkDB(db *bolt.DB) error {
	return db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() { // drained: the checker blocks on a full channel
			if len(errs) < 5 {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

// guard runs fn, turning a bbolt panic (a page damaged after the check),
// or a fault reading the mapping, into an error wrapping ErrCorruptStore.
func guard(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = corrupt(path, fmt.Errorf("bbolt: %v", r))
		}
	}()
	return fn()
}

// Close closes the file.
func (s *BoltStore) Close() error { return s.db.Close() }

// update runs a write transaction (a bbolt panic becomes an error naming
// the file).
func (s *BoltStore) update(fn func(tx *bolt.Tx) error) error {
	return guard(s.path, func() error { return s.db.Update(fn) })
}

func (s *BoltStore) put(bucket []byte, key string, v any) error {
	return s.update(func(tx *bolt.Tx) error {
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

// PutAgent records an agent ID, its hostname and principal. Concurrent
// calls share a transaction (bbolt's Batch): each new agent's
// registration waits for its write, and one fsync each let 50,000 agents
// register at 370 a second, the first ones marked unreachable (silent
// 75 s) while the last still queued.
func (s *BoltStore) PutAgent(id string, a PersistedAgent) error {
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	// A panic in fn is returned to Batch, which runs fn again alone in
	// this goroutine, under guard.
	return guard(s.path, func() error {
		return s.db.Batch(func(tx *bolt.Tx) error { return tx.Bucket(bucketAgents).Put([]byte(id), data) })
	})
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
	return s.update(func(tx *bolt.Tx) error {
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

// PutDemand records a demand as JSON under its ID.
func (s *BoltStore) PutDemand(d *demand.Demand) error {
	return s.put(bucketDemands, d.ID, d)
}

// Load reads everything.
func (s *BoltStore) Load() (*Persisted, error) {
	p := &Persisted{Agents: map[string]PersistedAgent{}, Frameworks: map[string]PersistedFramework{}, Reservations: map[string]resources.Resources{},
		Quota: map[string]allocator.Quota{}, Weights: map[string]float64{}}
	err := guard(s.path, func() error { return s.db.View(s.load(p)) })
	if err != nil {
		return nil, fmt.Errorf("load master store: %w", err)
	}
	return p, nil
}

// load reads every bucket into p.
func (s *BoltStore) load(p *Persisted) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error {
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
		if err := each(bucketWeights, func(k string, v []byte) error {
			var w float64
			err := json.Unmarshal(v, &w)
			p.Weights[k] = w
			return err
		}); err != nil {
			return err
		}
		if tx.Bucket(bucketDemands) == nil {
			return nil // a read-only copy of a store older than demands
		}
		return each(bucketDemands, func(k string, v []byte) error {
			d := &demand.Demand{}
			if err := json.Unmarshal(v, d); err != nil {
				return err
			}
			p.Demands = append(p.Demands, d)
			return nil
		})
	}
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
