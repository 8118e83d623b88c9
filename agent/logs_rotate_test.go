package agent

import (
	"bytes"
	"context"
	"errors"
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
	if err := a.Logs(ctx, c.ID, LogsOptions{}, collect); err != nil {
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
	go func() { followed <- a.Logs(ctx, c.ID, LogsOptions{Follow: true}, collect) }()
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

// TestLogsOptions: the stream, the tail and the time bounds select what
// Logs sends, timestamps go before each line (once for a line written in
// pieces), and options out of range are refused naming them.
func TestLogsOptions(t *testing.T) {
	ctx := context.Background()
	rt := newFakeRuntime(t.TempDir())
	a := newTestAgent(t, rt, t.TempDir(), Resources{MilliCPUs: 1000, MemMiB: 1024}, Retention{})
	c, err := a.Launch(ctx, spec("logopts", 100, 10))
	if err != nil {
		t.Fatal(err)
	}
	w, err := containerlog.Create(c.LogDir, containerlog.Limits{MaxSize: containerlog.MinMaxSize, MaxFiles: 100})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	for i := range 2000 {
		s := containerlog.Stdout
		if i%2 == 1 {
			s = containerlog.Stderr
		}
		w.Write(s, base.Add(time.Duration(i)*time.Second), []byte(fmt.Sprintf("line %d\n", i)))
	}
	w.Write(containerlog.Stdout, base.Add(2000*time.Second), []byte("in "))
	w.Write(containerlog.Stdout, base.Add(2001*time.Second), []byte("pieces\n"))
	w.Close()
	read := func(o LogsOptions) string {
		t.Helper()
		var b bytes.Buffer
		if err := a.Logs(ctx, c.ID, o, func(s int, data []byte) error {
			fmt.Fprintf(&b, "%d:", s)
			b.Write(data)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if got := read(LogsOptions{Stream: Stderr, Tail: 2}); got != "2:line 1997\nline 1999\n" {
		t.Errorf("stderr, tail 2: %q", got)
	}
	if got := read(LogsOptions{Since: base.Add(1998 * time.Second), Until: base.Add(1999 * time.Second), Timestamps: true}); got !=
		"1:2026-11-29T07:33:18.000000000Z line 1998\n2:2026-11-29T07:33:19.000000000Z line 1999\n" {
		t.Errorf("since, until, timestamps: %q", got)
	}
	if got := read(LogsOptions{Tail: 2, Timestamps: true}); got != "1:2026-11-29T07:33:20.000000000Z in pieces\n" {
		t.Errorf("a line in pieces with timestamps: %q", got)
	}
	for _, bad := range []LogsOptions{{Stream: 7}, {Tail: -1}, {Since: base, Until: base.Add(-time.Second)}} {
		if err := a.Logs(ctx, c.ID, bad, func(int, []byte) error { return nil }); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Logs(%+v): %v, want ErrInvalidArgument", bad, err)
		}
	}
}
