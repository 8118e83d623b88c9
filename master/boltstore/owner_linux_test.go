package boltstore_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/master/boltstore"
)

// TestRestoreAsRootKeepsOwner: root restoring into the state dir of a
// master that runs as another user (the package's brim) leaves the store
// and the kept old one that user's, so the master can open them.
func TestRestoreAsRootKeepsOwner(t *testing.T) {
	testutil.RequireRoot(t)
	const uid, gid = 65534, 65534 // nobody, as a master's own user
	dir := filepath.Join(t.TempDir(), "master")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := newStoreFile(t, dir, 2)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "b.db")
	st, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Backup(backup); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := boltstore.Restore(backup, dir); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(path + ".before-restore-*")
	for _, f := range append(old, path) {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if s := fi.Sys().(*syscall.Stat_t); s.Uid != uid || s.Gid != gid || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: owner %d:%d mode %v, want %d:%d 0600", f, s.Uid, s.Gid, fi.Mode().Perm(), uid, gid)
		}
	}
}
