package image

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// PruneReport says what a Remove, Prune or GC freed.
type PruneReport struct {
	Images []string // IDs of the images removed
	Layers int      // unpacked layers removed
	Bytes  int64    // cache bytes freed
}

// Remove takes a name off its image; the image goes when no name is left
// (an ID or digest removes the image with all its names), with the
// layers and blobs no other image uses. It returns an error wrapping
// ErrNotFound, or ErrInUse when a container holds the image and it would
// go (its names stay then).
func (s *Store) Remove(ctx context.Context, ref string) (PruneReport, error) {
	s.mu.Lock()
	img, err := s.lookupLocked(ref)
	if err != nil {
		s.mu.Unlock()
		return PruneReport{}, fmt.Errorf("remove %s: %w", ref, err)
	}
	// A name the image has, but not its last: only the name goes. An ID,
	// a digest, or repo@digest: the image goes.
	if name := nameOf(ref); len(img.Refs) > 1 && slices.Contains(img.Refs, name) {
		img.Refs = slices.DeleteFunc(img.Refs, func(x string) bool { return x == name })
		err := s.writeRecordLocked(img, true)
		s.mu.Unlock()
		return PruneReport{}, err
	}
	if c := s.leaseHolderLocked(img.ID); c != "" {
		s.mu.Unlock()
		return PruneReport{}, fmt.Errorf("remove %s: container %s uses image %s: %w", ref, c, img.ID, ErrInUse)
	}
	rep := PruneReport{}
	doomed, err := s.removeImageLocked(img, &rep)
	s.mu.Unlock()
	return s.finishRemoval(ctx, rep, doomed, err)
}

// nameOf is ref normalised, "" for an ID or digest.
func nameOf(ref string) string {
	if strings.HasPrefix(ref, "sha256:") {
		return ""
	}
	r, err := ParseReference(ref)
	if err != nil {
		return ""
	}
	return Normalize(r)
}

// Prune removes every image no container holds, and every layer no
// image uses (`docker image prune -a`).
func (s *Store) Prune(ctx context.Context) (PruneReport, error) {
	s.mu.Lock()
	var rep PruneReport
	var doomed []string
	var err error
	for _, img := range s.images {
		if s.leaseHolderLocked(img.ID) != "" {
			continue
		}
		var d []string
		d, err = s.removeImageLocked(img, &rep)
		doomed = append(doomed, d...)
		if err != nil {
			break
		}
	}
	s.mu.Unlock()
	return s.finishRemoval(ctx, rep, doomed, err)
}

// GC removes the layers no image uses, then, while the cache is larger
// than Options.MaxBytes, the least recently used image no container
// holds. Pull runs it after every pull when MaxBytes is set.
func (s *Store) GC(ctx context.Context) (PruneReport, error) { return s.gc(ctx, "") }

// gc is GC sparing the image keep (the one just pulled).
func (s *Store) gc(ctx context.Context, keep string) (PruneReport, error) {
	s.mu.Lock()
	var rep PruneReport
	doomed, err := s.sweepLayersLocked(&rep)
	if err == nil && s.opts.MaxBytes > 0 && s.usage() > s.opts.MaxBytes {
		lru := make([]*Image, 0, len(s.images))
		for _, img := range s.images {
			if img.ID != keep && s.leaseHolderLocked(img.ID) == "" {
				lru = append(lru, img)
			}
		}
		slices.SortFunc(lru, func(a, b *Image) int { return a.LastUsed.Compare(b.LastUsed) })
		for _, img := range lru {
			if s.usage() <= s.opts.MaxBytes {
				break
			}
			var d []string
			d, err = s.removeImageLocked(img, &rep)
			doomed = append(doomed, d...)
			if err != nil {
				break
			}
		}
	}
	s.mu.Unlock()
	return s.finishRemoval(ctx, rep, doomed, err)
}

// finishRemoval deletes the renamed-away directories outside the lock
// and reports the cache's new size.
func (s *Store) finishRemoval(_ context.Context, rep PruneReport, doomed []string, err error) (PruneReport, error) {
	for _, d := range doomed {
		if rerr := os.RemoveAll(d); rerr != nil && err == nil {
			err = rerr
		}
	}
	s.metrics.CacheBytes(s.Usage())
	return rep, err
}

// leaseHolderLocked names who keeps image id: a container's lease, or a
// launch's Hold; "" for nobody.
func (s *Store) leaseHolderLocked(id string) string {
	if s.held[id] > 0 {
		return "(a launch in progress)"
	}
	for c, img := range s.leases {
		if img == id {
			return c
		}
	}
	return ""
}

// removeImageLocked forgets img (its record durably first: a crash after
// leaves layers nobody uses, which the next GC removes) and sweeps what
// no image uses any more. It returns the directories to delete.
func (s *Store) removeImageLocked(img *Image, rep *PruneReport) ([]string, error) {
	p := filepath.Join(s.root, dirImages, hexOf(img.ID)+".json")
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("remove image %s: %w", img.ID, err)
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		return nil, fmt.Errorf("remove image %s: %w", img.ID, err)
	}
	delete(s.images, img.ID)
	rep.Images = append(rep.Images, img.ID)
	s.removeBlobsLocked(img)
	return s.sweepLayersLocked(rep)
}

// removeBlobsLocked removes img's config, manifest and index blobs that
// no other image names.
func (s *Store) removeBlobsLocked(img *Image) {
	for _, d := range []string{img.ID, img.Digest, img.IndexDigest} {
		if d == "" {
			continue
		}
		used := false
		for _, o := range s.images {
			if o.ID == d || o.Digest == d || o.IndexDigest == d {
				used = true
			}
		}
		if !used {
			_ = os.Remove(filepath.Join(s.root, dirBlobs, hexOf(d)))
		}
	}
}

// sweepLayersLocked renames every layer no image and no running pull
// uses into the temporary directory (a crash then leaves it where Open
// clears it) and returns those directories.
func (s *Store) sweepLayersLocked(rep *PruneReport) ([]string, error) {
	used := map[string]bool{}
	for _, img := range s.images {
		for _, l := range img.Layers {
			used[l.DiffID] = true
		}
	}
	var doomed []string
	for diffID, size := range s.layers {
		if used[diffID] || s.inflight[diffID] > 0 {
			continue
		}
		tmp, err := os.MkdirTemp(filepath.Join(s.root, dirTmp), "rm-")
		if err != nil {
			return doomed, err
		}
		dst := filepath.Join(tmp, "layer")
		if err := os.Rename(filepath.Join(s.root, dirLayers, hexOf(diffID)), dst); err != nil {
			return doomed, fmt.Errorf("remove layer %s: %w", diffID, err)
		}
		delete(s.layers, diffID)
		doomed = append(doomed, tmp)
		rep.Layers++
		rep.Bytes += size
	}
	return doomed, nil
}
