package image

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/brimnode/brim/internal/testregistry"
	"github.com/brimnode/brim/internal/testutil"
)

// loadImage puts img into s through an OCI layout (no registry).
func loadImage(t *testing.T, s *Store, img v1.Image, name string, progress func(LayerProgress)) Image {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	got, err := s.Pull(context.Background(), "oci:"+dir, PullOptions{Name: name, Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Open reads a file as overlay stacks the layers: the top copy wins,
// whiteouts and opaque directories hide lower copies, symlinks are not
// followed.
func TestOpenLayered(t *testing.T) {
	testutil.RequireRoot(t)
	s := openStore(t, Options{})
	withLink := testregistry.Layer(t, tarOf(t, dir("etc/"), symlink("etc/group", "/etc/passwd"),
		dir("srv/"), file("srv/data", "d")))
	base, err := threeLayers(t).Layers()
	if err != nil {
		t.Fatal(err)
	}
	img := loadImage(t, s, testregistry.Image(t, "linux/amd64", v1.Config{}, append(base, withLink)...), "app:1", nil)
	for _, tc := range []struct {
		path, want string
		err        error
	}{
		{"etc/passwd", "root:x:0:0::/root:/bin/sh\n", nil},
		{"/bin/tool", "v2", nil},
		{"var/cache/fresh", "f", nil},
		{"srv/data", "d", nil},
		{"etc/motd", "", ErrNotFound},       // whiteout in the middle layer
		{"var/cache/old", "", ErrNotFound},  // opaque directory above it
		{"etc/nothing", "", fs.ErrNotExist}, // no layer has it
		{"etc/group", "", ErrNotSupported},  // a symlink, not followed
		{"etc", "", ErrNotSupported},        // a directory
		{"../etc/passwd", "", ErrInvalidReference},
	} {
		f, err := s.Open(img, tc.path)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("Open(%q) = %v, want %v", tc.path, err, tc.err)
			}
			if f != nil {
				f.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%q): %v", tc.path, err)
			continue
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != tc.want {
			t.Errorf("Open(%q) reads %q, want %q", tc.path, b, tc.want)
		}
	}
}

// A held image survives Prune and GC until released; progress names
// every layer, cached or fetched.
func TestHoldAndProgress(t *testing.T) {
	testutil.RequireRoot(t)
	s := openStore(t, Options{})
	var mu sync.Mutex
	var events []LayerProgress
	img := loadImage(t, s, threeLayers(t), "app:1", func(p LayerProgress) {
		mu.Lock()
		events = append(events, p)
		mu.Unlock()
	})
	if len(events) != 3 {
		t.Fatalf("progress events %+v, want one per layer", events)
	}
	for _, e := range events {
		if e.Count != 3 || e.Cached || e.Fetched <= 0 || e.Index < 1 || e.Index > 3 {
			t.Errorf("progress %+v: want a fetched layer of 3", e)
		}
	}
	events = nil
	loadImage(t, s, threeLayers(t), "app:1", func(p LayerProgress) { events = append(events, p) })
	for _, e := range events {
		if !e.Cached || e.Fetched != 0 {
			t.Errorf("second load: progress %+v, want cached", e)
		}
	}

	held, release, err := s.Hold("app:1")
	if err != nil || held.ID != img.ID {
		t.Fatalf("Hold = %v, %v", held.ID, err)
	}
	rep, err := s.Prune(context.Background())
	if err != nil || len(rep.Images) != 0 {
		t.Fatalf("Prune of a held image: %+v, %v; want nothing removed", rep, err)
	}
	if _, err := s.Remove(context.Background(), img.ID); !errors.Is(err, ErrInUse) {
		t.Errorf("Remove of a held image = %v, want ErrInUse", err)
	}
	release()
	release() // a second call does nothing
	if rep, err := s.Prune(context.Background()); err != nil || len(rep.Images) != 1 {
		t.Fatalf("Prune after release: %+v, %v; want the image removed", rep, err)
	}
	if _, _, err := s.Hold("app:1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Hold of a removed image = %v, want ErrNotFound", err)
	}
	assertClean(t, s)
}
