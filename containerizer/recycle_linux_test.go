package containerizer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/brimnode/brim/isolator"
)

// runSequence launches n containers one after the other, each waited
// for and destroyed before the next, checking each one's output, and
// returns their shims' pids.
func runSequence(t *testing.T, e *env, n int) []int {
	t.Helper()
	var pids []int
	for i := range n {
		want := fmt.Sprintf("run-%d", i)
		info := e.launch(Spec{Command: []string{"/bin/sh", "-c", "echo " + want + "; ls -A /mnt/sandbox; exit 7"}, Limits: isolator.Limits{MilliCPUs: 100}})
		if st := e.wait(info.ID); st.Code != 7 {
			t.Fatalf("%s: exit status %+v", want, st)
		}
		if got := readSandbox(t, info, "stdout"); got != want+"\n" {
			t.Errorf("%s: stdout %q, want its own output and an empty sandbox", want, got)
		}
		if err := e.c.Destroy(context.Background(), info.ID); err != nil {
			t.Fatal(err)
		}
		e.assertGone(info.ID, info.ShimPid)
		pids = append(pids, info.ShimPid)
		if !e.noRecycle {
			// A freed shim goes back to the warm shims right after it
			// reports (the teardown waited for the report): let it.
			waitWarm(t, e.c, info.ShimPid)
		}
	}
	return pids
}

// waitWarm waits until shim pid is among c's warm shims.
func waitWarm(t *testing.T, c *Containerizer, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c.poolMu.Lock()
		in := slices.ContainsFunc(c.warm, func(sp *shimProc) bool { return sp.pid == pid })
		c.poolMu.Unlock()
		if in {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("shim %d not back among the warm shims after 5 s", pid)
}

func distinct(pids []int) int {
	seen := make(map[int]bool)
	for _, p := range pids {
		seen[p] = true
	}
	return len(seen)
}

// TestShimRecycled: a warm shim whose container has ended takes the
// next ones (the launches of a sequence share a few shim processes), and
// each container is still made from nothing: its own output, an empty
// sandbox, its directory gone with it; the shims exit when the
// containerizer closes. With NoRecycleShims every container has a shim
// of its own.
func TestShimRecycled(t *testing.T) {
	run := t.TempDir()
	e := newEnvWith(t, &env{runDir: run, shim: smallShimBinary})
	pids := runSequence(t, e, 8)
	if d := distinct(pids); d > 3 {
		t.Errorf("8 containers in a row had %d shims (%v), want them recycled", d, pids)
	}
	// A free shim waits where warm shims wait (brim agent cleanup
	// looks there), out of every container's directory.
	last := pids[len(pids)-1]
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", last)); err != nil || cwd != filepath.Join(run, "containers") {
		t.Errorf("free shim %d works in %q (%v), want %s", last, cwd, err, filepath.Join(run, "containers"))
	}
	if got := warmShims(filepath.Join(run, "containers")); !slices.Contains(got, last) {
		t.Errorf("cleanup's warm shims %v miss the free shim %d", got, last)
	}
	e.c.Close()
	for _, p := range pids {
		deadline := time.Now().Add(10 * time.Second)
		for running(p) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if running(p) {
			t.Errorf("shim %d still runs after Close", p)
		}
	}

	e2 := newEnvWith(t, &env{runDir: t.TempDir(), shim: smallShimBinary, noRecycle: true})
	if pids := runSequence(t, e2, 4); distinct(pids) != 4 {
		t.Errorf("without recycling, 4 containers had shims %v, want 4 of them", pids)
	}
}

// TestRecycledShimAfterAgentDeath: a recycled shim whose agent died
// while its container ran (its handshake pipes closed, as at a kill -9)
// cannot be handed another container: once the container ends it records
// the exit and exits, as a shim that is not recycled does, and the next
// containerizer recovers the container and its exit.
func TestRecycledShimAfterAgentDeath(t *testing.T) {
	run := t.TempDir()
	e := newEnvWith(t, &env{runDir: run, shim: smallShimBinary})
	runSequence(t, e, 1) // the next launches find a recycled shim
	var info *Info
	for range 3 {
		info = e.launch(Spec{Command: []string{"sleep", "60"}, Limits: isolator.Limits{MilliCPUs: 100}})
		e.c.mu.Lock()
		ct := e.c.containers[info.ID]
		e.c.mu.Unlock()
		if ct.shim != nil {
			// The agent's ends of the handshake go with its process.
			ct.shim.goW.Close()
			ct.shim.reportR.Close()
			break
		}
		t.Fatalf("container %s's shim %d is not recycled", info.ID, info.ShimPid)
	}
	c2 := e.newContainerizer()
	if _, err := c2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c2.Kill(context.Background(), info.ID, 9); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := c2.Wait(ctx, info.ID)
	if err != nil || st.Signal != 9 {
		t.Fatalf("recovered exit %+v, %v; want killed by signal 9", st, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for running(info.ShimPid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if running(info.ShimPid) {
		t.Errorf("shim %d of a dead agent's container still runs after the container ended", info.ShimPid)
	}
	if err := c2.Destroy(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	e.assertGone(info.ID, info.ShimPid)
	if _, err := os.Stat(run); err != nil {
		t.Fatal(err)
	}
}

// TestRecycledShimIdleAndFresh: a recycled shim is not given a launch
// that joins a network namespace (its mount namespace no longer follows
// the host's, where the isolator binds the namespace), and one left
// idle for recycledIdle is ended.
func TestRecycledShimIdleAndFresh(t *testing.T) {
	e := newEnvWith(t, &env{runDir: t.TempDir(), shim: smallShimBinary})
	pid := runSequence(t, e, 1)[0]
	if sp := e.c.takeWarm(true); sp == nil || sp.pid == pid || !sp.freedAt.IsZero() {
		t.Fatalf("a launch with a network namespace took %+v, want the shim that has run nothing", sp)
	} else {
		sp.discard()
	}
	e.c.poolMu.Lock()
	e.c.trimRecycledLocked(time.Now().Add(recycledIdle))
	left := slices.ContainsFunc(e.c.warm, func(sp *shimProc) bool { return sp.pid == pid })
	e.c.poolMu.Unlock()
	if left {
		t.Fatalf("shim %d still warm after %v idle", pid, recycledIdle)
	}
	deadline := time.Now().Add(10 * time.Second)
	for running(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if running(pid) {
		t.Errorf("idle recycled shim %d still runs", pid)
	}
}
