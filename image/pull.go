package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// PullOptions tune one Pull.
type PullOptions struct {
	// Name names an image loaded from a layout or archive in the store
	// (a registry reference, normalised). Without it the image is named
	// by the archive's own tag (docker-archive) or only by its ID and
	// digest.
	Name string
	// Progress, when set, is told about each layer as it is found in the
	// cache or has been fetched and unpacked: from the pulling
	// goroutines, one call at a time. When another caller's pull of the
	// same source is under way, this one shares it and is told nothing.
	Progress func(LayerProgress)
}

// LayerProgress is one layer's news during a Pull.
type LayerProgress struct {
	Index, Count int    // the layer's place (1 is the bottom) and the image's layers
	Digest       string // its blob's digest
	Size         int64  // the blob's size; -1 when the source does not say
	Fetched      int64  // bytes fetched; 0 when cached (or fetched by another pull)
	Cached       bool   // the layer was in the cache already
}

// resolved is an image found at its source, before anything is stored.
type resolved struct {
	ref      string   // what was pulled, for errors
	img      v1.Image // the platform's image
	manifest []byte   // its raw manifest, nil for a docker-archive
	digest   string   // the manifest's digest, "" for a docker-archive
	index    []byte   // the raw index it was resolved from, if any
	indexDig string
	refs     []string // names to give it
	uncomp   bool     // layers are read uncompressed (docker-archive)
}

// Pull resolves source (see ParseSource) to the host's platform, fetches
// and verifies every blob by digest, unpacks the layers the store lacks
// and records the image under its names. A tag is always resolved again
// (tags move); layers already unpacked are not fetched again. Concurrent
// pulls of one source happen once, and of one layer once; a caller whose
// shared pull was cancelled by another caller's ctx runs it again. On error nothing half-made stays and the store is
// as before. Errors wrap ErrInvalidReference, ErrNotFound,
// ErrUnauthorized, ErrInsecure, ErrDigestMismatch (*DigestError),
// ErrNoPlatform (*PlatformError), ErrUnsafeLayer (*UnsafeLayerError) or
// the cause (a full disk: syscall.ENOSPC).
func (s *Store) Pull(ctx context.Context, source string, opts PullOptions) (Image, error) {
	start := time.Now()
	stats := PullStats{Source: source}
	img, err := s.pullOnce(ctx, source, opts, &stats)
	stats.Duration, stats.Err = time.Since(start), err
	s.metrics.Pulled(stats)
	return img, err
}

type pullResult struct {
	img    Image
	bytes  int64
	layers int
}

func (s *Store) pullOnce(ctx context.Context, source string, opts PullOptions, stats *PullStats) (Image, error) {
	src, err := ParseSource(source)
	if err != nil {
		return Image{}, err
	}
	var name string
	if opts.Name != "" {
		ref, err := ParseReference(opts.Name)
		if err != nil {
			return Image{}, err
		}
		name = Normalize(ref)
	}
	// Only the caller whose function ran counts the bytes and layers.
	var v any
	for attempt := 0; ; attempt++ {
		v, err, _ = s.pulls.Do(src.String()+"\x00"+name, func() (any, error) {
			r, err := s.pull(ctx, src, name, opts.Progress)
			stats.Bytes, stats.Layers = r.bytes, r.layers
			return r, err
		})
		if attempt == 2 || !cancelledElsewhere(ctx, err) {
			break
		}
	}
	r, _ := v.(pullResult)
	if err != nil {
		return Image{}, fmt.Errorf("pull %s: %w", src, err)
	}
	return r.img.clone(), nil
}

func (s *Store) pull(ctx context.Context, src Source, name string, progress func(LayerProgress)) (pullResult, error) {
	var res resolved
	var err error
	var cleanup func()
	switch src.Transport {
	case Registry:
		res, err = s.resolveRegistry(ctx, src)
	case OCILayout:
		res, err = s.resolveLayout(src.Path, src)
	case OCIArchive:
		res, cleanup, err = s.resolveOCIArchive(src)
	case DockerArchive:
		res, err = s.resolveDockerArchive(src)
	}
	if cleanup != nil {
		defer cleanup()
	}
	if err != nil {
		return pullResult{}, err
	}
	if name != "" {
		res.refs = append(res.refs, name)
	}
	return s.store(ctx, res, progress)
}

// resolveRegistry tries the registry's mirrors in order, then the
// registry itself.
func (s *Store) resolveRegistry(ctx context.Context, src Source) (resolved, error) {
	kc, err := loadAuth(s.opts.AuthFile)
	if err != nil {
		return resolved{}, err
	}
	cands, err := s.candidates(src.ref)
	if err != nil {
		return resolved{}, err
	}
	var errs []error
	for _, c := range cands {
		res, err := s.resolveRemote(ctx, src, c, kc)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil || errors.Is(err, ErrNoPlatform) || len(cands) == 1 {
			return resolved{}, err
		}
		errs = append(errs, fmt.Errorf("from %s: %w", hostOf(c), err))
	}
	return resolved{}, errors.Join(errs...)
}

func (s *Store) resolveRemote(ctx context.Context, src Source, ref name.Reference, kc keychain) (resolved, error) {
	host := ref.Context().RegistryStr()
	opts, err := s.remoteOptions(ctx, host, kc)
	if err != nil {
		return resolved{}, err
	}
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return resolved{}, fmt.Errorf("registry %s: %w", registryName(host), classify(err))
	}
	res := resolved{ref: src.Ref, refs: []string{src.Ref}}
	top := digestOf(desc.Manifest)
	if d, ok := ref.(name.Digest); ok && top != d.DigestStr() {
		return resolved{}, &DigestError{Ref: src.Ref, What: "manifest", Want: d.DigestStr(), Got: top}
	}
	switch {
	case desc.MediaType.IsIndex():
		idx, err := desc.ImageIndex()
		if err != nil {
			return resolved{}, err
		}
		res.index, res.indexDig = desc.Manifest, top
		child, err := s.pickPlatform(src.Ref, desc.Manifest)
		if err != nil {
			return resolved{}, err
		}
		if res.img, err = idx.Image(child.Digest); err != nil {
			return resolved{}, fmt.Errorf("registry %s: %w", registryName(host), classify(err))
		}
		return res, s.checkManifest(&res, child.Digest.String())
	case desc.MediaType.IsImage():
		if res.img, err = desc.Image(); err != nil {
			return resolved{}, err
		}
		return res, s.checkManifest(&res, top)
	}
	return resolved{}, fmt.Errorf("registry %s: %s is a %s, not an OCI or Docker v2 image or index", registryName(host), src.Ref, desc.MediaType)
}

// checkManifest reads res.img's manifest and checks it hashes to want.
func (s *Store) checkManifest(res *resolved, want string) error {
	raw, err := res.img.RawManifest()
	if err != nil {
		return fmt.Errorf("read manifest %s: %w", want, classify(err))
	}
	if got := digestOf(raw); got != want {
		return &DigestError{Ref: res.ref, What: "manifest", Want: want, Got: got}
	}
	res.manifest, res.digest = raw, want
	return nil
}

// pickPlatform is the index's manifest for the store's platform.
func (s *Store) pickPlatform(ref string, raw []byte) (v1.Descriptor, error) {
	im, err := v1.ParseIndexManifest(bytes.NewReader(raw))
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("parse index of %s: %w", ref, err)
	}
	want := s.opts.platform()
	var avail []string
	for _, d := range im.Manifests {
		if d.Platform == nil || d.Platform.OS == "unknown" {
			continue // attestations and the like
		}
		if !d.MediaType.IsImage() && d.MediaType != "" {
			continue
		}
		if platformMatches(*d.Platform, want) {
			return d, nil
		}
		avail = append(avail, d.Platform.String())
	}
	return v1.Descriptor{}, &PlatformError{Ref: ref, Want: want.String(), Available: avail}
}

func platformMatches(have, want v1.Platform) bool {
	if have.OS != want.OS || have.Architecture != want.Architecture {
		return false
	}
	return want.Variant == "" || have.Variant == "" || have.Variant == want.Variant
}

// store fetches the config and layers of res and records the image.
func (s *Store) store(ctx context.Context, res resolved, progress func(LayerProgress)) (pullResult, error) {
	cfgRaw, err := res.img.RawConfigFile()
	if err != nil {
		return pullResult{}, fmt.Errorf("read config: %w", classify(err))
	}
	id := digestOf(cfgRaw)
	var m *v1.Manifest
	if res.manifest != nil {
		if m, err = v1.ParseManifest(bytes.NewReader(res.manifest)); err != nil {
			return pullResult{}, fmt.Errorf("parse manifest %s: %w", res.digest, err)
		}
		if want := m.Config.Digest.String(); want != id {
			return pullResult{}, &DigestError{Ref: res.ref, What: "config", Want: want, Got: id}
		}
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(cfgRaw))
	if err != nil {
		return pullResult{}, fmt.Errorf("parse config %s: %w", id, err)
	}
	if err := s.checkPlatform(res.ref, cf); err != nil {
		return pullResult{}, err
	}
	specs, err := s.layerSpecs(res, m, cf)
	if err != nil {
		return pullResult{}, err
	}
	s.hold(specs, 1)
	defer s.hold(specs, -1)
	fetched, unpacked, err := s.ensureLayers(ctx, specs, progress)
	if err != nil {
		return pullResult{bytes: fetched}, err
	}
	img, err := s.record(res, id, cfgRaw, cf, specs)
	if err != nil {
		return pullResult{bytes: fetched}, err
	}
	if s.opts.MaxBytes > 0 {
		if _, err := s.gc(ctx, id); err != nil {
			return pullResult{bytes: fetched}, fmt.Errorf("garbage-collect after pull: %w", err)
		}
	}
	s.metrics.CacheBytes(s.Usage())
	return pullResult{img: img, bytes: fetched, layers: unpacked}, nil
}

func (s *Store) checkPlatform(ref string, cf *v1.ConfigFile) error {
	have := v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}
	if have.OS == "" && have.Architecture == "" {
		return nil // very old images say nothing; take them as the host's
	}
	if want := s.opts.platform(); !platformMatches(have, want) {
		return &PlatformError{Ref: ref, Want: want.String(), Available: []string{have.String()}}
	}
	return nil
}

func (s *Store) layerSpecs(res resolved, m *v1.Manifest, cf *v1.ConfigFile) ([]layerSpec, error) {
	diffIDs := cf.RootFS.DiffIDs
	if len(diffIDs) > s.opts.MaxLayers {
		return nil, fmt.Errorf("%s has %d layers, at most %d are allowed", res.ref, len(diffIDs), s.opts.MaxLayers)
	}
	if m != nil && len(m.Layers) != len(diffIDs) {
		return nil, fmt.Errorf("%s: manifest has %d layers, config %d", res.ref, len(m.Layers), len(diffIDs))
	}
	specs := make([]layerSpec, len(diffIDs))
	for i, diffID := range diffIDs {
		spec := layerSpec{Ref: res.ref, DiffID: diffID.String(), Digest: diffID.String(), Size: -1}
		if m != nil {
			d := m.Layers[i]
			if !isLayerType(d.MediaType) { // foreign (non-distributable) layers too
				return nil, fmt.Errorf("%s: layer %s has media type %s, not a layer brim unpacks", res.ref, d.Digest, d.MediaType)
			}
			spec.Digest, spec.Size = d.Digest.String(), d.Size
			spec.Open = compressedOpener(res.img, d.Digest)
		} else {
			spec.Open = uncompressedOpener(res.img, diffID)
		}
		specs[i] = spec
	}
	return specs, nil
}

func isLayerType(mt types.MediaType) bool {
	switch mt {
	case types.DockerLayer, types.OCILayer, types.OCILayerZStd, types.OCIUncompressedLayer, types.DockerUncompressedLayer:
		return true
	}
	return false
}

func compressedOpener(img v1.Image, h v1.Hash) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		l, err := img.LayerByDigest(h)
		if err != nil {
			return nil, err
		}
		return l.Compressed()
	}
}

func uncompressedOpener(img v1.Image, h v1.Hash) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		l, err := img.LayerByDiffID(h)
		if err != nil {
			return nil, err
		}
		return l.Uncompressed()
	}
}

// ensureLayers unpacks the missing layers, two at a time, telling
// progress (when set) about each.
func (s *Store) ensureLayers(ctx context.Context, specs []layerSpec, progress func(LayerProgress)) (int64, int, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	fetched := make([]int64, len(specs))
	var mu sync.Mutex
	for i, l := range specs {
		g.Go(func() error {
			s.mu.Lock()
			_, cached := s.layers[l.DiffID]
			s.mu.Unlock()
			n, err := s.ensureLayer(gctx, l)
			fetched[i] = n
			if err == nil && progress != nil {
				mu.Lock()
				progress(LayerProgress{Index: i + 1, Count: len(specs), Digest: l.Digest, Size: l.Size, Fetched: n, Cached: cached})
				mu.Unlock()
			}
			return err
		})
	}
	err := g.Wait()
	var total int64
	var unpacked int
	for _, n := range fetched {
		total += n
		if n > 0 {
			unpacked++
		}
	}
	return total, unpacked, err
}

// hold marks layers as in use by a pull (delta 1) or no longer (-1):
// garbage collection spares them.
func (s *Store) hold(specs []layerSpec, delta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range specs {
		if s.inflight[l.DiffID] += delta; s.inflight[l.DiffID] <= 0 {
			delete(s.inflight, l.DiffID)
		}
	}
}

// record writes the blobs and the image's record, and moves its names
// to it from any image that had them.
func (s *Store) record(res resolved, id string, cfgRaw []byte, cf *v1.ConfigFile, specs []layerSpec) (Image, error) {
	for _, b := range [][]byte{cfgRaw, res.manifest, res.index} {
		if err := s.writeBlob(b); err != nil {
			return Image{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	img := s.images[id]
	if img == nil {
		img = &Image{ID: id, Pulled: now}
	}
	img.Digest, img.IndexDigest = res.digest, res.indexDig
	img.Platform = platformOf(cf)
	img.Config = configOf(cf)
	img.Layers = img.Layers[:0]
	img.Size = 0
	for _, l := range specs {
		sz := s.layers[l.DiffID]
		img.Layers = append(img.Layers, Layer{DiffID: l.DiffID, Digest: l.Digest, Size: sz})
		img.Size += sz
	}
	img.LastUsed = now
	for _, r := range res.refs {
		if !slices.Contains(img.Refs, r) {
			img.Refs = append(img.Refs, r)
		}
	}
	if err := s.writeRecordLocked(img, true); err != nil {
		return Image{}, fmt.Errorf("record image %s: %w", id, err)
	}
	s.images[id] = img
	for _, other := range s.images {
		if other == img {
			continue
		}
		n := len(other.Refs)
		other.Refs = slices.DeleteFunc(other.Refs, func(r string) bool { return slices.Contains(res.refs, r) })
		if len(other.Refs) != n {
			if err := s.writeRecordLocked(other, true); err != nil {
				return Image{}, fmt.Errorf("move names from image %s: %w", other.ID, err)
			}
		}
	}
	return img.clone(), nil
}

func platformOf(cf *v1.ConfigFile) string {
	return v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}.String()
}

func configOf(cf *v1.ConfigFile) Config {
	c := cf.Config
	out := Config{Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env, WorkingDir: c.WorkingDir,
		User: c.User, Labels: c.Labels, StopSignal: c.StopSignal}
	for p := range c.ExposedPorts {
		out.ExposedPorts = append(out.ExposedPorts, p)
	}
	slices.Sort(out.ExposedPorts)
	return out
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
