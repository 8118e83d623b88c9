package osthread

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/internal/testutil"
)

// The main goroutine runs on the main thread (locked in init, before
// any other goroutine can take it), so that TestMain starts Run there.
func init() { runtime.LockOSThread() }

// fromMain is what Run saw when TestMain called it on the main thread.
var fromMain struct {
	tid       int
	err       error
	utsBefore string
	utsAfter  string
}

func TestMain(m *testing.M) {
	if unix.Gettid() == unix.Getpid() && os.Geteuid() == 0 {
		// /proc/self is the main thread's.
		fromMain.utsBefore, _ = os.Readlink("/proc/self/ns/uts")
		// Unlocked, the main thread runs the next goroutine when this
		// one blocks: Run's, which goes next on this P.
		runtime.UnlockOSThread()
		fromMain.err = Run(func() error {
			fromMain.tid = unix.Gettid()
			return unix.Unshare(unix.CLONE_NEWUTS)
		})
		fromMain.utsAfter, _ = os.Readlink("/proc/self/ns/uts")
	}
	os.Exit(m.Run())
}

// threadGone waits until thread tid of this process has ended.
func threadGone(t *testing.T, tid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d still runs after its function returned", tid)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRun: fn runs on a thread that is not the main one, its result is
// Run's, and the thread ends with it.
func TestRun(t *testing.T) {
	var tid int
	want := errors.New("fn's error")
	if err := Run(func() error { tid = unix.Gettid(); return want }); !errors.Is(err, want) {
		t.Fatalf("Run = %v, want fn's error", err)
	}
	if tid == unix.Getpid() {
		t.Fatal("fn ran on the main thread")
	}
	threadGone(t, tid)
}

// TestRunFromMainThread: started on the main thread, fn still runs on
// another, which ends with it, and the main thread keeps its namespaces
// (fn unshared its UTS namespace: needs root).
func TestRunFromMainThread(t *testing.T) {
	testutil.RequireRoot(t) // unsharing a namespace
	if fromMain.err != nil {
		t.Fatalf("Run from the main thread: %v", fromMain.err)
	}
	if fromMain.tid == 0 || fromMain.tid == unix.Getpid() {
		t.Fatalf("fn ran on thread %d, the main thread is %d", fromMain.tid, unix.Getpid())
	}
	if fromMain.utsAfter != fromMain.utsBefore {
		t.Errorf("the main thread's UTS namespace went from %s to %s", fromMain.utsBefore, fromMain.utsAfter)
	}
	threadGone(t, fromMain.tid)
}
