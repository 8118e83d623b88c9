package containerizer

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/image"
	"github.com/brimnode/brim/internal/dirquota"
)

// prepareImage leases spec.Image to the container and returns its root
// for the bundle: the layers under its own upper dir, which in a user
// namespace is owned by the range's root (so that the container's / is
// root's, as the image's is), and limited to Limits.DiskBytes by a
// project quota where the file system enforces them (see DiskUsage for
// the others).
func (c *Containerizer) prepareImage(ctx context.Context, spec Spec) (*executor.ImageRoot, error) {
	if c.cfg.Images == nil {
		return nil, fmt.Errorf("image %s: %w", spec.Image, ErrNoImageStore)
	}
	snap, err := c.cfg.Images.Prepare(ctx, spec.ID, image.Image{ID: spec.Image})
	if err != nil {
		return nil, err
	}
	if r := spec.UserNS; r != nil {
		if err := os.Chown(snap.Upper, int(r.HostUID), int(r.HostGID)); err != nil {
			return nil, fmt.Errorf("user namespace: own upper dir: %w", err)
		}
	}
	if spec.ReadWrite && spec.Limits.DiskBytes > 0 {
		if q := c.projects(snap.Upper); q != nil {
			if err := q.Limit(q.Next(), spec.Limits.DiskBytes, snap.Upper, snap.Work); err != nil {
				return nil, fmt.Errorf("limit upper dir: %w", err)
			}
		}
	}
	return &executor.ImageRoot{Lower: snap.Lower, Upper: snap.Upper, Work: snap.Work, ReadWrite: spec.ReadWrite}, nil
}

// projects returns the project quotas of dir's file system, opened once;
// nil where it has none (the disk limit is then measured).
func (c *Containerizer) projects(dir string) *dirquota.Projects {
	c.quotaOnce.Do(func() {
		q, err := dirquota.Open(dir)
		if err != nil {
			c.log.Info("no project quotas for upper dirs: disk limits are measured", "err", err)
			return
		}
		c.reserveProjects(q)
		c.quota.Store(q)
	})
	return c.quota.Load()
}

// reserveProjects keeps the project IDs of the recovered containers'
// upper dirs from being handed out again.
func (c *Containerizer) reserveProjects(q *dirquota.Projects) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ct := range c.containers {
		if ct == nil || ct.spec.Image == "" {
			continue
		}
		if b, err := executor.ReadBundle(ct.dir); err == nil && b.Image != nil {
			if id, err := dirquota.ProjectID(b.Image.Upper); err == nil && id != 0 {
				q.Reserve(id)
			}
		}
	}
}

// DiskUsage is what container id has written to its root (its upper
// dir) and its limit (0: none); enforced says the kernel refuses writes
// past the limit (a project quota), so the caller need not act. A
// container without an image root writes nothing there: 0, 0. It
// returns an error wrapping ErrNotFound.
func (c *Containerizer) DiskUsage(_ context.Context, id string) (used, limit int64, enforced bool, err error) {
	ct, err := c.get(id)
	if err != nil {
		return 0, 0, false, fmt.Errorf("disk usage %s: %w", id, err)
	}
	if ct.spec.Image == "" || !ct.spec.ReadWrite {
		return 0, ct.spec.Limits.DiskBytes, false, nil
	}
	b, err := executor.ReadBundle(ct.dir)
	if err != nil || b.Image == nil {
		return 0, 0, false, fmt.Errorf("disk usage %s: %w", id, errors.Join(err, errors.New("no image root in its bundle")))
	}
	limit = ct.spec.Limits.DiskBytes
	if q := c.quota.Load(); q != nil {
		if pid, err := dirquota.ProjectID(b.Image.Upper); err == nil && pid != 0 {
			used, err := q.Usage(pid)
			return used, limit, true, err
		}
	}
	used, err = dirquota.Usage(b.Image.Upper)
	return used, limit, false, err
}

// releaseImage gives back container id's snapshot (its upper dir with
// what it wrote); the overlay lived in the shim's and the container's
// mount namespaces, gone with them. No snapshot is not an error.
func (c *Containerizer) releaseImage(id string) error {
	if c.cfg.Images == nil {
		return nil
	}
	return c.cfg.Images.Release(id)
}

// releaseOrphanSnapshots releases the snapshots of containers the
// containerizer does not know after Recover: launches that died before
// their record, containers removed while the agent was down.
func (c *Containerizer) releaseOrphanSnapshots() error {
	if c.cfg.Images == nil {
		return nil
	}
	var errs []error
	for _, s := range c.cfg.Images.Snapshots() {
		c.mu.Lock()
		_, known := c.containers[s.ID]
		c.mu.Unlock()
		if known {
			continue
		}
		c.log.Warn("releasing the snapshot of a container that no longer exists", "id", s.ID, "image", s.Image)
		if err := c.cfg.Images.Release(s.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
