package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/sync/singleflight"

	"github.com/brimnode/brim/internal/atomicfile"
	"github.com/brimnode/brim/internal/lockfile"
)

// Image is an image in the store: its identity, layers and the defaults
// its config gives a container. Values are copies; changing one changes
// nothing in the store.
type Image struct {
	// ID is the digest of the image's config (as Docker's image ID).
	ID string
	// Digest is the manifest's digest ("repo digest"): what
	// `name@sha256:…` pins and what `inspect` shows. Empty for a
	// docker-archive, which carries no manifest.
	Digest string
	// IndexDigest is the multi-arch index the image was resolved from,
	// if any.
	IndexDigest string
	// Refs are the normalised references that name the image.
	Refs []string
	// Platform is os/arch[/variant] of the image's config.
	Platform string
	// Layers are bottom first.
	Layers []Layer
	// Config is the image config's run defaults.
	Config Config
	// Size is the bytes its layers take in the cache (shared layers
	// counted in each image).
	Size int64
	// Pulled and LastUsed are when the image was pulled and last
	// pulled, looked up by Get's callers through Touch, or prepared for a
	// container.
	Pulled, LastUsed time.Time
}

// Layer is one unpacked layer.
type Layer struct {
	DiffID string // digest of the uncompressed tar: the unpacked dir's name
	Digest string // digest of the blob as the source served it
	Size   int64  // bytes in the cache (file sizes rounded up to 4 KiB)
}

// Config is what an image's config gives a container by default.
type Config struct {
	Entrypoint   []string          `json:",omitempty"`
	Cmd          []string          `json:",omitempty"`
	Env          []string          `json:",omitempty"`
	WorkingDir   string            `json:",omitempty"`
	User         string            `json:",omitempty"` // as written: name, uid, uid:gid, name:group
	ExposedPorts []string          `json:",omitempty"` // "80/tcp", sorted: a hint, nothing is published
	Labels       map[string]string `json:",omitempty"`
	StopSignal   string            `json:",omitempty"`
}

// Store is the image store: blobs, unpacked layers, image records and
// per-container snapshots under one root, which one process owns (Open
// locks it). All methods are safe for concurrent use. Close releases the
// root's lock; its owner closes it.
type Store struct {
	opts    Options
	root    string
	lock    *lockfile.Lock
	metrics Metrics
	now     func() time.Time

	pulls   singleflight.Group // by source string
	unpacks singleflight.Group // by layer DiffID

	mu       sync.Mutex
	images   map[string]*Image // by ID
	leases   map[string]string // container ID -> image ID
	inflight map[string]int    // layer DiffID -> pulls using it now (GC spares them)
	held     map[string]int    // image ID -> Holds not yet released (GC spares them)
	layers   map[string]int64  // DiffID -> size, of every complete layer on disk
}

const (
	dirBlobs     = "blobs/sha256"
	dirLayers    = "layers/sha256"
	dirImages    = "images"
	dirSnapshots = "snapshots"
	dirTmp       = "tmp"
)

// Open opens (creating) the store at opts.Root and locks it for this
// process. It removes what an interrupted pull or prepare left in the
// temporary directory, so nothing half-made is ever used. It returns an
// error wrapping lockfile.ErrLocked when another process holds the store.
func Open(opts Options) (*Store, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.MaxLayers == 0 {
		opts.MaxLayers = defaultMaxLayers
	}
	s := &Store{opts: opts, root: opts.Root, metrics: opts.Metrics, now: opts.Now,
		images: map[string]*Image{}, leases: map[string]string{},
		inflight: map[string]int{}, held: map[string]int{}, layers: map[string]int64{}}
	if s.metrics == nil {
		s.metrics = noMetrics{}
	}
	if s.now == nil {
		s.now = time.Now
	}
	for _, d := range []string{dirBlobs, dirLayers, dirImages, dirSnapshots, dirTmp} {
		if err := os.MkdirAll(filepath.Join(s.root, d), 0o700); err != nil {
			return nil, fmt.Errorf("open image store: %w", err)
		}
	}
	lock, err := lockfile.File(filepath.Join(s.root, "lock"))
	if err != nil {
		return nil, fmt.Errorf("open image store %s: %w", s.root, err)
	}
	s.lock = lock
	if err := s.load(); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("open image store %s: %w", s.root, err)
	}
	s.metrics.CacheBytes(s.usage())
	return s, nil
}

// Close releases the store's lock. The store must not be used after.
func (s *Store) Close() error { return s.lock.Close() }

// load reads the records and clears the temporary directory.
func (s *Store) load() error {
	if err := s.loadLayers(); err != nil {
		return err
	}
	if err := removeContents(filepath.Join(s.root, dirTmp)); err != nil {
		return err
	}
	ents, err := os.ReadDir(filepath.Join(s.root, dirImages))
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		var img Image
		p := filepath.Join(s.root, dirImages, e.Name())
		b, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(b, &img)
		}
		if err != nil || !s.complete(&img) {
			// A record is written whole after its layers: an unreadable
			// one, or one missing a layer, was changed by hand. The
			// store is a cache: drop the record, the next pull makes it
			// again.
			if err := atomicfile.Remove(p); err != nil {
				return err
			}
			continue
		}
		s.images[img.ID] = &img
	}
	return s.loadSnapshots()
}

func (s *Store) loadLayers() error {
	ents, err := os.ReadDir(filepath.Join(s.root, dirLayers))
	if err != nil {
		return err
	}
	for _, e := range ents {
		var m layerMeta
		b, err := os.ReadFile(filepath.Join(s.root, dirLayers, e.Name(), "layer.json"))
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil || m.DiffID != "sha256:"+e.Name() {
			// Renamed into place with its layer.json: one without is
			// not the store's. Put it where Open's next clearing of tmp
			// removes it; the next pull unpacks the layer again.
			if err := os.Rename(filepath.Join(s.root, dirLayers, e.Name()), filepath.Join(s.root, dirTmp, "bad-"+e.Name())); err != nil {
				return fmt.Errorf("set aside layer %s: %w", e.Name(), err)
			}
			continue
		}
		s.layers[m.DiffID] = m.Size
	}
	return nil
}

func (s *Store) complete(img *Image) bool {
	for _, l := range img.Layers {
		if _, ok := s.layers[l.DiffID]; !ok {
			return false
		}
	}
	return true
}

// Get returns the image a reference (normalised as ParseSource does), an
// image ID or a manifest digest (`sha256:…`) names. It does not pull. It
// returns an error wrapping ErrNotFound or ErrInvalidReference.
func (s *Store) Get(ref string) (Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, err := s.lookupLocked(ref)
	if err != nil {
		return Image{}, err
	}
	return img.clone(), nil
}

// Hold is Get that also keeps the image from Remove, Prune and GC until
// release is called (once; later calls do nothing): a launch holds the
// image it resolved until Prepare leases it to the container, so that a
// garbage collection in between cannot take it. It returns an error
// wrapping ErrNotFound or ErrInvalidReference.
func (s *Store) Hold(ref string) (img Image, release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	have, err := s.lookupLocked(ref)
	if err != nil {
		return Image{}, nil, err
	}
	id := have.ID
	s.held[id]++
	var once sync.Once
	return have.clone(), func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.held[id]--; s.held[id] <= 0 {
				delete(s.held, id)
			}
		})
	}, nil
}

func (s *Store) lookupLocked(ref string) (*Image, error) {
	if strings.HasPrefix(ref, "sha256:") {
		for _, img := range s.images {
			if img.ID == ref || img.Digest == ref || img.IndexDigest == ref {
				return img, nil
			}
		}
		return nil, fmt.Errorf("get %s: %w", ref, ErrNotFound)
	}
	r, err := ParseReference(ref)
	if err != nil {
		return nil, err
	}
	norm := Normalize(r)
	for _, img := range s.images {
		if slices.Contains(img.Refs, norm) {
			return img, nil
		}
	}
	// repo@digest names an image pulled as repo:tag too.
	if d, ok := r.(name.Digest); ok {
		repo := repoOf(norm)
		for _, img := range s.images {
			if img.Digest != d.DigestStr() && img.IndexDigest != d.DigestStr() {
				continue
			}
			if slices.ContainsFunc(img.Refs, func(x string) bool { return repoOf(x) == repo }) {
				return img, nil
			}
		}
	}
	return nil, fmt.Errorf("get %s: %w", norm, ErrNotFound)
}

// repoOf is a normalised reference without its tag or digest.
func repoOf(norm string) string {
	if at := strings.IndexByte(norm, '@'); at >= 0 {
		return norm[:at]
	}
	if c := strings.LastIndexByte(norm, ':'); c > strings.LastIndexByte(norm, '/') {
		return norm[:c]
	}
	return norm
}

// List returns every image, most recently used first.
func (s *Store) List() []Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Image, 0, len(s.images))
	for _, img := range s.images {
		out = append(out, img.clone())
	}
	slices.SortFunc(out, func(a, b Image) int { return b.LastUsed.Compare(a.LastUsed) })
	return out
}

// Usage is the cache's size in bytes: unpacked layers and blobs.
func (s *Store) Usage() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage()
}

func (s *Store) usage() int64 {
	var n int64
	for _, sz := range s.layers {
		n += sz
	}
	return n
}

// LayerDir is the directory an overlay mounts as the layer's lower dir.
func (s *Store) LayerDir(diffID string) string {
	return filepath.Join(s.root, dirLayers, hexOf(diffID), "fs")
}

func (img *Image) clone() Image {
	c := *img
	c.Refs = slices.Clone(img.Refs)
	c.Layers = slices.Clone(img.Layers)
	c.Config.Entrypoint = slices.Clone(img.Config.Entrypoint)
	c.Config.Cmd = slices.Clone(img.Config.Cmd)
	c.Config.Env = slices.Clone(img.Config.Env)
	c.Config.ExposedPorts = slices.Clone(img.Config.ExposedPorts)
	if img.Config.Labels != nil {
		c.Config.Labels = make(map[string]string, len(img.Config.Labels))
		for k, v := range img.Config.Labels {
			c.Config.Labels[k] = v
		}
	}
	return c
}

// writeRecordLocked persists img durably (a new image) or not (a
// last-use change: losing one to a crash only makes the image look older).
func (s *Store) writeRecordLocked(img *Image, durable bool) error {
	b, err := json.MarshalIndent(img, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(s.root, dirImages, hexOf(img.ID)+".json")
	if durable {
		return atomicfile.WriteFile(p, b, 0o600)
	}
	return atomicfile.WriteFileNoSync(p, b, 0o600)
}

// hexOf is a digest's hex part (the file name it is stored under).
func hexOf(digest string) string {
	_, h, _ := strings.Cut(digest, ":")
	return h
}

// removeContents empties dir, keeping dir.
func removeContents(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
