package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
)

// inodes maps every file name in the records' directory and its work
// directory to its inode number.
func inodes(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, d := range []string{dir, WorkDir(dir)} {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Join(filepath.Base(d), e.Name())] = fi.Sys().(*syscall.Stat_t).Ino
		}
	}
	return out
}

// TestDirRewritesWithoutNewFiles (issue 35): after a record's first two
// writes, rewriting it makes no file (the same two inodes hold the record
// and its alternate), its content is always the last write's, the
// records' directory holds the records only, and a removed record's
// files are the next records' (no new inode while spares last).
func TestDirRewritesWithoutNewFiles(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(fmt.Sprint("sync=", sync), func(t *testing.T) {
			path := t.TempDir()
			d, err := NewDir(path, 4)
			if err != nil {
				t.Fatal(err)
			}
			write := func(name, content string) {
				t.Helper()
				if err := d.WriteFile(name, []byte(content), 0o600, sync); err != nil {
					t.Fatal(err)
				}
				if got, err := os.ReadFile(filepath.Join(path, name)); err != nil || string(got) != content {
					t.Fatalf("%s = %q, %v; want %q", name, got, err, content)
				}
			}
			write("a.json", "one")
			write("a.json", "two")
			if got := testutil.DirNames(t, path); !slices.Equal(got, []string{"a.json"}) {
				t.Errorf("the records' directory holds %v", got)
			}
			before := inodes(t, path)
			for i := range 10 {
				write("a.json", fmt.Sprint("content ", i))
			}
			write("a.json", "x") // shorter: nothing of the old content stays
			write("a.json", "y")
			after := inodes(t, path)
			if len(after) != 2 || !sameInodes(before, after) {
				t.Errorf("rewrites made files: before %v, after %v", before, after)
			}
			if fi, err := os.Stat(filepath.Join(path, "a.json")); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("mode: %v, %v", fi, err)
			}
			if err := d.Remove("a.json", sync); err != nil {
				t.Fatal(err)
			}
			if got := testutil.DirNames(t, path); len(got) != 0 {
				t.Errorf("records after Remove: %v", got)
			}
			write("b.json", "b1")
			write("b.json", "b2")
			if got := inodes(t, path); !sameInodes(before, got) || len(got) != 2 {
				t.Errorf("a new record did not take the spares: before %v, now %v", before, got)
			}
			if got := testutil.DirNames(t, path); !slices.Equal(got, []string{"b.json"}) {
				t.Errorf("records: %v", got)
			}
			if err := d.Remove("missing.json", sync); err != nil {
				t.Errorf("remove of a missing record: %v", err)
			}
		})
	}
}

func sameInodes(a, b map[string]uint64) bool {
	var x, y []uint64
	for _, i := range a {
		x = append(x, i)
	}
	for _, i := range b {
		y = append(y, i)
	}
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// TestDirSpares: at most maxSpare files are kept; a new Dir adopts them
// (and numbers new ones after them); a spare removed behind the Dir's
// back is skipped; names that are not plain record names are refused.
func TestDirSpares(t *testing.T) {
	path := t.TempDir()
	d, err := NewDir(path, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		name := fmt.Sprintf("r%d", i)
		for range 2 {
			if err := d.WriteFile(name, []byte(name), 0o600, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 4 {
		if err := d.Remove(fmt.Sprintf("r%d", i), false); err != nil {
			t.Fatal(err)
		}
	}
	if got := inodes(t, path); len(got) != 3 {
		t.Fatalf("files after removing every record: %v, want 3 spares", got)
	}
	if got := testutil.DirNames(t, path); len(got) != 0 {
		t.Fatalf("records after removing every record: %v", got)
	}
	d2, err := NewDir(path, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(d2.spare) != 3 || d2.next < 3 {
		t.Errorf("adopted spares %v, next %d", d2.spare, d2.next)
	}
	if err := os.Remove(filepath.Join(WorkDir(path), d2.spare[len(d2.spare)-1])); err != nil {
		t.Fatal(err)
	}
	if err := d2.WriteFile("x", []byte("x"), 0o600, false); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(path, "x")); err != nil || string(got) != "x" {
		t.Errorf("x = %q, %v", got, err)
	}
	for _, bad := range []string{"", ".hidden", "a/b", "../x", "."} {
		if err := d2.WriteFile(bad, nil, 0o600, false); err == nil {
			t.Errorf("name %q accepted", bad)
		}
		if err := d2.Remove(bad, false); err == nil {
			t.Errorf("remove %q accepted", bad)
		}
	}
}
