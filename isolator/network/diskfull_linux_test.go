package network

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// TestRecoverOnFullStateDir: an isolator started again (the agent
// restarted) on a full state dir recovers its containers: one recorded
// as it runs is adopted without a write; one whose limits changed gets
// its classes set and its record kept in memory (Unsaved, with the
// write's error), written once space is freed. Before, Recover rewrote
// every record and failed on the first (`recover network: restore
// network of …: write ipam state: … no space left on device`): the agent
// did not start (issue 30, chaos disk-full-recover).
func TestRecoverOnFullStateDir(t *testing.T) {
	cfg := testConfig(t, 1000)
	cfg.StateDir = testutil.SmallTmpfs(t, 1<<20)
	ctx := context.Background()
	first, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"same", "changed"} {
		var l isolator.Launch
		if err := first.Prepare(ctx, id, isolator.Limits{Network: true, NetBandwidthMbit: 10}, &l); err != nil {
			t.Fatalf("prepare %s: %v", id, err)
		}
	}
	if err := first.Close(); err != nil { // the agent's kill -9: containers keep their network
		t.Fatal(err)
	}
	free := testutil.FillDisk(t, cfg.StateDir)
	freed := false
	t.Cleanup(func() {
		if !freed {
			free()
		}
	})

	iso, err := New(cfg)
	if err != nil {
		t.Fatalf("new isolator on a full state dir: %v", err)
	}
	t.Cleanup(func() { uninstall(t, iso) })
	known := map[string]isolator.Limits{
		"same":    {Network: true, NetBandwidthMbit: 10},
		"changed": {Network: true, NetBandwidthMbit: 20},
	}
	if err := iso.Recover(ctx, known); err != nil {
		t.Fatalf("recover on a full state dir: %v", err)
	}
	for id := range known {
		if _, err := iso.Address(id); err != nil {
			t.Errorf("%s after recovery: %v", id, err)
		}
	}
	if got := classRate(t, iso.txIFB, mustIndex(t, iso, "changed")); got != 20*mbit {
		t.Errorf("changed container's class rate %d, want 20 Mbit/s", got)
	}
	unsaved := iso.Unsaved()
	if len(unsaved) != 1 || !errors.Is(unsaved["changed"], syscall.ENOSPC) {
		t.Errorf("unsaved records on a full state dir: %v, want the changed one's, ENOSPC", unsaved)
	}

	free()
	freed = true
	deadline := time.Now().Add(30 * time.Second)
	for len(iso.Unsaved()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("records still unsaved %v after space was freed: %v", 30*time.Second, iso.Unsaved())
		}
		time.Sleep(100 * time.Millisecond)
	}
	recs, err := iso.store.load()
	if err != nil {
		t.Fatal(err)
	}
	if got := recs["changed"].Limits.NetBandwidthMbit; got != 20 {
		t.Errorf("the changed container's record on disk says %d Mbit/s once written, want 20", got)
	}
}
