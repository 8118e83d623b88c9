package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	for name, write := range map[string]func(string, []byte, os.FileMode) error{
		"durable": WriteFile,
		"nosync":  WriteFileNoSync,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "state.json")
			if err := write(p, []byte("one"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := write(p, []byte("two"), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(p)
			if err != nil || !bytes.Equal(got, []byte("two")) {
				t.Fatalf("content = %q, %v; want two", got, err)
			}
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o644 {
				t.Errorf("mode = %v, want 0644", st.Mode().Perm())
			}
			assertOnly(t, dir, "state.json")
		})
	}
}

// A failed write leaves the target as it was and no temporary file.
func TestWriteFileFailureLeavesTarget(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	if err := WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Renaming a file over a non-empty directory fails after the
	// temporary file was written: the cleanup path runs.
	target := filepath.Join(dir, "sub")
	if err := os.MkdirAll(filepath.Join(target, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(target, []byte("new"), 0o600)
	if err == nil {
		t.Fatal("write over a non-empty directory succeeded")
	}
	if !bytes.Contains([]byte(err.Error()), []byte(target)) {
		t.Errorf("error %q does not name %s", err, target)
	}
	got, _ := os.ReadFile(p)
	if string(got) != "old" {
		t.Errorf("untouched file changed: %q", got)
	}
	assertOnly(t, dir, "state.json", "sub")
}

func TestWriteFileMissingDir(t *testing.T) {
	err := WriteFile(filepath.Join(t.TempDir(), "no", "such"), nil, 0o600)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for _, e := range ents {
		if !want[e.Name()] {
			t.Errorf("left behind: %s", e.Name())
		}
	}
	if len(ents) != len(names) {
		t.Errorf("dir holds %d entries, want %d", len(ents), len(names))
	}
}

// WriteFunc streams the content; a fill that fails changes nothing and
// leaves no temporary file.
func TestWriteFunc(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "store.db")
	if err := WriteFunc(p, 0o600, func(w io.Writer) error { _, err := io.WriteString(w, "copy"); return err }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("read transaction failed")
	err := WriteFunc(p, 0o600, func(w io.Writer) error { _, _ = io.WriteString(w, "half"); return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the fill's error", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "copy" {
		t.Errorf("content after a failed fill: %q", got)
	}
	assertOnly(t, dir, "store.db")
}
