package cgroups

import (
	"context"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// TestWatchParentMemory: a revocable container's group under the parent
// fills its 48 MiB limit with `tail /dev/zero` (v2: memory.high throttles
// it first); the kernel's notification (v1 memory.pressure_level medium,
// v2 the PSI trigger) reaches the parent's watch. The watch ends with its
// context.
func TestWatchParentMemory(t *testing.T) {
	testutil.RequireRoot(t)
	parent := testutil.NewCgroupParent(t)
	i, err := New(Config{Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	id := testutil.UniqueName("hog")
	if err := i.Prepare(ctx, id, isolator.Limits{MilliCPUs: 500, MemoryBytes: 48 << 20, Class: isolator.BestEffort}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := i.Cleanup(context.Background(), id); err != nil {
			t.Error(err)
		}
	})
	ch, err := i.WatchParentMemory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dirs := groupDirs(i, id)
	if i.Version() == V2 {
		dirs = []string{i.dir("", i.Path(id))}
	}
	// Again and again: each run ends in an OOM kill at the limit.
	_, release := start(t, dirs, "sh", "-c", "while :; do tail /dev/zero; done")
	release()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatal("watch closed before any event")
		}
	case <-time.After(time.Minute):
		t.Fatal("no memory pressure notification in a minute")
	}
	cancel()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch not closed after its context ended")
		}
	}
}
