package testutil

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
)

// FailureLog returns a debug logger whose records t prints only if it
// fails: the logs of clients and servers a test runs in-process, kept
// out of a passing run's output but there to read when a timing-bound
// step did not happen.
func FailureLog(t testing.TB, name string) *slog.Logger {
	t.Helper()
	w := &LockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, w.String())
		}
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// LockedBuffer is a bytes.Buffer safe for concurrent writers: a log a
// test reads while it is written.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
