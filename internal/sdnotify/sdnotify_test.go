package sdnotify

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no notify message")
		return ""
	}
}

func TestNotifySequence(t *testing.T) {
	ch := testutil.NotifySocket(t)
	n := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := n.Ready("serving 3 containers"); err != nil {
		t.Fatal(err)
	}
	if m := next(t, ch); m != "READY=1\nSTATUS=serving 3 containers" {
		t.Errorf("ready = %q", m)
	}
	if err := n.Reloading(); err != nil {
		t.Fatal(err)
	}
	if m := next(t, ch); !strings.HasPrefix(m, "RELOADING=1\nMONOTONIC_USEC=") || strings.HasSuffix(m, "=0") {
		t.Errorf("reloading = %q", m)
	}
	if err := n.Stopping(); err != nil {
		t.Fatal(err)
	}
	if m := next(t, ch); m != "STOPPING=1" {
		t.Errorf("stopping = %q", m)
	}
}

func TestNoSocketIsNoop(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if err := New(slog.Default()).Ready("x"); err != nil {
		t.Fatalf("without NOTIFY_SOCKET: %v", err)
	}
}

// A wedged loop stops the pings; they resume when it beats again.
func TestWatchdogFollowsLoops(t *testing.T) {
	ch := testutil.NotifySocket(t)
	n := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	fast := n.Loop("link", time.Hour)
	wedged := n.Loop("qos", 500*time.Millisecond)
	go func() { defer close(done); n.RunWatchdog(ctx, 10*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })

	if m := next(t, ch); m != "WATCHDOG=1" {
		t.Fatalf("first ping = %q", m)
	}
	// Let "qos" go stale: once Stale reports it, no ping may follow.
	deadline := time.Now().Add(10 * time.Second)
	for len(n.Stale(time.Now())) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("loop never went stale")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := n.Stale(time.Now()); len(got) != 1 || got[0] != "qos" {
		t.Fatalf("stale = %v, want [qos]", got)
	}
	// Drain pings sent before the loop went stale, then expect silence
	// for many ping intervals.
	drain := time.After(100 * time.Millisecond)
	for draining := true; draining; {
		select {
		case <-ch:
		case <-drain:
			draining = false
		}
	}
	select {
	case m := <-ch:
		t.Fatalf("pinged %q with a wedged loop", m)
	case <-time.After(300 * time.Millisecond):
	}
	fast.Beat()
	wedged.Beat()
	if m := next(t, ch); m != "WATCHDOG=1" {
		t.Errorf("after recovery = %q", m)
	}
}
