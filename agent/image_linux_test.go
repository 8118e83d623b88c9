package agent

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/brimnode/brim/image"
	"github.com/brimnode/brim/internal/hostuser"
	"github.com/brimnode/brim/internal/testregistry"
	"github.com/brimnode/brim/internal/testutil"
)

// imageAgent is an agent over a fake runtime with an image store holding
// app:1 (entrypoint, cmd, env, working dir, user "app" of its own
// passwd: 4321:4322) and rooty:1 (user root) and bare:1 (no user, no
// passwd).
func imageAgent(t *testing.T, res Resources, upperMiB int64) (*Agent, *fakeRuntime, *image.Store) {
	t.Helper()
	testutil.RequireRoot(t)
	s, err := image.Open(image.Options{Root: filepath.Join(t.TempDir(), "images")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	users := testregistry.Layer(t, testregistry.TarEntries(t, testregistry.Entry{Name: "etc/"},
		testregistry.Entry{Name: "etc/passwd", Body: []byte("root:x:0:0::/root:/bin/sh\napp:x:4321:4322::/srv:/bin/sh\n")},
		testregistry.Entry{Name: "etc/group", Body: []byte("root:x:0:\napp:x:4322:\n")}))
	bare := testregistry.Layer(t, testregistry.TarEntries(t, testregistry.Entry{Name: "bin/"}, testregistry.Entry{Name: "bin/app", Body: []byte("x"), Mode: 0o755}))
	for name, cfg := range map[string]v1.Config{
		"app:1": {Entrypoint: []string{"/bin/app"}, Cmd: []string{"--serve"}, Env: []string{"PATH=/bin", "A=1"},
			WorkingDir: "/srv", User: "app", ExposedPorts: map[string]struct{}{"8080/tcp": {}}},
		"rooty:1": {Cmd: []string{"/bin/app"}, User: "root"},
	} {
		src := testregistry.WriteLayout(t, testregistry.Image(t, "linux/amd64", cfg, users, bare))
		if _, err := s.Pull(context.Background(), src, image.PullOptions{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	src := testregistry.WriteLayout(t, testregistry.Image(t, "linux/amd64", v1.Config{Cmd: []string{"/bin/app"}}, bare))
	if _, err := s.Pull(context.Background(), src, image.PullOptions{Name: "bare:1"}); err != nil {
		t.Fatal(err)
	}
	rt := newFakeRuntime(t.TempDir())
	a, err := New(Options{StateDir: t.TempDir(), Runtime: rt, Resources: res, Images: s, UpperLimitMiB: upperMiB})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, rt, s
}

// The image's entrypoint, cmd, env, working dir and user are the
// defaults, by Docker's rules; the user is resolved in the image's
// passwd, never the host's.
func TestLaunchFromImageDefaults(t *testing.T) {
	a, rt, s := imageAgent(t, Resources{MilliCPUs: 2000, MemMiB: 1024}, 64)
	img, err := s.Get("app:1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec Spec
		cmd  []string
		env  []string
		cwd  string
		user string
	}{
		{Spec{}, []string{"/bin/app", "--serve"}, []string{"PATH=/bin", "A=1"}, "/srv", "4321:4322"},
		{Spec{Command: []string{"--check"}, Env: []string{"A=2", "B=3"}, Cwd: "/tmp", User: "0:0"},
			[]string{"/bin/app", "--check"}, []string{"PATH=/bin", "A=2", "B=3"}, "/tmp", ""},
		{Spec{User: "app:root", ReadWrite: true}, []string{"/bin/app", "--serve"}, []string{"PATH=/bin", "A=1"}, "/srv", "4321:0"},
	} {
		sp := tc.spec
		sp.Image, sp.Resources = "app:1", Resources{MilliCPUs: 100, MemMiB: 64}
		c, err := a.Launch(context.Background(), sp)
		if tc.user == "" {
			if !errors.Is(err, ErrRootNotAllowed) {
				t.Errorf("launch as the image's root on an agent without --allow-root-tasks: %v, want ErrRootNotAllowed", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("launch %+v: %v", tc.spec, err)
		}
		got := rt.containers[c.ID].spec
		if !slices.Equal(got.Command, tc.cmd) || !slices.Equal(got.Env, tc.env) || got.Cwd != tc.cwd || got.User != tc.user ||
			got.Image != img.ID || got.Rootfs != "" || got.ReadWrite != sp.ReadWrite {
			t.Errorf("launched %+v; want command %q env %q cwd %s user %s image %s", got, tc.cmd, tc.env, tc.cwd, tc.user, img.ID)
		}
		if c.Image != "app:1" || c.ImageID != img.ID || c.ImageDigest != img.Digest || !slices.Equal(c.ExposedPorts, []string{"8080/tcp"}) {
			t.Errorf("container record %+v lacks the image's identity", c)
		}
		want := int64(0)
		if sp.ReadWrite {
			want = 64 << 20 // the agent's limit of a read-write root that asks no disk
		}
		if got.Limits.DiskBytes != want {
			t.Errorf("disk limit %d, want %d", got.Limits.DiskBytes, want)
		}
	}
}

// Bad image launches fail naming the cause and leave nothing: no
// container, no checkpoint, no runtime launch, no hold on the image.
func TestLaunchFromImageRefused(t *testing.T) {
	a, rt, s := imageAgent(t, Resources{MilliCPUs: 2000, MemMiB: 1024, DiskMiB: 100}, 0)
	for _, tc := range []struct {
		spec Spec
		want error
		text string
	}{
		{Spec{Image: "missing:1", Pull: PullNever}, image.ErrNotFound, "pull policy is never"},
		{Spec{Image: "Bad/Upper:1"}, ErrInvalidArgument, "Bad/Upper"},
		{Spec{Image: "app:1", Pull: "sometimes"}, ErrInvalidArgument, "sometimes"},
		{Spec{Image: "app:1", Rootfs: "/"}, ErrInvalidArgument, "give one"},
		{Spec{Command: []string{"true"}, ReadWrite: true}, ErrInvalidArgument, "needs an image"},
		{Spec{Image: "rooty:1"}, ErrRootNotAllowed, "root"},
		{Spec{Image: "bare:1"}, hostuser.ErrUnknown, "image bare:1:/etc/passwd"}, // the default user, nobody, is not in it
		{Spec{Image: "app:1", Resources: Resources{DiskMiB: 200}}, ErrInsufficientResources, "disk"},
	} {
		sp := tc.spec
		sp.Resources.MilliCPUs, sp.Resources.MemMiB = 100, 64
		_, err := a.Launch(context.Background(), sp)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("launch %+v: %v; want %v naming %q", tc.spec, err, tc.want, tc.text)
		}
	}
	if len(a.List()) != 0 || len(rt.containers) != 0 {
		t.Errorf("left: containers %d, runtime launches %d", len(a.List()), len(rt.containers))
	}
	if rep, err := s.Prune(context.Background()); err != nil || len(rep.Images) != 3 {
		t.Errorf("prune after the failed launches: %+v, %v; want all 3 images free of holds", rep, err)
	}
	// Disk is accounted: two containers of 60 MiB do not fit in 100.
	a2, _, _ := imageAgent(t, Resources{MilliCPUs: 2000, MemMiB: 1024, DiskMiB: 100}, 0)
	sp := Spec{Image: "app:1", ReadWrite: true, Resources: Resources{MilliCPUs: 100, MemMiB: 64, DiskMiB: 60}}
	if _, err := a2.Launch(context.Background(), sp); err != nil {
		t.Fatal(err)
	}
	if _, err := a2.Launch(context.Background(), sp); !errors.Is(err, ErrInsufficientResources) {
		t.Errorf("a second 60 MiB disk on 100: %v, want ErrInsufficientResources", err)
	}
	if free := a2.Info().Free.DiskMiB; free != 40 {
		t.Errorf("free disk %d MiB, want 40", free)
	}
}
