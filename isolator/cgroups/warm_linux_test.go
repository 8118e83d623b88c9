package cgroups

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// warmTasks returns the thread IDs in the primer's group (the parent's
// group in the first of warmControllers the host mounts).
func warmTasks(t *testing.T, i *Isolator) []string {
	t.Helper()
	for _, c := range warmControllers {
		p := filepath.Join(i.dir(c, i.parent), "tasks")
		if !exists(p) {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(data))
	}
	t.Fatal("no primer hierarchy mounted")
	return nil
}

// waitTasks polls until the primer's group holds n threads.
func waitTasks(t *testing.T, i *Isolator, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tids := warmTasks(t, i)
		if len(tids) == n {
			return tids
		}
		if time.Now().After(deadline) {
			t.Fatalf("primer group holds %v, want %d threads", tids, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWarmV1 runs the primer on the host's hierarchies: one thread of
// this process, never the main one, in the parent's group while any
// launch is under way (two overlapping ones here share it), gone once
// the last is done; the parent can then be removed (the test's cleanup
// fails otherwise).
func TestWarmV1(t *testing.T) {
	i, _ := newV1(t)
	done1 := i.Warm()
	tids := waitTasks(t, i, 1)
	if tids[0] == "" || tids[0] == strconv.Itoa(os.Getpid()) {
		t.Fatalf("primer runs on thread %q (main thread %s)", tids[0], strconv.Itoa(os.Getpid()))
	}
	if _, err := os.Stat(filepath.Join("/proc/self/task", tids[0])); err != nil {
		t.Fatalf("primer thread %s is not one of this process: %v", tids[0], err)
	}
	done2 := i.Warm()
	done1()
	done1() // idempotent: must not end the second launch's priming
	time.Sleep(3 * warmEvery)
	if got := waitTasks(t, i, 1); got[0] != tids[0] {
		t.Fatalf("second launch got primer %v, want the running one %s", got, tids[0])
	}
	done2()
	waitTasks(t, i, 0)
	if _, err := os.Stat(filepath.Join("/proc/self/task", tids[0])); err == nil {
		t.Fatalf("primer thread %s still exists after the last launch was done", tids[0])
	}
	// A later launch starts a new primer.
	done3 := i.Warm()
	waitTasks(t, i, 1)
	done3()
	waitTasks(t, i, 0)
}

// TestWarmPrimerEndsOnItsOwn: a primer that reaches warmMax while its
// launch is still under way ends, and the next launch starts a new one.
func TestWarmPrimerEndsOnItsOwn(t *testing.T) {
	i, _ := newV1(t)
	defer func(d time.Duration) { warmMax = d }(warmMax)
	warmMax = 50 * time.Millisecond
	done1 := i.Warm()
	waitTasks(t, i, 1)
	waitTasks(t, i, 0) // warmMax passed
	done2 := i.Warm()
	waitTasks(t, i, 1)
	done1()
	done2()
	waitTasks(t, i, 0)
}

// TestWarmV2IsNoop: on a v2 tree nothing is started (and nothing
// written: the fixture is a plain directory).
func TestWarmV2IsNoop(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	i, err := New(Config{Root: dir, Parent: "/brim"})
	if err != nil {
		t.Fatal(err)
	}
	i.Warm()()
	if exists(filepath.Join(dir, "brim")) {
		t.Fatal("Warm made the parent on v2")
	}
}
