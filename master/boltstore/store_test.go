package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/boltstore"
	"github.com/brimnode/brim/master/server"
)

// newStoreFile makes a store at dir/master.db holding a weight, closed.
func newStoreFile(t *testing.T, dir string, weight float64) string {
	t.Helper()
	path := filepath.Join(dir, "master.db")
	st, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutWeights(map[string]float64{"ads": weight}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func weightOf(t *testing.T, path string) float64 {
	t.Helper()
	st, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	return p.Weights["ads"]
}

// TestStoreRefusesEmptyFile: a 0-byte master.db is refused with an error
// naming the file and the recovery commands (bbolt alone starts it afresh,
// silently losing weights and quota), and left as it was; Fresh moves it
// aside and starts empty.
func TestStoreRefusesEmptyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "master.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := boltstore.Open(path)
	if !errors.Is(err, boltstore.ErrCorruptStore) {
		t.Fatalf("open empty file: %v, want ErrCorruptStore", err)
	}
	for _, want := range []string{path, "empty", "brim master restore", "--fresh"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Fatalf("the refused file changed: %v %v", fi, err)
	}
	st, err := boltstore.OpenWith(path, boltstore.Options{Fresh: true})
	if err != nil {
		t.Fatalf("fresh: %v", err)
	}
	defer st.Close()
	if aside := st.MovedAside(); aside == "" {
		t.Fatal("fresh did not move the empty file aside")
	} else if _, err := os.Stat(aside); err != nil {
		t.Fatal(err)
	}
}

// TestStoreDamagedPages: garbage in bbolt's pages (meta, freelist, the
// root and bucket leaves) is an error wrapping ErrCorruptStore naming the
// file — before, bbolt panicked (`invalid freelist page`, `Page expected
// to be …`) and took the master down with a stack trace.
func TestStoreDamagedPages(t *testing.T) {
	ps := os.Getpagesize() // bbolt's default page size
	for _, tc := range []struct {
		name  string
		pages []int
	}{
		{"both meta pages", []int{0, 1}},
		{"freelist", []int{2}},
		{"page 3", []int{3}},
		{"pages 2-5", []int{2, 3, 4, 5}},
		{"every data page", []int{2, 3, 4, 5, 6, 7, 8, 9}},
	} {
		for _, pattern := range []byte{0xff, 0x02, 0x10} {
			t.Run(tc.name, func(t *testing.T) {
				path := newStoreFile(t, t.TempDir(), 2)
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				for _, pg := range tc.pages {
					for i := pg * ps; i < (pg+1)*ps && i < len(data); i++ {
						data[i] = pattern ^ byte(i)
					}
				}
				if err := os.WriteFile(path, data, 0o600); err != nil {
					t.Fatal(err)
				}
				var st *boltstore.Store
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("open panicked: %v", r)
						}
					}()
					st, err = boltstore.Open(path)
				}()
				if err == nil {
					// Some garbage leaves the data readable: then it must
					// load without a panic and hold the weight.
					defer st.Close()
					p, lerr := st.Load()
					if lerr != nil && !errors.Is(lerr, boltstore.ErrCorruptStore) {
						t.Fatalf("load: %v", lerr)
					}
					if lerr == nil && p.Weights["ads"] != 2 {
						t.Fatalf("damaged store opened, weights %v", p.Weights)
					}
					return
				}
				if !errors.Is(err, boltstore.ErrCorruptStore) || !strings.Contains(err.Error(), path) {
					t.Fatalf("open: %v, want ErrCorruptStore naming %s", err, path)
				}
			})
		}
	}
}

// TestStoreTruncatedFile: a store file cut short (a kill -9 during a
// write on a file system that lost the tail, or a copy cut off) is an
// error wrapping ErrCorruptStore that names the file, says it was cut
// short and how to restore it — at every length, Restore from it too.
// Before, bbolt mapped the file past its end and read the freelist
// there: `fatal error: fault [signal SIGBUS]`, no recover possible.
func TestStoreTruncatedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "master.db")
	st, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// Transactions until the file has grown to 32 KiB, the freelist past
	// its first half (each write moves it).
	for i := 0; ; i++ {
		if err := st.PutWeights(map[string]float64{fmt.Sprintf("r%d", i): 1, fmt.Sprintf("s%d", i): 2}); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path); err != nil {
			t.Fatal(err)
		} else if fi.Size() >= 32<<10 && i >= 5 {
			break
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{len(whole) / 2, 3 * 4096, 2*4096 + 100, 5000} {
		t.Run(fmt.Sprintf("%d of %d bytes", size, len(whole)), func(t *testing.T) {
			dir := t.TempDir()
			cut := filepath.Join(dir, "master.db")
			if err := os.WriteFile(cut, whole[:size], 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := boltstore.Open(cut)
			if !errors.Is(err, boltstore.ErrCorruptStore) {
				t.Fatalf("open a file cut to %d bytes: %v, want ErrCorruptStore", size, err)
			}
			for _, want := range []string{cut, "cut short", "brim master restore", "--fresh"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if err := boltstore.Restore(cut, t.TempDir()); !errors.Is(err, boltstore.ErrCorruptStore) {
				t.Errorf("restore from a file cut to %d bytes: %v, want ErrCorruptStore", size, err)
			}
		})
	}
}

// TestBackupRestore: a backup restores the store as it was; Restore
// refuses while a master holds the store, and refuses a damaged backup.
func TestBackupRestore(t *testing.T) {
	dir := t.TempDir()
	path := newStoreFile(t, dir, 2)
	st, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "b.db")
	if err := st.Backup(backup); err != nil {
		t.Fatal(err)
	}
	if err := st.PutWeights(map[string]float64{"ads": 5}); err != nil {
		t.Fatal(err)
	}
	if err := boltstore.Restore(backup, dir); !errors.Is(err, boltstore.ErrStoreBusy) {
		t.Fatalf("restore under a running store: %v, want ErrStoreBusy", err)
	}
	st.Close()
	if w := weightOf(t, path); w != 5 {
		t.Fatalf("weight %v before restore", w)
	}
	garbage := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("x", 8192)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := boltstore.Restore(garbage, dir); !errors.Is(err, boltstore.ErrCorruptStore) {
		t.Fatalf("restore from garbage: %v, want ErrCorruptStore", err)
	}
	if err := boltstore.Restore(backup, dir); err != nil {
		t.Fatal(err)
	}
	if w := weightOf(t, path); w != 2 {
		t.Fatalf("weight %v after restore, want the backup's 2", w)
	}
	old, _ := filepath.Glob(path + ".before-restore-*")
	if len(old) != 1 {
		t.Fatalf("the replaced store was not kept: %v", old)
	}
}

// TestStartBacksUp: Start with a backup interval writes a backup at once.
func TestStartBacksUp(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	ctx, cancel := context.WithCancel(context.Background())
	r, err := server.Start(ctx, server.Config{Listen: "127.0.0.1:0", StateDir: state, BackupInterval: 1 << 40, BackupKeep: 2})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	names, err := boltstore.Backups(filepath.Join(state, boltstore.BackupDir))
	if err != nil || len(names) != 1 {
		t.Fatalf("backups %v %v", names, err)
	}
	if err := boltstore.Restore(names[0], state); err != nil {
		t.Fatal(err)
	}
}

// openTemp opens a store in a new file of the test's.
func openTemp(t *testing.T) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "master.db"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreReadsAgentsWithoutPrincipal(t *testing.T) {
	s := openTemp(t)
	defer s.Close()
	if err := s.PutAgent("a", master.PersistedAgent{Hostname: "h1", Principal: "agent1"}); err != nil {
		t.Fatal(err)
	}
	if err := boltstore.PutLegacyAgent(s, "b", "h2"); err != nil {
		t.Fatal(err)
	}
	p, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if a := p.Agents["a"]; a != (master.PersistedAgent{Hostname: "h1", Principal: "agent1"}) {
		t.Fatalf("agent a: %+v", a)
	}
	if b := p.Agents["b"]; b != (master.PersistedAgent{Hostname: "h2"}) {
		t.Fatalf("agent b (old format): %+v", b)
	}
}

func TestStoreReadsFrameworksWithoutPrincipal(t *testing.T) {
	s := openTemp(t)
	defer s.Close()
	if err := s.PutFramework("a", master.PersistedFramework{Roles: []string{"ads"}, Principal: "ops"}); err != nil {
		t.Fatal(err)
	}
	if err := boltstore.PutLegacyFramework(s, "b", []string{"web"}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if a := p.Frameworks["a"]; a.Principal != "ops" || len(a.Roles) != 1 || a.Roles[0] != "ads" {
		t.Fatalf("framework a: %+v", a)
	}
	if b := p.Frameworks["b"]; b.Principal != "" || len(b.Roles) != 1 || b.Roles[0] != "web" {
		t.Fatalf("framework b (old format): %+v", b)
	}
}
