package agent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brimnode/brim/isolator"
)

// TestRecoverQuarantinesCorruptRecord is the regression test for one
// corrupt checkpoint record stopping the whole agent: the agent starts,
// recovers the other containers, reports the record (Info) and leaves the
// file as it is; the record's running container is not destroyed as an
// orphan but kept, watched and killable, unaccounted and not resizable;
// retention leaves it; rm removes it with its record. A repaired record is
// recovered in full at the next start.
func TestRecoverQuarantinesCorruptRecord(t *testing.T) {
	ctx := context.Background()
	rt := newFakeRuntime(t.TempDir())
	dir := t.TempDir()
	res := Resources{MilliCPUs: 4000, MemMiB: 4096}
	a := newTestAgent(t, rt, dir, res, Retention{})
	good, _ := a.Launch(ctx, spec("good", 1000, 100))
	bad, _ := a.Launch(ctx, spec("bad", 1000, 100))
	newer, _ := a.Launch(ctx, spec("newer", 500, 50))
	done, _ := a.Launch(ctx, spec("done", 100, 10))
	rt.finish(done.ID, &ExitStatus{Code: 3})
	if _, err := a.Wait(ctx, done.ID); err != nil {
		t.Fatal(err)
	}
	a.Close()

	badFile := filepath.Join(dir, "checkpoint", bad.ID+".json")
	goodRecord, err := os.ReadFile(badFile)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := goodRecord[:len(goodRecord)/2] // a torn record
	if err := os.WriteFile(badFile, corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	newerFile := filepath.Join(dir, "checkpoint", newer.ID+".json")
	newerOriginal, err := os.ReadFile(newerFile)
	if err != nil {
		t.Fatal(err)
	}
	newerRecord := []byte(`{"version": 99, "id": "` + newer.ID + `", "state": "running"}`)
	if err := os.WriteFile(newerFile, newerRecord, 0o600); err != nil {
		t.Fatal(err)
	}

	b := newTestAgent(t, rt, dir, res, Retention{MaxExited: 1})
	if len(rt.destroyed) != 0 {
		t.Fatalf("destroyed %v: a quarantined record's container is no orphan", rt.destroyed)
	}
	byID := map[string]*Container{}
	for _, c := range b.List() {
		byID[c.ID] = c
	}
	if c := byID[good.ID]; c == nil || c.State != StateRunning || c.Quarantine != "" {
		t.Fatalf("good container recovered as %+v", c)
	}
	if c := byID[done.ID]; c == nil || c.State != StateExited || c.Exit.Code != 3 {
		t.Fatalf("exited container recovered as %+v", c)
	}
	for _, id := range []string{bad.ID, newer.ID} {
		if c := byID[id]; c == nil || c.State != StateRunning || c.Quarantine == "" || c.Pid == 0 {
			t.Fatalf("quarantined container %s listed as %+v, want running with the reason", id, c)
		}
	}
	in := b.Info()
	if len(in.Quarantined) != 2 {
		t.Fatalf("Info.Quarantined = %+v, want both records", in.Quarantined)
	}
	for _, q := range in.Quarantined {
		switch q.ID {
		case bad.ID:
			if q.File != badFile || !strings.Contains(q.Err, "parse checkpoint "+bad.ID+".json") || q.Container != StateRunning {
				t.Errorf("corrupt record reported as %+v", q)
			}
		case newer.ID:
			if q.File != newerFile || !strings.Contains(q.Err, "format version 99 is newer") || q.Container != StateRunning {
				t.Errorf("newer record reported as %+v", q)
			}
		default:
			t.Errorf("unexpected quarantined record %+v", q)
		}
	}
	// The local API carries the report (brim agent info, inspect:
	// agentserver's TestQuarantineOnTheWire).
	if c := byID[bad.ID]; c.Quarantine == "" {
		t.Fatalf("container %+v has no quarantine", c)
	}
	// Only the readable running container is accounted.
	if in.Used != (Resources{MilliCPUs: 1000, MemMiB: 100}) {
		t.Fatalf("used %s, want the good container's only", in.Used)
	}
	if _, err := b.Resize(ctx, bad.ID, Update{MilliCPUs: 2000}); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "quarantined") {
		t.Fatalf("resize of a quarantined container: %v, want ErrInvalidArgument", err)
	}
	if _, err := b.Launch(ctx, spec("another", 1000, 100)); err != nil {
		t.Fatalf("launch next to quarantined records: %v", err)
	}

	// Killed, it exits like any other; retention keeps it (only rm
	// decides about an unreadable record) and the file is untouched.
	k, err := b.Kill(ctx, bad.ID, 0)
	if err != nil || k.State != StateExited || k.Exit.Code != 137 {
		t.Fatalf("kill quarantined: %+v, %v", k, err)
	}
	b.collect(ctx)
	if _, err := b.Get(bad.ID); err != nil {
		t.Fatalf("retention removed a quarantined container: %v", err)
	}
	if got, _ := os.ReadFile(badFile); !bytes.Equal(got, corrupt) {
		t.Fatalf("quarantined record rewritten: %q", got)
	}
	if err := b.Destroy(ctx, bad.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(badFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("rm left the quarantined record: %v", err)
	}
	if q := b.Info().Quarantined; len(q) != 1 || q[0].ID != newer.ID {
		t.Fatalf("after rm, quarantined %+v", q)
	}
	b.Close()

	// The record put back as this agent can read it (repaired, or the
	// newer agent reinstalled) is recovered in full: accounted and
	// resizable again.
	if err := os.WriteFile(newerFile, newerOriginal, 0o600); err != nil {
		t.Fatal(err)
	}
	c := newTestAgent(t, rt, dir, res, Retention{})
	if q := c.Info().Quarantined; len(q) != 0 {
		t.Fatalf("repaired record still quarantined: %+v", q)
	}
	if got, err := c.Get("newer"); err != nil || got.State != StateRunning || got.Quarantine != "" {
		t.Fatalf("repaired record's container: %+v, %v", got, err)
	}
	if got := c.Info().Used; got != (Resources{MilliCPUs: 2500, MemMiB: 250}) {
		t.Fatalf("used after repair %s, want good, another and newer", got)
	}
	if _, err := c.Resize(ctx, newer.ID, Update{MilliCPUs: 1500}); err != nil {
		t.Fatalf("resize after repair: %v", err)
	}
}

// TestRecoverQuarantinedWithoutContainer: an unreadable record whose
// container the runtime does not have is reported and listed as exited
// (lost); rm removes the record.
func TestRecoverQuarantinedWithoutContainer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "checkpoint"), 0o700); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "checkpoint", "0123456789ab.json")
	if err := os.WriteFile(f, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := newFakeRuntime(t.TempDir())
	a := newTestAgent(t, rt, dir, Resources{MilliCPUs: 1000, MemMiB: 100}, Retention{})
	if q := a.Info().Quarantined; len(q) != 1 || q[0].ID != "0123456789ab" || q[0].Container != "none" {
		t.Fatalf("quarantined %+v", q)
	}
	c, err := a.Get("0123456789ab")
	if err != nil || c.State != StateExited || c.Exit.Reason != ReasonLost || c.Quarantine == "" {
		t.Fatalf("listed as %+v, %v", c, err)
	}
	if err := a.Destroy(ctx, c.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) || len(a.Info().Quarantined) != 0 {
		t.Fatalf("after rm: record %v, quarantined %+v", err, a.Info().Quarantined)
	}
}

// TestRecoverInterruptedLaunch: a launch cut by an agent kill -9 after
// its checkpoint is adopted if its container runs, and dropped with the
// runtime's container if that ended already (e.g. the shim was lost with
// the agent): nobody was given its ID, so it must not come back as an
// exit (137 shim-lost) nobody asked for.
func TestRecoverInterruptedLaunch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rt := newFakeRuntime(t.TempDir())
	st, err := newStore(filepath.Join(dir, "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Container{
		{ID: "aaaaaaaaaaaa", Name: "runs", State: StateLaunching, Limits: isolator.Limits{MilliCPUs: 500, MemoryBytes: 50 << 20}},
		{ID: "bbbbbbbbbbbb", Name: "ghost", State: StateLaunching, Limits: isolator.Limits{MilliCPUs: 500, MemoryBytes: 50 << 20}},
	} {
		if err := st.put(c); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.Launch(ctx, LaunchSpec{ID: c.ID, Limits: c.Limits}); err != nil {
			t.Fatal(err)
		}
	}
	rt.finish("bbbbbbbbbbbb", &ExitStatus{Code: 137, Signal: 9, Reason: "shim-lost"})

	a := newTestAgent(t, rt, dir, Resources{MilliCPUs: 1000, MemMiB: 100}, Retention{})
	if c, err := a.Get("runs"); err != nil || c.State != StateRunning {
		t.Fatalf("running interrupted launch: %+v, %v, want adopted", c, err)
	}
	if c, err := a.Get("ghost"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ended interrupted launch recovered as %+v, want dropped", c)
	}
	if len(rt.destroyed) != 1 || rt.destroyed[0] != "bbbbbbbbbbbb" {
		t.Fatalf("runtime destroyed %v, want the ghost's container", rt.destroyed)
	}
	if files := checkpointFiles(t, dir); len(files) != 1 || files[0] != "aaaaaaaaaaaa.json" {
		t.Fatalf("checkpoint holds %v", files)
	}
	if got := a.Info().Used; got != (Resources{MilliCPUs: 500, MemMiB: 50}) {
		t.Fatalf("used %s, want the adopted launch's", got)
	}
}
