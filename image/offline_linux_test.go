package image

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/brimnode/brim/internal/testregistry"
	"github.com/brimnode/brim/internal/testutil"
)

// skopeo copies src to dst, as an operator loading an air-gapped host.
func skopeo(t *testing.T, src, dst string) {
	t.Helper()
	_, err := exec.LookPath("skopeo")
	testutil.Require(t, err == nil, "skopeo not installed (hack/deps.sh installs it)")
	out, err := exec.Command("skopeo", "copy", "--insecure-policy", "--src-tls-verify=false", src, dst).CombinedOutput()
	if err != nil {
		t.Fatalf("skopeo copy %s %s: %v\n%s", src, dst, err, out)
	}
}

// The offline transports load the image a registry serves, by the same
// layer digests, and name it as asked.
func TestPullOffline(t *testing.T) {
	testutil.RequireRoot(t)
	reg := testregistry.Start(t, testregistry.Options{})
	reg.Push(t, "app:1", threeLayers(t))
	dir := t.TempDir()
	skopeo(t, "docker://"+reg.Ref("app:1"), "oci:"+filepath.Join(dir, "layout")+":v1")
	skopeo(t, "docker://"+reg.Ref("app:1"), "oci-archive:"+filepath.Join(dir, "app.oci.tar"))
	skopeo(t, "docker://"+reg.Ref("app:1"), "docker-archive:"+filepath.Join(dir, "app.docker.tar")+":example.com/team/app:1")

	s := openStore(t, Options{Registries: insecure(reg.Host)})
	want, err := s.Pull(context.Background(), reg.Ref("app:1"), PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		src, name, ref string
	}{
		{"oci:" + filepath.Join(dir, "layout") + ":v1", "example.com/app:layout", "example.com/app:layout"},
		{"oci:" + filepath.Join(dir, "layout"), "", ""},
		{"oci-archive:" + filepath.Join(dir, "app.oci.tar"), "example.com/app:archive", "example.com/app:archive"},
		{"docker-archive:" + filepath.Join(dir, "app.docker.tar"), "", "example.com/team/app:1"},
	}
	for _, c := range cases {
		t.Run(c.src, func(t *testing.T) {
			s := openStore(t, Options{})
			img, err := s.Pull(context.Background(), c.src, PullOptions{Name: c.name})
			if err != nil {
				t.Fatal(err)
			}
			if len(img.Layers) != 3 {
				t.Fatalf("layers = %v", img.Layers)
			}
			for i, l := range img.Layers {
				if l.DiffID != want.Layers[i].DiffID {
					t.Errorf("layer %d diff ID %s, registry's %s", i, l.DiffID, want.Layers[i].DiffID)
				}
			}
			if !slices.Equal(img.Config.Entrypoint, want.Config.Entrypoint) {
				t.Errorf("entrypoint %v, want %v", img.Config.Entrypoint, want.Config.Entrypoint)
			}
			if c.ref != "" {
				if got, err := s.Get(c.ref); err != nil || got.ID != img.ID {
					t.Errorf("Get %s = %v, %v", c.ref, got.ID, err)
				}
			}
			assertClean(t, s)
		})
	}
	for _, bad := range []string{"oci:" + filepath.Join(dir, "none"), "oci:" + filepath.Join(dir, "layout") + ":v2",
		"oci-archive:" + filepath.Join(dir, "none.tar"), "docker-archive:" + filepath.Join(dir, "none.tar")} {
		if _, err := s.Pull(context.Background(), bad, PullOptions{}); !errors.Is(err, ErrNotFound) {
			t.Errorf("pull %s = %v, want ErrNotFound", bad, err)
		}
	}
	assertClean(t, s)
}

// An OCI archive is unpacked into the store's tmp/ before it is read: a
// hostile one is refused there like a hostile layer.
func TestPullHostileOCIArchive(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	cases := map[string][]entry{
		"dotdot":  {file("../escaped", "x")},
		"symlink": {symlink("blobs", "/etc")},
	}
	s := openStore(t, Options{})
	for name, entries := range cases {
		archive := filepath.Join(dir, name+".tar")
		if err := os.WriteFile(archive, tarOf(t, entries...), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := s.Pull(context.Background(), "oci-archive:"+archive, PullOptions{})
		if !errors.Is(err, ErrUnsafeLayer) {
			t.Errorf("%s: pull = %v, want ErrUnsafeLayer", name, err)
		}
		assertClean(t, s)
	}
	if _, err := os.Stat(filepath.Join(s.root, "escaped")); err == nil {
		t.Error("an archive entry escaped")
	}
}
