package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/brimnode/brim/internal/testregistry"
	"github.com/brimnode/brim/internal/testutil"
)

// fakeClock is a settable clock for last-use times (only the order of
// uses matters to the LRU, never how long anything took).
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { c.t = c.t.Add(time.Minute); return c.t }

// Under a size cap the least recently used image no container holds
// goes first; a leased one never does, whatever its age.
func TestGCLeastRecentlyUsed(t *testing.T) {
	testutil.RequireRoot(t)
	reg := testregistry.Start(t, testregistry.Options{})
	for _, n := range []string{"a", "b", "c", "d"} {
		// 256 KiB each, distinct content, so each image has its own layer.
		reg.Push(t, n+":1", testregistry.Image(t, "linux/amd64", v1.Config{},
			testregistry.Layer(t, tarOf(t, file(n, strings.Repeat(n, 256<<10))))))
	}
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := &testMetrics{}
	s := openStore(t, Options{Registries: insecure(reg.Host), MaxBytes: 3 * 270 << 10, Now: clock.now, Metrics: m})
	ctx := context.Background()
	pull := func(n string) Image {
		t.Helper()
		img, err := s.Pull(ctx, reg.Ref(n+":1"), PullOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	a := pull("a")
	pull("b")
	pull("c")
	if _, err := s.Prepare(ctx, "uses-a", a); err != nil { // a: oldest pull, but leased
		t.Fatal(err)
	}
	pull("d") // over the cap: b, the least recently used unleased, goes
	if got := refsOf(s.List()); got != "d,a,c" {
		t.Errorf("images after the cap = %s, want d,a,c (most recent first; b evicted)", got)
	}
	if m.cache != s.Usage() || s.Usage() > 3*270<<10 {
		t.Errorf("cache %d (reported %d), cap %d", s.Usage(), m.cache, 3*270<<10)
	}

	if _, err := s.Remove(ctx, reg.Ref("a:1")); !errors.Is(err, ErrInUse) {
		t.Errorf("Remove of a leased image = %v, want ErrInUse", err)
	}
	rep, err := s.Prune(ctx)
	if err != nil || len(rep.Images) != 2 || rep.Bytes == 0 {
		t.Errorf("Prune = %+v, %v; want c and d removed", rep, err)
	}
	if err := s.Release("uses-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Remove(ctx, reg.Ref("a:1")); err != nil {
		t.Errorf("Remove after Release: %v", err)
	}
	if _, err := s.Remove(ctx, reg.Ref("a:1")); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove twice = %v, want ErrNotFound", err)
	}
	ents, _ := os.ReadDir(filepath.Join(s.root, dirLayers))
	if s.Usage() != 0 || len(ents) != 0 || m.cache != 0 {
		t.Errorf("after removing everything: usage %d, layers %v, reported %d", s.Usage(), names(ents), m.cache)
	}
	assertClean(t, s)
}

func refsOf(imgs []Image) string {
	var out []string
	for _, img := range imgs {
		r := img.Refs[0]
		out = append(out, r[strings.LastIndexByte(r, '/')+1:len(r)-2])
	}
	return strings.Join(out, ",")
}

// Images, names and leases survive a restart; a second process cannot
// open the store while the first holds it.
func TestStoreReopen(t *testing.T) {
	testutil.RequireRoot(t)
	reg := testregistry.Start(t, testregistry.Options{})
	reg.Push(t, "app:1", threeLayers(t))
	root := filepath.Join(t.TempDir(), "images")
	s, err := Open(Options{Root: root, Registries: insecure(reg.Host)})
	if err != nil {
		t.Fatal(err)
	}
	img, err := s.Pull(context.Background(), reg.Ref("app:1"), PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Prepare(context.Background(), "c1", img)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prepare(context.Background(), "c1", img); !errors.Is(err, ErrExist) {
		t.Errorf("Prepare twice = %v, want ErrExist", err)
	}
	if _, err := s.Prepare(context.Background(), "../c2", img); !errors.Is(err, ErrInvalidReference) {
		t.Errorf("Prepare ../c2 = %v, want ErrInvalidReference", err)
	}
	if _, err := Open(Options{Root: root}); err == nil {
		t.Error("a second Open of a held store succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, Options{Root: root})
	got, err := s.Get(reg.Ref("app:1"))
	if err != nil || got.ID != img.ID || got.Config.WorkingDir != "/srv" {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
	again, err := s.Snapshot("c1")
	if err != nil || again.Upper != snap.Upper || len(again.Lower) != 3 {
		t.Fatalf("snapshot after reopen: %+v, %v", again, err)
	}
	if infos := s.Snapshots(); len(infos) != 1 || infos[0].Image != img.ID {
		t.Errorf("Snapshots = %+v", infos)
	}
	if _, err := s.Prune(context.Background()); err != nil || len(s.List()) != 1 {
		t.Errorf("Prune removed a leased image after reopen: %v, %v", s.List(), err)
	}
}

// Remove of repo@digest removes an image pulled by tag (it used to take
// off a name the image did not have and report success).
func TestRemoveByRepoDigest(t *testing.T) {
	testutil.RequireRoot(t)
	reg := testregistry.Start(t, testregistry.Options{})
	digest := reg.Push(t, "app:1", smallImage(t, "linux/amd64", "x"))
	reg.Push(t, "app:2", smallImage(t, "linux/amd64", "x"))
	s := openStore(t, Options{Registries: insecure(reg.Host)})
	for _, tag := range []string{"app:1", "app:2"} {
		if _, err := s.Pull(context.Background(), reg.Ref(tag), PullOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if imgs := s.List(); len(imgs) != 1 || len(imgs[0].Refs) != 2 {
		t.Fatalf("two tags of one image: %+v", imgs)
	}
	if _, err := s.Remove(context.Background(), reg.Ref("app@"+digest)); err != nil {
		t.Fatal(err)
	}
	if imgs := s.List(); len(imgs) != 0 {
		t.Errorf("after Remove of app@%s: %+v, want no image", digest, imgs)
	}
	assertClean(t, s)
}

// The store is a cache: a record or layer changed by hand is dropped at
// Open (not a store that refuses to open), and the next pull makes it
// again.
func TestStoreDropsTamperedCache(t *testing.T) {
	testutil.RequireRoot(t)
	reg := testregistry.Start(t, testregistry.Options{})
	reg.Push(t, "a:1", smallImage(t, "linux/amd64", "a"))
	reg.Push(t, "b:1", smallImage(t, "linux/amd64", "b"))
	root := filepath.Join(t.TempDir(), "images")
	s, err := Open(Options{Root: root, Registries: insecure(reg.Host)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Pull(context.Background(), reg.Ref("a:1"), PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Pull(context.Background(), reg.Ref("b:1"), PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if err := os.WriteFile(filepath.Join(root, dirImages, hexOf(a.ID)+".json"), []byte("{trunc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, dirLayers, hexOf(b.Layers[0].DiffID), "layer.json")); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, Options{Root: root, Registries: insecure(reg.Host)})
	if imgs := s.List(); len(imgs) != 0 {
		t.Errorf("images after tampering: %+v, want none", imgs)
	}
	ents, _ := os.ReadDir(filepath.Join(root, dirTmp))
	if len(ents) != 0 {
		t.Errorf("tmp after Open: %v", names(ents))
	}
	for _, ref := range []string{"a:1", "b:1"} {
		if _, err := s.Pull(context.Background(), reg.Ref(ref), PullOptions{}); err != nil {
			t.Errorf("pull %s again: %v", ref, err)
		}
	}
	assertClean(t, s)
}
