package lockfile

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// lockHelperEnv makes the test binary the helper of
// TestLockLeftInAForkedChild: it locks the file the variable names,
// starts a child holding the lock's descriptor for BRIM_TEST_HOLD_MS
// and exits at once.
const lockHelperEnv = "BRIM_TEST_LOCK_HELPER"

func TestMain(m *testing.M) {
	if path := os.Getenv(lockHelperEnv); path != "" {
		os.Exit(lockHelper(path))
	}
	os.Exit(m.Run())
}

func lockHelper(path string) int {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil || unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return 1
	}
	ms, _ := strconv.Atoi(os.Getenv("BRIM_TEST_HOLD_MS"))
	child := exec.Command("sleep", strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64))
	child.ExtraFiles = []*os.File{f}
	if child.Start() != nil {
		return 1
	}
	_, _ = os.Stdout.WriteString(strconv.Itoa(child.Process.Pid))
	return 0
}

// lockLeftInChild runs the helper: the lock on path is then taken by a
// dead process and held by its child for hold.
func lockLeftInChild(t *testing.T, path string, hold time.Duration) {
	t.Helper()
	h := exec.Command(os.Args[0], "-test.run=^$")
	h.Env = append(os.Environ(), lockHelperEnv+"="+path, "BRIM_TEST_HOLD_MS="+strconv.Itoa(int(hold.Milliseconds())))
	out, err := h.Output()
	if err != nil {
		t.Fatalf("lock helper: %v: %s", err, out)
	}
	if pid, err := strconv.Atoi(string(out)); err == nil {
		t.Cleanup(func() { _ = unix.Kill(pid, unix.SIGKILL) }) // the helper's child, ours
	}
}

// An agent killed -9 while it forked a shim leaves its lock in the child
// until the child's exec closes the descriptor. The next agent must wait
// for that moment, not refuse to start as if a live agent held the lock
// (seen in CI: "cgroup parent in use by another agent" right after a
// kill -9). A lock whose taker still runs is refused at once, and one a
// dead taker's child keeps beyond the bound is refused, naming both.
func TestLockLeftInAForkedChild(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	lockLeftInChild(t, path, 300*time.Millisecond)
	l, err := File(path)
	if err != nil {
		t.Fatalf("lock left by a dead taker in its child: %v", err)
	}
	l.Close()

	forever := filepath.Join(t.TempDir(), "lock")
	lockLeftInChild(t, forever, 10*time.Second)
	if _, err := File(forever); !errors.Is(err, ErrLocked) {
		t.Fatalf("a lock held beyond the bound: %v, want ErrLocked", err)
	}
}
