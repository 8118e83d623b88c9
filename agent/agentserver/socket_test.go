package agentserver

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/agent/agentpb"
)

// closedBound bounds how long a test waits for the agent to close a
// connection: far beyond the idle timeouts used here (no timing is
// asserted, only that the close comes).
const closedBound = 60 * time.Second

// rawHTTP2 connects to sock and speaks just enough HTTP/2 for the server
// to take it as a client (preface and SETTINGS), then nothing: not even
// the acknowledgements a gRPC client sends.
func rawHTTP2(t *testing.T, sock string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// The client preface, then an empty SETTINGS frame (length 0, type 4,
	// no flags, stream 0).
	// A connection beyond the bound may be closed before this write: the
	// write then fails (EPIPE, ECONNRESET) and awaitClosed sees the close.
	if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil &&
		!errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}
	return c
}

// awaitClosed reads c until the server closes it; false if it is still
// open after bound.
func awaitClosed(c net.Conn, bound time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(bound))
	_, err := io.Copy(io.Discard, c) // nil at EOF, a reset is closed too
	var ne net.Error
	return !errors.As(err, &ne) || !ne.Timeout()
}

// TestSocketIdleTimeout: a connection to the local API with no call in
// progress is closed after Options.IdleTimeout — a gRPC client's
// (which then reconnects by itself) and a bare HTTP/2 one's that ignores
// the GOAWAY — while streaming calls in progress (logs -f, wait) outlast
// it and end normally. Before, no idle connection was ever closed.
func TestSocketIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	ctx := context.Background()
	sock := socketPath(t)
	rt := newFakeRuntime(t.TempDir())
	api := startServerWith(t, agent.Options{Runtime: rt}, Options{IdleTimeout: idle}, sock)

	raw := rawHTTP2(t, sock)

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := agentpb.NewAgentClient(conn)
	if _, err := c.AgentInfo(ctx, &agentpb.AgentInfoRequest{}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, closedBound)
	defer cancel()
	for s := conn.GetState(); s == connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(wctx, s) {
			t.Fatalf("idle gRPC connection still %v after %v", s, closedBound)
		}
	}
	if _, err := c.AgentInfo(ctx, &agentpb.AgentInfoRequest{}); err != nil {
		t.Fatalf("a call after the idle close: %v (the client reconnects)", err)
	}
	if !awaitClosed(raw, closedBound) {
		t.Fatalf("idle HTTP/2 connection that ignores GOAWAY still open after %v", closedBound)
	}

	// Streams in progress are not idle: they outlast several timeouts.
	ct, err := api.Run(ctx, &agentpb.RunRequest{Name: "w", Command: []string{"x"}, MilliCpus: 100, MemMib: 10})
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		w, err := c.Wait(ctx, &agentpb.WaitRequest{Id: ct.Id})
		if err == nil && w.Exit.GetCode() != 3 {
			err = errors.New("wait returned no exit code 3")
		}
		waited <- err
	}()
	logs, err := c.Logs(ctx, &agentpb.LogsRequest{Id: ct.Id, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	logsDone := make(chan error, 1)
	go func() {
		for {
			if _, err := logs.Recv(); err != nil {
				logsDone <- err
				return
			}
		}
	}()
	select {
	case err := <-waited:
		t.Fatalf("wait ended while the container runs: %v", err)
	case err := <-logsDone:
		t.Fatalf("logs -f ended while the container runs: %v", err)
	case <-time.After(10 * idle):
	}
	rt.finish(ct.Id, &agent.ExitStatus{Code: 3})
	if err := <-waited; err != nil {
		t.Fatalf("wait across idle timeouts: %v", err)
	}
	if err := <-logsDone; err != io.EOF {
		t.Fatalf("logs -f across idle timeouts: %v, want its normal end", err)
	}
}

// TestSocketMaxConns: a connection beyond Options.MaxConns is
// closed at once; once one closes, the next is served.
func TestSocketMaxConns(t *testing.T) {
	sock := socketPath(t)
	startServerWith(t, agent.Options{Runtime: newFakeRuntime(t.TempDir())}, Options{MaxConns: 3}, sock)
	// startServerWith's own client holds one connection.
	a, b := rawHTTP2(t, sock), rawHTTP2(t, sock)
	over := rawHTTP2(t, sock)
	if !awaitClosed(over, closedBound) {
		t.Fatal("a connection beyond the bound stayed open")
	}
	if awaitClosed(a, 500*time.Millisecond) || awaitClosed(b, 500*time.Millisecond) {
		t.Fatal("a connection within the bound was closed")
	}
	a.Close()
	// The slot is free once the server has seen a's end.
	for i := 0; awaitClosed(rawHTTP2(t, sock), 200*time.Millisecond); i++ {
		if i == 100 {
			t.Fatal("every connection refused after one within the bound closed")
		}
	}
}
