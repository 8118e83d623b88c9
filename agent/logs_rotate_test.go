package agent

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/containerlog"
)

// TestLogsAcrossRotatedFiles: Logs reads a container's log across its
// rotated files, oldest first, stdout and stderr apart and in the order
// written; with follow it passes what is written meanwhile (rotations
// included) and ends once the container has exited.
func TestLogsAcrossRotatedFiles(t *testing.T) {
	ctx := context.Background()
	rt := newFakeRuntime(t.TempDir())
	a := newTestAgent(t, rt, t.TempDir(), Resources{MilliCPUs: 1000, MemMiB: 1024}, Retention{})
	c, err := a.Launch(ctx, spec("logs", 100, 10))
	if err != nil {
		t.Fatal(err)
	}
	if c.LogMaxSize != containerlog.DefaultMaxSize || c.LogMaxFiles != containerlog.DefaultMaxFiles {
		t.Fatalf("log bound %d×%d, want the agent's defaults", c.LogMaxFiles, c.LogMaxSize)
	}
	w, err := containerlog.Create(c.LogDir, containerlog.Limits{MaxSize: containerlog.MinMaxSize, MaxFiles: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var want [3]bytes.Buffer
	var order bytes.Buffer
	write := func(from, to int) {
		for i := from; i < to; i++ {
			s := containerlog.Stream(1 + i%3/2) // stdout, stdout, stderr, …
			line := fmt.Sprintf("%s line %d %s\n", s, i, bytes.Repeat([]byte("z"), i%200))
			w.Write(s, time.Now(), []byte(line))
			want[s].WriteString(line)
			order.WriteString(line)
		}
	}
	write(0, 3000)

	var (
		mu  sync.Mutex
		got [3]bytes.Buffer
		all bytes.Buffer
	)
	collect := func(stream int, data []byte) error {
		mu.Lock()
		defer mu.Unlock()
		got[stream].Write(data)
		all.Write(data)
		return nil
	}
	if err := a.Logs(ctx, c.ID, false, collect); err != nil {
		t.Fatal(err)
	}
	for s := Stdout; s <= Stderr; s++ {
		if !bytes.Equal(got[s].Bytes(), want[s].Bytes()) {
			t.Fatalf("stream %d: %d bytes, want %d", s, got[s].Len(), want[s].Len())
		}
	}
	if !bytes.Equal(all.Bytes(), order.Bytes()) {
		t.Fatal("chunks not in the order written")
	}

	// Follow from the start: what is written meanwhile comes too.
	for i := range got {
		got[i].Reset()
	}
	all.Reset()
	followed := make(chan error, 1)
	go func() { followed <- a.Logs(ctx, c.ID, true, collect) }()
	write(3000, 6000)
	// What is written reaches the follower while the container runs
	// (before: only once it had exited).
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := all.Len()
		mu.Unlock()
		if n == order.Len() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs -f passed %d of %d bytes while the container runs", n, order.Len())
		}
	}
	w.Close()
	rt.finish(c.ID, &ExitStatus{Code: 0})
	select {
	case err := <-followed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("logs -f did not end after the exit")
	}
	if !bytes.Equal(all.Bytes(), order.Bytes()) {
		t.Fatalf("followed %d bytes, want %d in order", all.Len(), order.Len())
	}
}
