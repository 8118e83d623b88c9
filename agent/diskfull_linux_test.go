package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/brimnode/brim/internal/atomicfile"
	"github.com/brimnode/brim/internal/testutil"
)

// TestRecoverOnFullStateDir: an agent whose state dir is full recovers
// all the same — it adopts the running container and reports the one
// that exited meanwhile without writing anything, says the disk is full
// (Info), refuses new launches cleanly, kills on request, and writes the
// records it kept in memory once space is freed; a restart then finds
// them. Before, Recover rewrote every record and failed on the first
// (`recover: checkpoint …: no space left on device`): the agent did not
// start and its containers ran unmanaged.
func TestRecoverOnFullStateDir(t *testing.T) {
	ctx := context.Background()
	dir := testutil.SmallTmpfs(t, 2<<20)
	rt := newFakeRuntime(t.TempDir())
	res := Resources{MilliCPUs: 4000, MemMiB: 4096}
	a, err := New(Options{StateDir: dir, Runtime: rt, Resources: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	keeps, _ := a.Launch(ctx, spec("keeps", 1000, 100))
	exits, _ := a.Launch(ctx, spec("exits", 1000, 100))
	a.Close() // the agent goes away; containers keep running

	rt.finish(exits.ID, &ExitStatus{Code: 42})
	// Without the records' alternates and spares (atomicfile.Dir), as an
	// older agent left the directory: a record rewritten in place of its
	// alternate needs no new space, and would be written even now.
	if err := os.RemoveAll(atomicfile.WorkDir(filepath.Join(dir, "checkpoint"))); err != nil {
		t.Fatal(err)
	}
	free := testutil.FillDisk(t, dir)

	b, err := New(Options{StateDir: dir, Runtime: rt, Resources: res})
	if err != nil {
		t.Fatalf("new agent on a full state dir: %v", err)
	}
	defer b.Close()
	if err := b.Recover(ctx); err != nil {
		t.Fatalf("recover on a full state dir: %v", err)
	}
	if c, err := b.Get(keeps.ID); err != nil || c.State != StateRunning {
		t.Fatalf("running container after recovery: %+v, %v", c, err)
	}
	if c, err := b.Get(exits.ID); err != nil || c.State != StateExited || c.Exit.Code != 42 {
		t.Fatalf("container that exited while the agent was down: %+v, %v", c, err)
	}
	st := b.Info().Checkpoint
	if !st.Full || st.Unsaved != 1 || st.Err == "" {
		t.Fatalf("checkpoint status on a full disk: %+v, want full with 1 unsaved record", st)
	}
	if _, err := b.Launch(ctx, spec("new", 100, 10)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("launch on a full disk: %v, want ENOSPC", err)
	}
	if n := len(b.List()); n != 2 {
		t.Fatalf("a refused launch left a container: %d listed", n)
	}
	if c, err := b.Kill(ctx, keeps.ID, 0); err != nil || c.State != StateExited {
		t.Fatalf("kill on a full disk: %+v, %v", c, err)
	}
	if st := b.Info().Checkpoint; st.Unsaved != 2 {
		t.Fatalf("after the kill: %+v, want 2 unsaved records", st)
	}
	b.retryUnsaved() // Serve's loop does this every few seconds
	if st := b.Info().Checkpoint; st.Unsaved != 2 || !st.Full {
		t.Fatalf("retry on a still full disk: %+v", st)
	}

	free()
	b.retryUnsaved()
	if st := b.Info().Checkpoint; st.Unsaved != 0 || st.Full || st.Err != "" {
		t.Fatalf("after space was freed: %+v, want every record written", st)
	}
	b.Close()

	c := newTestAgent(t, rt, dir, res, Retention{})
	for id, code := range map[string]int{keeps.ID: 137, exits.ID: 42} {
		if got, err := c.Get(id); err != nil || got.State != StateExited || got.Exit.Code != code {
			t.Errorf("%s after a restart: %+v, %v; want exited with %d", id, got, err, code)
		}
	}
}

// TestCheckpointCountsOtherRecords: records another part keeps only in
// memory (the network isolator's IPAM records on a full state dir) show
// in the checkpoint status, as the agent's own do: counted, the state
// dir said full, the write's error given. Before, an agent recovered on
// a full state dir whose network records were unsaved said nothing of
// them (network.Isolator.Unsaved had no reader).
func TestCheckpointCountsOtherRecords(t *testing.T) {
	var others map[string]error
	a, err := New(Options{StateDir: t.TempDir(), Runtime: newFakeRuntime(t.TempDir()), Resources: Resources{MilliCPUs: 1000, MemMiB: 1024},
		RecordsUnsaved: func() map[string]error { return others }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if st := a.Info().Checkpoint; st.Full || st.Unsaved != 0 || st.Err != "" {
		t.Fatalf("checkpoint status with every record written: %+v", st)
	}
	others = map[string]error{"c1": fmt.Errorf("write ipam state: %w", syscall.ENOSPC)}
	st := a.Info().Checkpoint
	if !st.Full || st.Unsaved != 1 || !strings.Contains(st.Err, "write ipam state") {
		t.Fatalf("checkpoint status with a network record unsaved: %+v, want full, 1 unsaved, its error", st)
	}
}
