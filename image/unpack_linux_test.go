package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/internal/testutil"
)

func unpackTar(t *testing.T, data []byte) (string, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fs")
	_, err := unpack(context.Background(), dir, bytes.NewReader(data))
	return dir, err
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestUnpackTranslatesWhiteouts(t *testing.T) {
	testutil.RequireRoot(t) // mknod of whiteouts, trusted.* xattrs
	dir, err := unpackTar(t, tarOf(t,
		dir("etc/"),
		file("etc/.wh.passwd", ""),
		dir("var/cache/"),
		file("var/cache/.wh..wh..opq", ""),
		file("var/cache/new", "n"),
		file(".wh..wh.plnk", ""),
	))
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(dir, "etc/passwd"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("etc/passwd: mode %o rdev %d, want a 0/0 character device", st.Mode, st.Rdev)
	}
	buf := make([]byte, 8)
	n, err := unix.Getxattr(filepath.Join(dir, "var/cache"), overlayOpaque, buf)
	if err != nil || string(buf[:n]) != "y" {
		t.Errorf("var/cache opaque xattr = %q, %v; want y", buf[:n], err)
	}
	if got := readFile(t, filepath.Join(dir, "var/cache/new")); got != "n" {
		t.Errorf("var/cache/new = %q", got)
	}
	for _, p := range []string{"etc/.wh.passwd", "var/cache/.wh..wh..opq", ".wh..wh.plnk"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left in the layer: %v", p, err)
		}
	}
}

func TestUnpackKeepsMetadata(t *testing.T) {
	testutil.RequireRoot(t)
	suid := file("bin/su", "su")
	suid.mode = 0o4755
	owned := file("home/u/f", "f")
	owned.uid, owned.gid = 1000, 1001
	capped := file("bin/ping", "ping")
	capped.xattrs = map[string]string{"user.note": "x"}
	dir, err := unpackTar(t, tarOf(t, dir("bin/"), suid, owned, capped,
		hardlink("bin/su2", "bin/su"), symlink("lib", "/usr/lib"), symlink("rel", "../../x")))
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(filepath.Join(dir, "bin/su"))
	if err != nil || st.Mode()&os.ModeSetuid == 0 {
		t.Errorf("bin/su: %v, %v; want setuid kept", st.Mode(), err)
	}
	if !st.ModTime().Equal(testTime) {
		t.Errorf("bin/su mtime = %v, want %v", st.ModTime(), testTime)
	}
	var ust unix.Stat_t
	if err := unix.Lstat(filepath.Join(dir, "home/u/f"), &ust); err != nil || ust.Uid != 1000 || ust.Gid != 1001 {
		t.Errorf("home/u/f owner %d:%d, %v; want 1000:1001", ust.Uid, ust.Gid, err)
	}
	var a, b unix.Stat_t
	_ = unix.Lstat(filepath.Join(dir, "bin/su"), &a)
	_ = unix.Lstat(filepath.Join(dir, "bin/su2"), &b)
	if a.Ino != b.Ino {
		t.Errorf("bin/su2 is not a hard link of bin/su")
	}
	if l, err := os.Readlink(filepath.Join(dir, "lib")); err != nil || l != "/usr/lib" {
		t.Errorf("lib -> %q, %v; want /usr/lib (kept as written: resolved in the container)", l, err)
	}
	buf := make([]byte, 8)
	if n, err := unix.Getxattr(filepath.Join(dir, "bin/ping"), "user.note", buf); err != nil || string(buf[:n]) != "x" {
		t.Errorf("user.note = %q, %v", buf[:n], err)
	}
	dst, err := os.Stat(filepath.Join(dir, "bin"))
	if err != nil || !dst.ModTime().Equal(testTime) {
		t.Errorf("bin mtime = %v, %v; want %v (set after its entries)", dst.ModTime(), err, testTime)
	}
}

// A hostile layer never writes outside its directory: each attack
// fails with ErrUnsafeLayer, and the bait outside stays as it was.
func TestUnpackRefusesEscapes(t *testing.T) {
	testutil.RequireRoot(t)
	dev := entry{name: "dev/sda", typ: tar.TypeChar, mode: 0o600}
	cases := map[string][]entry{
		"dotdot":               {file("../outside", "x")},
		"dotdot inside":        {file("a/../../outside", "x")},
		"absolute symlink dir": {symlink("etc", "/OUT"), file("etc/passwd", "x")},
		"relative symlink dir": {symlink("up", "../.."), file("up/outside", "x")},
		"symlink swap":         {dir("a/"), file("a/x", "1"), symlink("a", "/OUT"), file("a/y", "x")},
		"hardlink outside":     {hardlink("h", "../outside")},
		"hardlink via symlink": {symlink("s", "/OUT"), hardlink("h", "s/bait")},
		"device node":          {dev},
		"overlay xattr": {{name: "d/", typ: tar.TypeDir, mode: 0o755,
			xattrs: map[string]string{"trusted.overlay.redirect": "/etc"}}},
		"whiteout of dotdot": {file("a/.wh...", "")},
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			out := filepath.Join(base, "OUT")
			if err := os.Mkdir(out, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(out, "bait"), []byte("bait"), 0o644); err != nil {
				t.Fatal(err)
			}
			layer := filepath.Join(base, "tmp", "layer")
			if err := os.MkdirAll(filepath.Dir(layer), 0o755); err != nil {
				t.Fatal(err)
			}
			// Rewrite "/OUT" to the bait directory's absolute path, so an
			// extractor that followed the symlink would write there.
			for i := range entries {
				if entries[i].link == "/OUT" {
					entries[i].link = out
				}
			}
			_, err := unpack(context.Background(), layer, bytes.NewReader(tarOf(t, entries...)))
			if !errors.Is(err, ErrUnsafeLayer) {
				t.Errorf("unpack = %v, want ErrUnsafeLayer", err)
			}
			ents, _ := os.ReadDir(out)
			if len(ents) != 1 || readFile(t, filepath.Join(out, "bait")) != "bait" {
				t.Errorf("outside changed: %v", ents)
			}
			for _, p := range []string{filepath.Join(base, "outside"), filepath.Join(base, "tmp", "outside")} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s written", p)
				}
			}
		})
	}
}
