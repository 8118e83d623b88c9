package containerizer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// identity returns p's inode number and birth time (zero where the file
// system keeps none).
func identity(t *testing.T, p string) (uint64, time.Time) {
	t.Helper()
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_BTIME, &st); err != nil {
		t.Fatal(err)
	}
	var born time.Time
	if st.Mask&unix.STATX_BTIME != 0 {
		born = time.Unix(st.Btime.Sec, int64(st.Btime.Nsec))
	}
	return st.Ino, born
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestDataSpares: a data directory given back is emptied — the sandbox
// and anything else removed, the log directory kept empty — and taken
// again by a rename, root's and 0700; a log directory that is not what
// the shim makes is removed, not kept; an existing directory is not
// replaced by a spare (os.ErrExist); past maxDataSpares, and after a new
// containerizer starts (its spares removed), directories are made anew.
func TestDataSpares(t *testing.T) {
	testutil.RequireRoot(t)
	root := filepath.Join(t.TempDir(), "containers")
	if err := os.Mkdir(root, 0o711); err != nil {
		t.Fatal(err)
	}
	s, err := newDataSpares(root)
	if err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(root, "a")
	if err := s.take(a); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{executor.SandboxDir + "/deep/er", executor.LogDir} {
		if err := os.MkdirAll(filepath.Join(a, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{executor.LogDir + "/0.log", executor.SandboxDir + "/deep/er/f", "stray"} {
		if err := os.WriteFile(filepath.Join(a, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// What a user namespace's launch makes of it.
	if err := os.Chown(a, 0, 4242); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(a, 0o710); err != nil {
		t.Fatal(err)
	}
	ino, logIno := inode(t, a), inode(t, filepath.Join(a, executor.LogDir))
	if err := s.give(a); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(a); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("given back, %s is still there: %v", a, err)
	}
	b := filepath.Join(root, "b")
	if err := s.take(b); err != nil {
		t.Fatal(err)
	}
	if got := inode(t, b); got != ino {
		t.Errorf("b is inode %d, want the spare's %d (a rename, no new inode)", got, ino)
	}
	if names := testutil.DirNames(t, b); !slices.Equal(names, []string{executor.LogDir}) {
		t.Errorf("a spare holds %v, want an empty log directory only", names)
	}
	if got := inode(t, filepath.Join(b, executor.LogDir)); got != logIno {
		t.Errorf("log dir is inode %d, want the kept %d", got, logIno)
	}
	if names := testutil.DirNames(t, filepath.Join(b, executor.LogDir)); len(names) != 0 {
		t.Errorf("a spare's log directory holds %v", names)
	}
	fi, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o700 || st.Uid != 0 || st.Gid != 0 {
		t.Errorf("a spare is mode %v, %d:%d; want 0700, root's", fi.Mode().Perm(), st.Uid, st.Gid)
	}

	// A log directory the shim did not make this way goes.
	if err := os.Chown(filepath.Join(b, executor.LogDir), 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if err := s.give(b); err != nil {
		t.Fatal(err)
	}
	c := filepath.Join(root, "c")
	if err := s.take(c); err != nil {
		t.Fatal(err)
	}
	if names := testutil.DirNames(t, c); len(names) != 0 {
		t.Errorf("a log directory of uid 1000 was kept: %v", names)
	}

	// An existing directory is not replaced; the spare stays.
	if err := s.give(c); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(root, "d")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.take(d); !errors.Is(err, os.ErrExist) {
		t.Errorf("take onto an existing directory: %v, want os.ErrExist", err)
	}
	if err := s.take(filepath.Join(root, "e")); err != nil || inode(t, filepath.Join(root, "e")) != ino {
		t.Errorf("the spare after a refused take: %v", err)
	}

	// At most maxDataSpares are kept.
	var dirs []string
	for i := range maxDataSpares + 3 {
		p := filepath.Join(root, "m", string(rune('a'+i%26))+string(rune('a'+i/26)))
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, p)
	}
	for _, p := range dirs {
		if err := s.give(p); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(testutil.DirNames(t, root+spareSuffix)); n != maxDataSpares {
		t.Errorf("%d spares kept, want %d", n, maxDataSpares)
	}

	// A new containerizer's spares start empty.
	if _, err := newDataSpares(root); err != nil {
		t.Fatal(err)
	}
	if n := len(testutil.DirNames(t, root+spareSuffix)); n != 0 {
		t.Errorf("%d spares of a previous run kept", n)
	}
	if err := s.take(filepath.Join(root, "f")); err != nil {
		t.Errorf("take after the spares went: %v, want a new directory", err)
	}
}

// TestRunDirRecyclesDataDirs: with a RunDir, a container's data
// directory (and its log directory) is the one an ended container gave
// back, emptied: the new task sees an empty sandbox of its own and its
// own output only.
func TestRunDirRecyclesDataDirs(t *testing.T) {
	run := t.TempDir()
	e := newEnvWith(t, &env{runDir: run, shim: smallShimBinary})
	first := e.launch(Spec{Command: []string{"/bin/sh", "-c", "echo first; echo secret > /mnt/sandbox/f"}, Limits: isolator.Limits{MilliCPUs: 100}})
	e.wait(first.ID)
	// The data directory's identity: its inode and birth time (an inode
	// number alone could be a new directory's after the old one's
	// removal; a new directory is born later).
	data := filepath.Join(e.stateDir, "containers", first.ID)
	ino, born := identity(t, data)
	if err := e.c.Destroy(context.Background(), first.ID); err != nil {
		t.Fatal(err)
	}
	e.assertGone(first.ID, first.ShimPid)

	second := e.launch(Spec{Command: []string{"/bin/sh", "-c", "ls -A /mnt/sandbox; echo second"}, Limits: isolator.Limits{MilliCPUs: 100}})
	if st := e.wait(second.ID); st.Code != 0 {
		t.Fatalf("exit status %+v", st)
	}
	if gotIno, gotBorn := identity(t, filepath.Join(e.stateDir, "containers", second.ID)); gotIno != ino || gotBorn != born {
		t.Errorf("the second data dir is inode %d born %v, want the first's (%d, %v), given back", gotIno, gotBorn, ino, born)
	}
	// The sandbox is new and empty; the log has the second task's only.
	if got := readSandbox(t, second, "stdout"); got != "second\n" {
		t.Errorf("the second task's stdout: %q, want its own output in an empty sandbox", got)
	}
	if err := e.c.Destroy(context.Background(), second.ID); err != nil {
		t.Fatal(err)
	}
}
