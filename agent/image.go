package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/brimnode/brim/image"
	"github.com/brimnode/brim/internal/hostuser"
)

// DefaultPullTimeout bounds a pull when Options.PullTimeout is zero: a
// registry that stops sending must not hold a launch or a client for
// ever.
const DefaultPullTimeout = 10 * time.Minute

// PullPolicy says when a launch from an image pulls it.
type PullPolicy string

// Pull policies. The zero value is PullMissing.
const (
	// PullMissing pulls only an image the cache lacks (Kubernetes'
	// IfNotPresent).
	PullMissing PullPolicy = "missing"
	// PullAlways resolves the reference again at every launch (a tag
	// may have moved); layers already cached are not fetched again.
	PullAlways PullPolicy = "always"
	// PullNever launches only from the cache.
	PullNever PullPolicy = "never"
)

// ParsePullPolicy parses "missing", "always" or "never" ("" is missing).
// Errors wrap ErrInvalidArgument.
func ParsePullPolicy(s string) (PullPolicy, error) {
	switch p := PullPolicy(s); p {
	case "", PullMissing:
		return PullMissing, nil
	case PullAlways, PullNever:
		return p, nil
	}
	return "", fmt.Errorf("%w: pull policy %q: want missing, always or never", ErrInvalidArgument, s)
}

// imageLaunch is what a launch from an image resolved: the image, held
// from garbage collection until the runtime leases it, and its user
// database.
type imageLaunch struct {
	img     image.Image
	release func()
}

// resolveImage finds (pulling it as spec.Pull says) spec.Image and lays
// its defaults under spec: the command (entrypoint and cmd by Docker's
// rules), the environment (the image's, then spec's), the working
// directory and, when spec names no user, the image's user. The image is
// held until the caller's release. Errors wrap ErrInvalidArgument (no
// image store, a bad policy, no command) or the image store's (a pull's
// error names the reference; image.ErrNotFound with the policy never).
func (a *Agent) resolveImage(ctx context.Context, spec *Spec) (*imageLaunch, error) {
	if a.opts.Images == nil {
		return nil, fmt.Errorf("%w: image %s: the agent has no image store", ErrInvalidArgument, spec.Image)
	}
	policy, err := ParsePullPolicy(string(spec.Pull))
	if err != nil {
		return nil, err
	}
	img, release, err := a.holdImage(ctx, spec.Image, policy)
	if err != nil {
		return nil, err
	}
	cfg := img.Config
	if spec.Command, err = cfg.Argv(spec.Command); err != nil {
		release()
		return nil, fmt.Errorf("%w: image %s: %w", ErrInvalidArgument, spec.Image, err)
	}
	spec.Env = cfg.MergeEnv(spec.Env)
	spec.Cwd = cfg.Cwd(spec.Cwd)
	if spec.User == "" {
		spec.User = cfg.User
	}
	return &imageLaunch{img: img, release: release}, nil
}

// holdImage returns ref's image held, pulling it first when policy asks
// or the cache lacks it (and policy allows). An image a garbage
// collection took between the pull and the hold is pulled once more.
func (a *Agent) holdImage(ctx context.Context, ref string, policy PullPolicy) (image.Image, func(), error) {
	s := a.opts.Images
	pull := policy == PullAlways
	for attempt := 0; ; attempt++ {
		if pull {
			img, err := a.pull(ctx, ref, image.PullOptions{})
			if err != nil {
				return image.Image{}, nil, err
			}
			ref = img.ID // hold what was pulled, even if the tag moves meanwhile
		}
		img, release, err := s.Hold(ref)
		if err == nil {
			return img, release, nil
		}
		if !errors.Is(err, image.ErrNotFound) || attempt == 1 {
			return image.Image{}, nil, err
		}
		if policy == PullNever {
			return image.Image{}, nil, fmt.Errorf("%s is not in the agent's image cache and the pull policy is never: %w", ref, image.ErrNotFound)
		}
		pull = true
	}
}

// lookupUser resolves user in the image's /etc/passwd and /etc/group, as
// its containers see them (never the host's).
func (l *imageLaunch) lookupUser(s *image.Store, ref, user string) (hostuser.ID, error) {
	open := func(name string) (io.ReadCloser, error) { return s.Open(l.img, name) }
	return hostuser.LookupIn(open, "image "+ref, user)
}

// checkImage checks the image fields of a launch before anything is
// pulled or made: an image excludes a rootfs, and a pull policy or a
// read-write root needs an image.
func (s *Spec) checkImage() error {
	if s.Resources.DiskMiB < 0 {
		return fmt.Errorf("%w: disk %d MiB: must not be negative", ErrInvalidArgument, s.Resources.DiskMiB)
	}
	if s.Image == "" {
		if s.Pull != "" || s.ReadWrite {
			return fmt.Errorf("%w: a pull policy or a read-write root needs an image", ErrInvalidArgument)
		}
		return nil
	}
	if s.Rootfs != "" {
		return fmt.Errorf("%w: image %s and rootfs %s: give one", ErrInvalidArgument, s.Image, s.Rootfs)
	}
	if !image.IsID(s.Image) {
		if _, err := image.ParseReference(s.Image); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
	}
	_, err := ParsePullPolicy(string(s.Pull))
	return err
}

// diskLimit is the limit of a container's writes to its root: the disk
// it asks for, else, for a read-write image root, the agent's
// UpperLimitMiB. A read-only root writes nothing there.
func (a *Agent) diskLimit(spec Spec) int64 {
	switch {
	case spec.Resources.DiskMiB > 0:
		return spec.Resources.DiskMiB << 20
	case spec.Image != "" && spec.ReadWrite:
		return a.opts.UpperLimitMiB << 20
	}
	return 0
}

// ImageInfo is a cached image and the containers that use it.
type ImageInfo struct {
	image.Image
	Containers []string
}

// PullImage pulls source (a reference, or a layout or archive on the
// agent's host: see image.ParseSource) into the cache, naming a loaded
// image name; progress (may be nil) hears about each layer. Errors wrap
// ErrInvalidArgument (no image store) or the image store's.
func (a *Agent) PullImage(ctx context.Context, source, name string, progress func(image.LayerProgress)) (image.Image, error) {
	if a.opts.Images == nil {
		return image.Image{}, fmt.Errorf("%w: the agent has no image store", ErrInvalidArgument)
	}
	img, err := a.pull(ctx, source, image.PullOptions{Name: name, Progress: progress})
	if err != nil {
		return image.Image{}, err
	}
	a.log.Info("pulled image", "source", source, "id", img.ID, "digest", img.Digest)
	return img, nil
}

// pull is the store's Pull bounded by Options.PullTimeout; the error says
// so when the bound ends it.
func (a *Agent) pull(ctx context.Context, source string, opts image.PullOptions) (image.Image, error) {
	pctx, cancel := context.WithTimeout(ctx, a.opts.PullTimeout)
	defer cancel()
	img, err := a.opts.Images.Pull(pctx, source, opts)
	if err != nil && ctx.Err() == nil && pctx.Err() != nil {
		return image.Image{}, fmt.Errorf("pull %s: not done within %v (the agent's --image-pull-timeout): %w", source, a.opts.PullTimeout, err)
	}
	return img, err
}

// ImageCache is the image cache's size in bytes and its cap
// (Options.ImageCacheMax; 0: none).
type ImageCache struct {
	Bytes, MaxBytes int64
}

// imageCache is the cache's size and cap; zero without an image store.
func (a *Agent) imageCache() ImageCache {
	if a.opts.Images == nil {
		return ImageCache{}
	}
	return ImageCache{Bytes: a.opts.Images.Usage(), MaxBytes: a.opts.ImageCacheMax}
}

// Images lists the cache, most recently used first, with the containers
// that use each image; and the cache's bytes and cap.
func (a *Agent) Images() (imgs []ImageInfo, cache ImageCache, err error) {
	s := a.opts.Images
	if s == nil {
		return nil, ImageCache{}, fmt.Errorf("%w: the agent has no image store", ErrInvalidArgument)
	}
	users := map[string][]string{}
	for _, sn := range s.Snapshots() {
		users[sn.Image] = append(users[sn.Image], sn.ID)
	}
	for _, img := range s.List() {
		imgs = append(imgs, ImageInfo{Image: img, Containers: users[img.ID]})
	}
	return imgs, a.imageCache(), nil
}

// RemoveImage takes ref (a name, an image ID or a digest) off its image
// (see image.Store.Remove). Errors wrap ErrInvalidArgument or the image
// store's (image.ErrNotFound, image.ErrInUse).
func (a *Agent) RemoveImage(ctx context.Context, ref string) (image.PruneReport, error) {
	if a.opts.Images == nil {
		return image.PruneReport{}, fmt.Errorf("%w: the agent has no image store", ErrInvalidArgument)
	}
	rep, err := a.opts.Images.Remove(ctx, ref)
	if err == nil {
		a.log.Info("removed image", "ref", ref, "images", rep.Images, "bytes", rep.Bytes)
	}
	return rep, err
}

// PruneImages removes every image no container uses.
func (a *Agent) PruneImages(ctx context.Context) (image.PruneReport, error) {
	if a.opts.Images == nil {
		return image.PruneReport{}, fmt.Errorf("%w: the agent has no image store", ErrInvalidArgument)
	}
	rep, err := a.opts.Images.Prune(ctx)
	if err == nil {
		a.log.Info("pruned images", "images", len(rep.Images), "bytes", rep.Bytes)
	}
	return rep, err
}
