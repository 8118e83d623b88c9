package agent

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

func TestResizeLabeled(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rt := newFakeRuntime(t.TempDir())
	a := newTestAgent(t, rt, dir, Resources{MilliCPUs: 2000, MemMiB: 1024}, Retention{})
	s := spec("task", 500, 128)
	s.Labels = map[string]string{"keep": "yes", "res": "cpus:0.5;mem:128"}
	c, err := a.Launch(ctx, s)
	if err != nil {
		t.Fatal(err)
	}

	// Refused (beyond the total): neither limits nor labels change.
	if _, err := a.ResizeLabeled(ctx, c.ID, Update{MilliCPUs: 3000, MemMiB: 128}, map[string]string{"res": "cpus:3;mem:128"}); !errors.Is(err, ErrInsufficientResources) {
		t.Fatalf("resize beyond total: %v", err)
	}
	if got, _ := a.Get(c.ID); got.Labels["res"] != "cpus:0.5;mem:128" {
		t.Fatalf("labels after a refused resize: %v", got.Labels)
	}

	r, err := a.ResizeLabeled(ctx, "task", Update{MilliCPUs: 1500, MemMiB: 256}, map[string]string{"res": "cpus:1.5;mem:256"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Labels["res"] != "cpus:1.5;mem:256" || r.Labels["keep"] != "yes" || r.Limits.MilliCPUs != 1500 || r.Limits.MemoryBytes != 256<<20 {
		t.Fatalf("resized: labels %v, limits %+v", r.Labels, r.Limits)
	}
	if got := a.Info().Used; got != (Resources{MilliCPUs: 1500, MemMiB: 256}) {
		t.Fatalf("used after resize = %v", got)
	}
	// The labels are in the same checkpoint as the limits.
	st, err := newStore(filepath.Join(dir, "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	saved, bad, err := st.load()
	if err != nil || len(bad) != 0 {
		t.Fatal(err)
	}
	if len(saved) != 1 || saved[0].Labels["res"] != "cpus:1.5;mem:256" || saved[0].Limits.MilliCPUs != 1500 {
		t.Fatalf("checkpoint: %+v", saved)
	}
}
