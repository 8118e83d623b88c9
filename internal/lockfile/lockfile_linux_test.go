package lockfile

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
)

func TestFileAndDir(t *testing.T) {
	dir := t.TempDir()
	for name, take := range map[string]func() (*Lock, error){
		"file": func() (*Lock, error) { return File(filepath.Join(dir, "lock")) },
		"dir":  func() (*Lock, error) { return Dir(dir) },
	} {
		t.Run(name, func(t *testing.T) {
			l, err := take()
			if err != nil {
				t.Fatal(err)
			}
			_, err = take()
			if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("second lock: %v, want ErrLocked naming %s", err, dir)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2, err := take()
			if err != nil {
				t.Fatalf("after release: %v", err)
			}
			l2.Close()
		})
	}
}

// The lock is not inherited by children the holder starts (O_CLOEXEC): a
// shim outliving a restarted agent must not keep the agent's lock.
func TestNotInherited(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	l, err := File(p)
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sleep", "30")
	err = child.Start()
	testutil.Require(t, err == nil, fmt.Sprintf("no sleep binary: %v", err))
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	l.Close()
	l2, err := File(p)
	if err != nil {
		t.Fatalf("lock held by a child after the holder closed it: %v", err)
	}
	l2.Close()
}

func TestMissing(t *testing.T) {
	_, err := Dir(filepath.Join(t.TempDir(), "none"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
}

// TestHolder: a lock held by another process names that process's PID,
// in the error of a second locker and through Holder; a free lock has no
// holder.
func TestHolder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	if pid := Holder(p); pid != 0 {
		t.Errorf("holder of a missing file: %d", pid)
	}
	l, err := File(p)
	if err != nil {
		t.Fatal(err)
	}
	if pid := Holder(p); pid != os.Getpid() {
		t.Errorf("holder = %d, want this process %d", pid, os.Getpid())
	}
	_, err = File(p)
	if want := fmt.Sprintf("held by pid %d", os.Getpid()); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), want) {
		t.Errorf("second lock: %v, want ErrLocked saying %q", err, want)
	}
	l.Close()
	if pid := Holder(p); pid != 0 {
		t.Errorf("holder after release: %d", pid)
	}
}
