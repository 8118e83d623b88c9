package network

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/brimnode/brim/internal/atomicfile"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/brimnode/brim/isolator"
)

// record is what the isolator remembers of one container, written to the
// state dir before any kernel object is made, removed after the last one is
// gone: a crash at any point leaves a record that Recover or Cleanup uses.
type record struct {
	ID string `json:"id"`
	// Index is the address's offset in the subnet; it also names the
	// container's HTB classes (minor number), filter priority and veth.
	Index   uint32          `json:"index"`
	Address netip.Addr      `json:"address"`
	Limits  isolator.Limits `json:"limits"`
	// Seq orders allocations, so that after a restart allocation goes on
	// round the subnet from the newest one instead of reusing a just-freed
	// address.
	Seq uint64 `json:"seq"`
}

// store keeps records as one JSON file per container in dir. Not safe for
// concurrent use.
type store struct{ dir string }

func (s store) path(id string) string { return filepath.Join(s.dir, id+".json") }

// load returns every record in the store.
func (s store) load() (map[string]record, error) {
	ents, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]record{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ipam state: %w", err)
	}
	recs := make(map[string]record, len(ents))
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, name))
		if err != nil {
			return nil, fmt.Errorf("read ipam record: %w", err)
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("parse ipam record %s: %w", name, err)
		}
		if r.ID+".json" != name {
			return nil, fmt.Errorf("parse ipam record %s: id %q does not match the file name: %w", name, r.ID, ErrInvalid)
		}
		recs[r.ID] = r
	}
	return recs, nil
}

// put writes r atomically (a temporary file renamed over the record).
//
// No fsync: the record only has to outlive the agent process, not the
// machine. The objects it describes (namespaces, links, classes) do not
// survive a reboot either, and a process crash leaves the page cache intact.
// This keeps two disk flushes out of every launch.
func (s store) put(r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode ipam record: %w", err)
	}
	return s.writeFile(s.path(r.ID), b)
}

func (s store) writeFile(path string, b []byte) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("create ipam state dir: %w", err)
	}
	if err := atomicfile.WriteFileNoSync(path, b, 0o600); err != nil {
		return fmt.Errorf("write ipam state: %w", err)
	}
	return nil
}

// remove deletes the record of id; a missing record is not an error.
func (s store) remove(id string) error {
	if err := os.Remove(s.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove ipam record: %w", err)
	}
	return nil
}

// newest returns the index and sequence number of the most recently
// allocated record (zeros when there is none), where round-robin allocation
// resumes after a restart.
func newest(recs map[string]record) (index uint32, seq uint64) {
	for _, r := range recs {
		if r.Seq >= seq {
			index, seq = r.Index, r.Seq
		}
	}
	return index, seq
}

// indexRange returns the first and last host index containers may take in
// subnet: the network address (0) is skipped, 1 is the bridge (gateway) and
// the broadcast address is skipped too.
func indexRange(subnet netip.Prefix) (first, last uint32) {
	size := uint64(1) << (32 - subnet.Bits())
	return 2, uint32(size - 2)
}

// nextIndex returns the first free index after last, wrapping round
// [first, max]; ok is false when every index is used.
func nextIndex(used map[uint32]bool, last, first, max uint32) (idx uint32, ok bool) {
	if max < first {
		return 0, false
	}
	n := max - first + 1
	start := first
	if last >= first && last < max {
		start = last + 1
	}
	for k := uint32(0); k < n; k++ {
		c := first + (start-first+k)%n
		if !used[c] {
			return c, true
		}
	}
	return 0, false
}

// addrAt returns the address at index idx of subnet.
func addrAt(subnet netip.Prefix, idx uint32) netip.Addr {
	b := subnet.Masked().Addr().As4()
	v := binary.BigEndian.Uint32(b[:]) + idx
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}
