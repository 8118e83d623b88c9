package boltstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/master/record"
	"github.com/brimnode/brim/resources"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Sentinel errors; never on the wire.
var (
	// ErrCorruptStore: the store file cannot be used as it is (bbolt found
	// damaged pages, or the file is empty); the error names the file and
	// the commands that recover it.
	ErrCorruptStore = errors.New("master store unusable")
	// ErrStoreBusy: another process (a running master) holds the store.
	ErrStoreBusy = errors.New("master store in use")
)

// Store is the master's store (master.Store) in an embedded bbolt file:
// one bucket per record family (master/record). Every Put is one
// fsynced transaction. Safe for concurrent use; Close releases it.
type Store struct {
	db    *bolt.DB
	path  string
	aside string // where Fresh moved an unusable file; "" when none
}

var _ master.Store = (*Store)(nil)

// Options configure OpenWith.
type Options struct {
	// Fresh starts an empty store when the file is empty or damaged,
	// moving the old file aside (PATH.broken-TIME) rather than deleting
	// it (brim master --fresh). Without it such a file is refused.
	Fresh bool
	// LockTimeout is how long to wait for another process's lock; 0: 5 s.
	LockTimeout time.Duration
}

// Open opens (creating) the store at path, refusing an empty or damaged
// file (OpenWith without Fresh).
func Open(path string) (*Store, error) {
	return OpenWith(path, Options{})
}

// OpenWith opens the store at path, creating it when there is no
// file. It checks the whole file first (bbolt's consistency check): an
// empty file (bbolt would silently start it afresh, losing weights and
// quota) or one with damaged pages is refused with an error wrapping
// ErrCorruptStore that names the file and the commands that recover it —
// never a panic — unless o.Fresh. A second master on the same file waits
// o.LockTimeout for its lock, then fails with ErrStoreBusy.
func OpenWith(path string, o Options) (*Store, error) {
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
			for _, b := range record.Families {
				if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("init master store: %w", err), db.Close())
	}
	return &Store{db: db, path: path, aside: aside}, nil
}

// MovedAside is where OpenWith with Fresh moved an empty or
// damaged file ("" when it found none).
func (s *Store) MovedAside() string { return s.aside }

// Path is the store's file.
func (s *Store) Path() string { return s.path }

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
func (s *Store) Close() error { return s.db.Close() }

// update runs a write transaction (a bbolt panic becomes an error naming
// the file).
func (s *Store) update(fn func(tx *bolt.Tx) error) error {
	return guard(s.path, func() error { return s.db.Update(fn) })
}

// put writes (ok false: deletes) the record of family and key.
func (s *Store) put(family, key string, v []byte, ok bool) error {
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(family))
		if !ok {
			return b.Delete([]byte(key))
		}
		return b.Put([]byte(key), v)
	})
}

// PutAgent records an agent ID, its hostname and principal. Concurrent
// calls share a transaction (bbolt's Batch): each new agent's
// registration waits for its write, and one fsync each let 50,000 agents
// register at 370 a second, the first ones marked unreachable (silent
// 75 s) while the last still queued.
func (s *Store) PutAgent(id string, a master.PersistedAgent) error {
	data, err := record.EncodeAgent(a)
	if err != nil {
		return err
	}
	// A panic in fn is returned to Batch, which runs fn again alone in
	// this goroutine, under guard.
	return guard(s.path, func() error {
		return s.db.Batch(func(tx *bolt.Tx) error { return tx.Bucket([]byte(record.Agents)).Put([]byte(id), data) })
	})
}

// PutFramework records a framework ID, its roles and principal.
func (s *Store) PutFramework(id string, f master.PersistedFramework) error {
	v, err := record.EncodeFramework(f)
	if err != nil {
		return err
	}
	return s.put(record.Frameworks, id, v, true)
}

// DeleteFramework forgets a framework.
func (s *Store) DeleteFramework(id string) error { return s.put(record.Frameworks, id, nil, false) }

// PutReservations replaces an agent's dynamic reservations.
func (s *Store) PutReservations(agentID string, res resources.Resources) error {
	v, ok, err := record.EncodeReservations(res)
	if err != nil {
		return err
	}
	return s.put(record.Reservations, agentID, v, ok)
}

// PutQuota records (or with an empty Quota removes) a role's quota.
func (s *Store) PutQuota(role string, q allocator.Quota) error {
	v, ok, err := record.EncodeQuota(q)
	if err != nil {
		return err
	}
	return s.put(record.Quota, role, v, ok)
}

// PutWeights records roles' weights in one transaction.
func (s *Store) PutWeights(weights map[string]float64) error {
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(record.Weights))
		for role, w := range weights {
			data, err := record.EncodeWeight(w)
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

// PutDemand records a demand under its ID.
func (s *Store) PutDemand(d *demand.Demand) error {
	v, err := record.EncodeDemand(d)
	if err != nil {
		return err
	}
	return s.put(record.Demands, d.ID, v, true)
}

// Load reads everything.
func (s *Store) Load() (*master.Persisted, error) {
	p := record.NewPersisted()
	err := guard(s.path, func() error { return s.db.View(func(tx *bolt.Tx) error { return load(tx, p) }) })
	if err != nil {
		return nil, fmt.Errorf("load master store: %w", err)
	}
	return p, nil
}

// load reads every bucket into p; a read-only copy of a store older than
// a family has no bucket of it.
func load(tx *bolt.Tx, p *master.Persisted) error {
	for _, family := range record.Families {
		b := tx.Bucket([]byte(family))
		if b == nil {
			continue
		}
		err := b.ForEach(func(k, v []byte) error {
			if err := record.Decode(p, family, string(k), v); err != nil {
				return fmt.Errorf("%s/%s: %w", family, k, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
