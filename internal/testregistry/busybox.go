package testregistry

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/brimnode/brim/internal/testutil"
)

// BusyboxApplets are the commands of the busybox image, symlinks in /bin.
var BusyboxApplets = []string{"sh", "cat", "echo", "id", "ls", "sleep", "touch", "true", "false",
	"stat", "grep", "dd", "mkdir", "rm", "env", "pwd", "head", "wc", "chmod", "mount", "umount", "su"}

// Entry is one tar entry of a layer made by TarEntries.
type Entry struct {
	Name     string // a directory's name ends in "/"
	Body     []byte
	Link     string // a symlink's target
	Mode     int64  // permission and setuid/setgid bits; 0: 0644 (0755 for a directory)
	UID, GID int
}

// TarEntries writes entries, in order, as a tar dated 2024-05-01.
func TarEntries(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Mode: e.Mode, ModTime: mt, Uid: e.UID, Gid: e.GID, Typeflag: tar.TypeReg, Size: int64(len(e.Body))}
		switch {
		case e.Name[len(e.Name)-1] == '/':
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
			if hdr.Mode == 0 {
				hdr.Mode = 0o755
			}
		case e.Link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode, hdr.Size = tar.TypeSymlink, e.Link, 0o777, 0
		case hdr.Mode == 0:
			hdr.Mode = 0o644
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// BusyboxLayer is a layer with the host's static busybox as /bin/busybox,
// its applets (BusyboxApplets), and a user database: root (0), app
// (1000:1000) and nobody (65534), groups root, app, staff (50) and
// nogroup. It fails t (skips outside CI) without busybox-static.
func BusyboxLayer(t testing.TB) v1.Layer {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	testutil.Require(t, err == nil, "busybox-static not installed (hack/deps.sh)")
	entries := []Entry{
		{Name: "bin/"}, {Name: "bin/busybox", Body: bb, Mode: 0o755},
		{Name: "etc/"},
		{Name: "etc/passwd", Body: []byte("root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{Name: "etc/group", Body: []byte("root:x:0:\napp:x:1000:\nstaff:x:50:app\nnogroup:x:65534:\n")},
		{Name: "home/"}, {Name: "home/app/", UID: 1000, GID: 1000},
		{Name: "tmp/", Mode: 0o1777}, {Name: "root/", Mode: 0o700},
	}
	for _, a := range BusyboxApplets {
		entries = append(entries, Entry{Name: "bin/" + a, Link: "busybox"})
	}
	return Layer(t, TarEntries(t, entries...))
}

// BusyboxImage is a linux/amd64 image of BusyboxLayer under the given
// upper layers, with cfg (its Env gets a PATH when it has none).
func BusyboxImage(t testing.TB, cfg v1.Config, upper ...v1.Layer) v1.Image {
	t.Helper()
	hasPath := false
	for _, e := range cfg.Env {
		hasPath = hasPath || len(e) > 5 && e[:5] == "PATH="
	}
	if !hasPath {
		cfg.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, cfg.Env...)
	}
	return Image(t, "linux/amd64", cfg, append([]v1.Layer{BusyboxLayer(t)}, upper...)...)
}

// WriteLayout writes img to a new OCI image layout and returns its
// source string for image.Store.Pull ("oci:DIR").
func WriteLayout(t testing.TB, img v1.Image) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	return "oci:" + dir
}
