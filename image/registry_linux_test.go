package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/internal/testregistry"
	"github.com/brimnode/brim/internal/testutil"
)

// testMetrics records what the store reports.
type testMetrics struct {
	mu    sync.Mutex
	pulls []PullStats
	cache int64
}

func (m *testMetrics) Pulled(p PullStats) { m.mu.Lock(); m.pulls = append(m.pulls, p); m.mu.Unlock() }
func (m *testMetrics) CacheBytes(n int64) { m.mu.Lock(); m.cache = n; m.mu.Unlock() }

func openStore(t *testing.T, opts Options) *Store {
	t.Helper()
	if opts.Root == "" {
		opts.Root = filepath.Join(t.TempDir(), "images")
	}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// insecure lists plain-HTTP loopback registries.
func insecure(hosts ...string) map[string]RegistryConfig {
	m := map[string]RegistryConfig{}
	for _, h := range hosts {
		m[h] = RegistryConfig{Insecure: true}
	}
	return m
}

// assertClean checks that nothing half-made is left: the temporary
// directory is empty and every layer directory belongs to an image.
func assertClean(t *testing.T, s *Store) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(s.root, dirTmp))
	if err != nil || len(ents) != 0 {
		t.Errorf("tmp holds %v, %v; want nothing", names(ents), err)
	}
	used := map[string]bool{}
	for _, img := range s.List() {
		for _, l := range img.Layers {
			used[hexOf(l.DiffID)] = true
		}
	}
	layers, _ := os.ReadDir(filepath.Join(s.root, dirLayers))
	for _, l := range layers {
		if !used[l.Name()] {
			t.Errorf("layer %s on disk belongs to no image", l.Name())
		}
	}
}

func names(ents []os.DirEntry) []string {
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// threeLayers is an image whose upper layers delete a file (whiteout),
// empty a directory (opaque) and hard-link a file.
func threeLayers(t *testing.T) v1.Image {
	base := testregistry.Layer(t, tarOf(t,
		dir("etc/"), file("etc/passwd", "root:x:0:0::/root:/bin/sh\n"), file("etc/motd", "hello"),
		dir("var/"), dir("var/cache/"), file("var/cache/old", "old"), file("var/cache/stale", "s"),
		dir("bin/"), file("bin/tool", "v1")))
	mid := testregistry.Layer(t, tarOf(t,
		dir("etc/"), file("etc/.wh.motd", ""),
		dir("var/cache/"), file("var/cache/.wh..wh..opq", ""), file("var/cache/fresh", "f")))
	top := testregistry.Layer(t, tarOf(t,
		dir("bin/"), file("bin/tool", "v2"), hardlink("bin/tool-link", "bin/tool")))
	cfg := v1.Config{Entrypoint: []string{"/bin/tool"}, Cmd: []string{"--serve"}, Env: []string{"A=1"},
		WorkingDir: "/srv", User: "1000:1000", ExposedPorts: map[string]struct{}{"8080/tcp": {}, "53/udp": {}}}
	return testregistry.Image(t, "linux/amd64", cfg, base, mid, top)
}

func TestPullPrepareMount(t *testing.T) {
	testutil.RequireRoot(t)
	reg := testregistry.Start(t, testregistry.Options{})
	img := threeLayers(t)
	digest := reg.Push(t, "app:1", img)
	m := &testMetrics{}
	s := openStore(t, Options{Registries: insecure(reg.Host), Metrics: m})

	got, err := s.Pull(context.Background(), reg.Ref("app:1"), PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != digest || len(got.Layers) != 3 || got.Refs[0] != reg.Ref("app:1") {
		t.Errorf("pulled %+v; want digest %s, 3 layers, ref %s", got, digest, reg.Ref("app:1"))
	}
	want := Config{Entrypoint: []string{"/bin/tool"}, Cmd: []string{"--serve"}, Env: []string{"A=1"},
		WorkingDir: "/srv", User: "1000:1000", ExposedPorts: []string{"53/udp", "8080/tcp"}}
	if !slices.Equal(got.Config.Entrypoint, want.Entrypoint) || !slices.Equal(got.Config.Cmd, want.Cmd) ||
		!slices.Equal(got.Config.Env, want.Env) || got.Config.WorkingDir != want.WorkingDir ||
		got.Config.User != want.User || !slices.Equal(got.Config.ExposedPorts, want.ExposedPorts) {
		t.Errorf("config = %+v, want %+v", got.Config, want)
	}
	if byDigest, err := s.Get(reg.Ref("app@" + digest)); err != nil || byDigest.ID != got.ID {
		t.Errorf("Get by digest = %v, %v", byDigest.ID, err)
	}
	if len(m.pulls) != 1 || m.pulls[0].Err != nil || m.pulls[0].Layers != 3 || m.pulls[0].Bytes == 0 || m.cache == 0 {
		t.Errorf("metrics: pulls %+v, cache %d", m.pulls, m.cache)
	}

	snap, err := s.Prepare(context.Background(), "c1", got)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "rootfs")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := snap.Mount(root); err != nil {
		t.Fatal(err)
	}
	mounted := true
	unmount := func() {
		if mounted {
			if err := unix.Unmount(root, unix.MNT_DETACH); err != nil {
				t.Error(err)
			}
			mounted = false
		}
	}
	t.Cleanup(unmount)
	checkMerged(t, root)
	if err := os.WriteFile(filepath.Join(root, "etc/new"), []byte("w"), 0o644); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(snap.Upper, "etc/new")) != "w" {
		t.Error("a write did not land in the upper dir")
	}
	unmount()
	for _, l := range snap.Lower {
		if _, err := os.Stat(filepath.Join(l, "etc/new")); err == nil {
			t.Errorf("a write reached lower dir %s", l)
		}
	}
	if _, err := s.Remove(context.Background(), got.ID); !errors.Is(err, ErrInUse) {
		t.Errorf("Remove of a leased image = %v, want ErrInUse", err)
	}
	if err := s.Release("c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(snap.Upper)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("upper dir after Release: %v", err)
	}
	assertClean(t, s)
}

func checkMerged(t *testing.T, root string) {
	t.Helper()
	if got := readFile(t, filepath.Join(root, "bin/tool")); got != "v2" {
		t.Errorf("bin/tool = %q, want the top layer's v2", got)
	}
	if got := readFile(t, filepath.Join(root, "bin/tool-link")); got != "v2" {
		t.Errorf("bin/tool-link = %q, want v2", got)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/motd")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("etc/motd visible through its whiteout: %v", err)
	}
	if got := readFile(t, filepath.Join(root, "etc/passwd")); !strings.HasPrefix(got, "root:") {
		t.Errorf("etc/passwd = %q", got)
	}
	ents, err := os.ReadDir(filepath.Join(root, "var/cache"))
	if err != nil || !slices.Equal(names(ents), []string{"fresh"}) {
		t.Errorf("var/cache holds %v, %v; want only fresh (opaque)", names(ents), err)
	}
}
