package image

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Options configures a Store. Only Root is required.
type Options struct {
	// Root is the store's directory, e.g. STATE/images. Created if absent.
	Root string
	// AuthFile is a Docker-style auth.json ({"auths": {"HOST":
	// {"auth": base64(user:password)}}}), read at each pull so a rotated
	// file applies without a restart. Empty: anonymous pulls.
	AuthFile string
	// Registries configures registries by host (`docker.io`,
	// `registry.example.com:5000`): their CAs, mirrors, and whether they
	// are plain HTTP.
	Registries map[string]RegistryConfig
	// Platform is os/arch[/variant] to resolve multi-arch indexes to.
	// Empty: the host's.
	Platform string
	// MaxBytes caps the cache (unpacked layers and blobs): after each
	// pull the least recently used images no container holds are removed
	// until the cache fits. Zero: no cap.
	MaxBytes int64
	// MaxLayers bounds an image's layers (overlay stacks only so many
	// lower dirs). Zero: 128.
	MaxLayers int
	// Metrics receives the store's figures. Nil: none.
	Metrics Metrics
	// Now is the clock of last-use times. Nil: time.Now.
	Now func() time.Time
}

// RegistryConfig is one registry's connection settings.
type RegistryConfig struct {
	// CAFile is a PEM file of CAs trusted for this registry, besides the
	// system's.
	CAFile string
	// Insecure allows plain HTTP. Only loopback hosts may set it
	// (localhost, 127.0.0.0/8, ::1): anything else is refused at Open.
	Insecure bool
	// Mirrors are hosts tried in order before this registry; the first
	// that has the image serves it. Content is verified by digest as
	// from the registry itself; a mirror is trusted to resolve tags.
	Mirrors []string
}

// Metrics receives the store's figures; the agent exports them. Its
// methods are called from the pulling goroutine and must not block.
type Metrics interface {
	// Pulled is called once per Pull, when it ends.
	Pulled(PullStats)
	// CacheBytes is called with the cache's size after each change.
	CacheBytes(n int64)
}

// PullStats is one pull's figures.
type PullStats struct {
	Source   string        // the source as given
	Duration time.Duration // from the call to its return
	Bytes    int64         // bytes fetched (compressed, as sent)
	Layers   int           // layers unpacked by this pull (not found in the cache)
	Err      error         // nil on success
}

type noMetrics struct{}

func (noMetrics) Pulled(PullStats) {}
func (noMetrics) CacheBytes(int64) {}

const defaultMaxLayers = 128

// Validate checks the options as Open does, without touching Root: an
// agent checks its flags with it before it creates anything.
func (o Options) Validate() error { return o.validate() }

func (o *Options) validate() error {
	if o.Root == "" {
		return fmt.Errorf("image store: no root directory")
	}
	for host, rc := range o.Registries {
		if rc.Insecure && !isLoopback(host) {
			return fmt.Errorf("image store: registry %s: plain HTTP is allowed for loopback registries only: %w", host, ErrInsecure)
		}
		for _, m := range rc.Mirrors {
			if m == "" || strings.ContainsAny(m, "/ ") {
				return fmt.Errorf("image store: registry %s: mirror %q: want host[:port]", host, m)
			}
		}
	}
	if o.Platform != "" {
		if _, err := v1.ParsePlatform(o.Platform); err != nil || !strings.Contains(o.Platform, "/") {
			return fmt.Errorf("image store: platform %q: want os/arch[/variant]", o.Platform)
		}
	}
	if o.MaxBytes < 0 || o.MaxLayers < 0 {
		return fmt.Errorf("image store: negative MaxBytes or MaxLayers")
	}
	return nil
}

// registry returns the settings of host under its one spelling.
func (o *Options) registry(host string) RegistryConfig {
	want := registryName(host)
	for h, rc := range o.Registries {
		if registryName(h) == want {
			return rc
		}
	}
	return RegistryConfig{}
}

func (o *Options) platform() v1.Platform {
	if o.Platform == "" {
		p := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
		if runtime.GOARCH == "arm" {
			p.Variant = "v7"
		}
		return p
	}
	p, _ := v1.ParsePlatform(o.Platform) // checked by validate
	return *p
}

// isLoopback reports whether host[:port] is on loopback by its spelling
// alone (no DNS: a name that resolves to loopback today may not tomorrow).
func isLoopback(host string) bool {
	h := host
	if sh, _, err := net.SplitHostPort(host); err == nil {
		h = sh
	}
	h = strings.Trim(h, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
