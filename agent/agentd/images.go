package agentd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/containerizer"
	"github.com/brimnode/brim/image"
)

// ImageConfig is the image flags (docs/images.md).
type ImageConfig struct {
	AuthFile string   // --image-auth-file: a Docker-style auth.json, read at each pull
	CAs      []string // --image-registry-ca HOST=FILE: a PEM CA trusted for HOST
	Insecure []string // --image-insecure-registry HOST: plain HTTP, loopback hosts only
	Mirrors  []string // --image-mirror HOST=MIRROR: tried in order before HOST
	// CacheMaxMiB is --image-cache-max: the cache's cap (LRU garbage
	// collection after each pull and every GCInterval), kept out of the
	// disk the agent offers; 0: no cap (refused with a disk in
	// --resources: the cache would eat the disk offered).
	CacheMaxMiB int64
	// UpperLimitMiB is --image-upper-limit: the limit of a read-write
	// image root whose container asks no disk; 0: none.
	UpperLimitMiB int64
	PullTimeout   time.Duration // --image-pull-timeout: bounds a pull (positive)
	GCInterval    time.Duration // --image-gc-interval: positive
	DiskInterval  time.Duration // --image-disk-interval: how often upper dirs are measured (positive)
}

// Defaults of the image flags.
const (
	DefaultImageCacheMaxMiB   = 10 << 10
	DefaultImageUpperLimitMiB = 1 << 10
	DefaultImageGCInterval    = 5 * time.Minute
	DefaultImageDiskInterval  = 10 * time.Second
)

// DefaultImageConfig is the image flags' defaults.
func DefaultImageConfig() ImageConfig {
	return ImageConfig{CacheMaxMiB: DefaultImageCacheMaxMiB, UpperLimitMiB: DefaultImageUpperLimitMiB, PullTimeout: agent.DefaultPullTimeout,
		GCInterval: DefaultImageGCInterval, DiskInterval: DefaultImageDiskInterval}
}

// options checks the flags and returns the image store's options (Root,
// Metrics and the cap set by the caller).
func (c ImageConfig) options() (map[string]image.RegistryConfig, error) {
	switch {
	case c.CacheMaxMiB < 0:
		return nil, bad("--image-cache-max", "%d: must not be negative (0: no cap)", c.CacheMaxMiB)
	case c.UpperLimitMiB < 0:
		return nil, bad("--image-upper-limit", "%d: must not be negative (0: no limit)", c.UpperLimitMiB)
	case c.PullTimeout <= 0:
		return nil, bad("--image-pull-timeout", "%s: must be positive", c.PullTimeout)
	case c.GCInterval <= 0:
		return nil, bad("--image-gc-interval", "%s: must be positive", c.GCInterval)
	case c.DiskInterval <= 0:
		return nil, bad("--image-disk-interval", "%s: must be positive", c.DiskInterval)
	}
	if c.AuthFile != "" {
		if _, err := os.Stat(c.AuthFile); err != nil {
			return nil, bad("--image-auth-file", "%w", err)
		}
	}
	regs := map[string]image.RegistryConfig{}
	for _, s := range c.CAs {
		host, file, ok := strings.Cut(s, "=")
		if !ok || host == "" || !filepath.IsAbs(file) {
			return nil, bad("--image-registry-ca", "%q: want HOST=/path/to/ca.pem", s)
		}
		if _, err := os.Stat(file); err != nil {
			return nil, bad("--image-registry-ca", "%s: %w", host, err)
		}
		rc := regs[host]
		rc.CAFile = file
		regs[host] = rc
	}
	for _, host := range c.Insecure {
		rc := regs[host]
		rc.Insecure = true
		regs[host] = rc
	}
	for _, s := range c.Mirrors {
		host, m, ok := strings.Cut(s, "=")
		if !ok || host == "" || m == "" {
			return nil, bad("--image-mirror", "%q: want HOST=MIRROR", s)
		}
		rc := regs[host]
		rc.Mirrors = append(rc.Mirrors, m)
		regs[host] = rc
	}
	// The store's own checks (a mirror's spelling, plain HTTP off
	// loopback), with a root that it never creates here.
	opts := image.Options{Root: "/", Registries: regs}
	if err := opts.Validate(); err != nil {
		flag := "--image-mirror"
		if errors.Is(err, image.ErrInsecure) {
			flag = "--image-insecure-registry"
		}
		return nil, bad(flag, "%w", err)
	}
	return regs, nil
}

// offeredDisk is the agent's resources with the image cache's cap taken
// out of its disk: the cache's own share, never offered to containers.
func (c ImageConfig) offeredDisk(total agent.Resources) (agent.Resources, error) {
	if total.DiskMiB == 0 {
		return total, nil
	}
	switch {
	case c.CacheMaxMiB == 0:
		return total, bad("--image-cache-max", "0 (no cap) with disk:%d in --resources: the image cache would eat the disk offered to containers; give the cache a cap", total.DiskMiB)
	case c.CacheMaxMiB >= total.DiskMiB:
		return total, bad("--image-cache-max", "%d MiB: leaves nothing of --resources disk:%d for the containers", c.CacheMaxMiB, total.DiskMiB)
	}
	total.DiskMiB -= c.CacheMaxMiB
	return total, nil
}

// openImages opens the agent's image store, STATE/images.
func (d *Daemon) openImages(m *imageMetrics) (*image.Store, error) {
	regs, err := d.cfg.Image.options()
	if err != nil {
		return nil, err
	}
	s, err := image.Open(image.Options{
		Root: filepath.Join(d.cfg.StateDir, "images"), AuthFile: d.cfg.Image.AuthFile, Registries: regs,
		MaxBytes: d.cfg.Image.CacheMaxMiB << 20, Metrics: m,
	})
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	return s, nil
}

// releaseSnapshots removes the containers' snapshots (upper dirs with
// their writes, and their leases) from the image store under root, for
// `brim agent cleanup` once the containers are gone; the cache itself
// stays for the next agent. It returns what it removed, one line each.
func releaseSnapshots(root string) ([]string, error) {
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	s, err := image.Open(image.Options{Root: root})
	if err != nil {
		return nil, fmt.Errorf("release snapshots: %w", err)
	}
	defer func() { _ = s.Close() }()
	var out []string
	var errs []error
	for _, sn := range s.Snapshots() {
		if err := s.Release(sn.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, fmt.Sprintf("removed snapshot of container %s (image %s; its root's writes)", sn.ID, sn.Image))
	}
	return out, errors.Join(errs...)
}

// collectImages runs the cache's garbage collection every interval: the
// pulls run it too, but images a container stopped using must also go
// when the cache is over its cap and no pull comes.
func collectImages(ctx context.Context, s *image.Store, every time.Duration, log *slog.Logger) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		rep, err := s.GC(ctx)
		if err != nil {
			log.Warn("image garbage collection", "err", err)
			continue
		}
		if len(rep.Images) > 0 || rep.Layers > 0 {
			log.Info("image garbage collection", "images", rep.Images, "layers", rep.Layers, "bytes", rep.Bytes)
		}
	}
}

// diskUser is what the disk watcher needs of the containerizer.
type diskUser interface {
	DiskUsage(ctx context.Context, id string) (used, limit int64, enforced bool, err error)
}

// killer is what the disk watcher needs of the agent.
type killer interface {
	List() []*agent.Container
	KillWithReason(ctx context.Context, ref string, grace time.Duration, reason agent.ExitReason, message string) (*agent.Container, error)
}

// watchDisks measures the upper dir of every running container with a
// read-write image root and a limit the kernel does not enforce (no
// project quotas), every interval, and kills one that wrote more than
// its limit with reason agent.ReasonDiskLimit.
func watchDisks(ctx context.Context, a killer, cz diskUser, every time.Duration, log *slog.Logger) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		checkDisks(ctx, a, cz, log)
	}
}

// checkDisks is one round of watchDisks.
func checkDisks(ctx context.Context, a killer, cz diskUser, log *slog.Logger) {
	for _, c := range a.List() {
		if c.State != agent.StateRunning || !c.ReadWrite || c.Limits.DiskBytes <= 0 {
			continue
		}
		used, limit, enforced, err := cz.DiskUsage(ctx, c.ID)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, containerizer.ErrNotFound) {
				log.Warn("measure a container's root", "id", c.ID, "err", err)
			}
			continue
		}
		if enforced || limit <= 0 || used <= limit {
			continue
		}
		msg := fmt.Sprintf("the container wrote %d MiB to its root, over its disk limit of %d MiB", used>>20, limit>>20)
		log.Warn("killing a container over its disk limit", "id", c.ID, "used", used, "limit", limit)
		if _, err := a.KillWithReason(ctx, c.ID, 0, agent.ReasonDiskLimit, msg); err != nil && !errors.Is(err, agent.ErrNotRunning) {
			log.Warn("kill a container over its disk limit", "id", c.ID, "err", err)
		}
	}
}

// imageMetrics are the image store's figures on the agent's /metrics:
// brim_image_cache_bytes, brim_image_pulls_total{result},
// brim_image_pull_seconds, brim_image_pulled_bytes_total and
// brim_image_layers_unpacked_total. Safe for concurrent use.
type imageMetrics struct {
	cache   prometheus.Gauge
	pulls   *prometheus.CounterVec
	seconds prometheus.Histogram
	bytes   prometheus.Counter
	layers  prometheus.Counter
}

var (
	_ image.Metrics        = (*imageMetrics)(nil)
	_ prometheus.Collector = (*imageMetrics)(nil)
)

func newImageMetrics() *imageMetrics {
	return &imageMetrics{
		cache: prometheus.NewGauge(prometheus.GaugeOpts{Name: "brim_image_cache_bytes",
			Help: "Bytes the image cache's unpacked layers take."}),
		pulls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brim_image_pulls_total",
			Help: "Image pulls, by result (ok, error)."}, []string{"result"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "brim_image_pull_seconds",
			Help: "Duration of image pulls.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 14)}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "brim_image_pulled_bytes_total",
			Help: "Bytes image pulls fetched (compressed, as sent)."}),
		layers: prometheus.NewCounter(prometheus.CounterOpts{Name: "brim_image_layers_unpacked_total",
			Help: "Layers image pulls unpacked (not found in the cache)."}),
	}
}

// Pulled records one pull.
func (m *imageMetrics) Pulled(p image.PullStats) {
	result := "ok"
	if p.Err != nil {
		result = "error"
	}
	m.pulls.WithLabelValues(result).Inc()
	m.seconds.Observe(p.Duration.Seconds())
	m.bytes.Add(float64(p.Bytes))
	m.layers.Add(float64(p.Layers))
}

// CacheBytes records the cache's size.
func (m *imageMetrics) CacheBytes(n int64) { m.cache.Set(float64(n)) }

// Describe implements prometheus.Collector.
func (m *imageMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *imageMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *imageMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.cache, m.pulls, m.seconds, m.bytes, m.layers}
}
