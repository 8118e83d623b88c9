package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Snapshot is one container's view of an image: the image's layers as
// overlay lower dirs and the container's own upper and work dirs.
type Snapshot struct {
	ID    string   // the container's ID
	Image string   // the image's ID
	Lower []string // the layers' dirs, top first (overlay's lowerdir order)
	Upper string   // the container's writes; removed by Release
	Work  string   // overlay's work dir, on Upper's file system
}

// SnapshotInfo is a snapshot's lease, as Snapshots lists them.
type SnapshotInfo struct {
	ID    string // the container's ID
	Image string // the image's ID
}

type lease struct {
	Image string
}

var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// Prepare makes container id's snapshot of img and leases img to it: no
// Remove, Prune or GC removes the image until Release(id). The caller
// mounts the snapshot (Snapshot.Mount, or Options for a runtime spec)
// as the container's root. The lease survives a restart of the process
// (Open reads it back); Snapshots lists them so the caller can release
// those of containers that no longer exist. It returns an error
// wrapping ErrNotFound (no such image), ErrExist (id has a snapshot) or
// ErrInvalidReference (id is not a plain name).
func (s *Store) Prepare(_ context.Context, id string, img Image) (*Snapshot, error) {
	if !validID.MatchString(id) {
		return nil, fmt.Errorf("prepare snapshot %q: %w: want letters, digits, _ . -", id, ErrInvalidReference)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	have, ok := s.images[img.ID]
	if !ok {
		return nil, fmt.Errorf("prepare snapshot %s: image %s: %w", id, img.ID, ErrNotFound)
	}
	if _, ok := s.leases[id]; ok {
		return nil, fmt.Errorf("prepare snapshot %s: %w", id, ErrExist)
	}
	if err := s.makeSnapshotLocked(id, have.ID); err != nil {
		return nil, fmt.Errorf("prepare snapshot %s: %w", id, err)
	}
	s.leases[id] = have.ID
	have.LastUsed = s.now()
	// Not durable: a lost last-use time only makes the image look older.
	_ = s.writeRecordLocked(have, false)
	return s.snapshotLocked(id, have), nil
}

// makeSnapshotLocked builds the snapshot in the temporary directory and
// renames it into place, so a crash leaves either all of it or nothing
// outside tmp. The lease is not fsynced: a machine crash ends every
// container, and with them the need for their leases.
func (s *Store) makeSnapshotLocked(id, imageID string) error {
	tmp, err := os.MkdirTemp(filepath.Join(s.root, dirTmp), "snap-")
	if err != nil {
		return err
	}
	err = os.Mkdir(filepath.Join(tmp, "upper"), 0o755)
	if err == nil {
		err = os.Mkdir(filepath.Join(tmp, "work"), 0o700)
	}
	if err == nil {
		var b []byte
		b, err = json.Marshal(lease{Image: imageID})
		if err == nil {
			err = os.WriteFile(filepath.Join(tmp, "lease.json"), b, 0o600)
		}
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.root, dirSnapshots, id))
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
	}
	return err
}

func (s *Store) snapshotLocked(id string, img *Image) *Snapshot {
	dir := filepath.Join(s.root, dirSnapshots, id)
	snap := &Snapshot{ID: id, Image: img.ID, Upper: filepath.Join(dir, "upper"), Work: filepath.Join(dir, "work")}
	for _, l := range slices.Backward(img.Layers) {
		snap.Lower = append(snap.Lower, s.LayerDir(l.DiffID))
	}
	return snap
}

// Snapshot returns container id's snapshot, e.g. after a restart. It
// returns an error wrapping ErrNotFound.
func (s *Store) Snapshot(id string) (*Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	imgID, ok := s.leases[id]
	if !ok {
		return nil, fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	img, ok := s.images[imgID]
	if !ok {
		return nil, fmt.Errorf("snapshot %s: image %s: %w", id, imgID, ErrNotFound)
	}
	return s.snapshotLocked(id, img), nil
}

// Snapshots lists the snapshots and the images they lease.
func (s *Store) Snapshots() []SnapshotInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SnapshotInfo, 0, len(s.leases))
	for id, img := range s.leases {
		out = append(out, SnapshotInfo{ID: id, Image: img})
	}
	slices.SortFunc(out, func(a, b SnapshotInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Release removes container id's snapshot (its upper dir with the
// container's writes) and its lease. The overlay must be unmounted
// first. A snapshot that does not exist is not an error, so a caller
// may release again after a crash.
func (s *Store) Release(id string) error {
	if !validID.MatchString(id) {
		return fmt.Errorf("release snapshot %q: %w", id, ErrInvalidReference)
	}
	s.mu.Lock()
	dir := filepath.Join(s.root, dirSnapshots, id)
	if _, ok := s.leases[id]; !ok {
		// Every container's teardown releases, most have no image: no
		// directory made and removed for them (two inodes per launch).
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			s.mu.Unlock()
			return nil
		}
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.root, dirTmp), "rm-")
	if err == nil {
		err = os.Rename(dir, filepath.Join(tmp, "snap"))
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	}
	if err == nil {
		delete(s.leases, id)
	}
	s.mu.Unlock()
	if tmp != "" {
		if rerr := os.RemoveAll(tmp); err == nil {
			err = rerr
		}
	}
	if err != nil {
		return fmt.Errorf("release snapshot %s: %w", id, err)
	}
	return nil
}

// loadSnapshots reads the leases back at Open. One whose image is gone
// (removed by hand) is still listed, so its owner can release it.
func (s *Store) loadSnapshots() error {
	ents, err := os.ReadDir(filepath.Join(s.root, dirSnapshots))
	if err != nil {
		return err
	}
	for _, e := range ents {
		var l lease
		p := filepath.Join(s.root, dirSnapshots, e.Name(), "lease.json")
		b, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(b, &l)
		}
		if err != nil {
			return fmt.Errorf("read lease %s: %w", p, err)
		}
		s.leases[e.Name()] = l.Image
	}
	return nil
}
