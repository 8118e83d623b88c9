package agent

import (
	"context"
	"errors"
	"testing"
)

// failingRecovery is a runtime whose recovery fails.
type failingRecovery struct{ *fakeRuntime }

var errRecover = errors.New("recover: boom")

func (failingRecovery) Recover(context.Context) ([]*RuntimeInfo, error) { return nil, errRecover }

// TestReady: Ready closes once Start has recovered the previous agent's
// containers (they are known when it closes), and never when recovery
// fails.
func TestReady(t *testing.T) {
	dir := t.TempDir()
	rt := newFakeRuntime(t.TempDir())
	first := newTestAgent(t, rt, dir, Resources{MilliCPUs: 1000, MemMiB: 1024}, Retention{})
	if _, err := first.Launch(context.Background(), spec("left", 100, 64)); err != nil {
		t.Fatal(err)
	}
	first.Close()

	a, err := New(Options{StateDir: dir, Runtime: rt, Resources: Resources{MilliCPUs: 1000, MemMiB: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Ready():
		t.Fatal("Ready closed before Start recovered")
	default:
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Ready():
	default:
		t.Fatal("Ready not closed when Start returned")
	}
	if c, err := a.Get("left"); err != nil || c.State != StateRunning {
		t.Errorf("after Ready, the previous agent's container: %+v, %v", c, err)
	}
	a.Shutdown()
	if err := a.Close(); err != nil {
		t.Errorf("close: %v", err)
	}

	b, err := New(Options{StateDir: t.TempDir(), Runtime: failingRecovery{newFakeRuntime(t.TempDir())}, Resources: Resources{MilliCPUs: 1000, MemMiB: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Start(context.Background()); !errors.Is(err, errRecover) {
		t.Fatalf("start with a failing recovery: %v", err)
	}
	select {
	case <-b.Ready():
		t.Error("Ready closed although recovery failed")
	default: // Start has returned: Ready's state is final
	}
}
