package agentserver

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/agent/agentpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

func socketPath(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "brim-sock") // short: sun_path is 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return filepath.Join(d, "run", "agent.sock")
}

func startServer(t *testing.T, rt *fakeRuntime, sock string) agentpb.AgentClient {
	t.Helper()
	return startServerWith(t, agent.Options{Runtime: rt}, Options{}, sock)
}

// startServerWith is startServer with an agent on opts (StateDir and
// Resources are filled in when empty) and a server on sopts.
func startServerWith(t *testing.T, opts agent.Options, sopts Options, sock string) agentpb.AgentClient {
	t.Helper()
	a := newAgent(t, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, a, sock, sopts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := agentpb.NewAgentClient(conn)
	for i := 0; ; i++ { // Run listens asynchronously
		if _, err := c.AgentInfo(context.Background(), &agentpb.AgentInfoRequest{}); err == nil {
			return c
		} else if i == 200 {
			t.Fatalf("agent never answered: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestServer(t *testing.T) {
	ctx := context.Background()
	sock := socketPath(t)
	// A stale socket from a dead agent is replaced.
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()

	rt := newFakeRuntime(t.TempDir())
	c := startServer(t, rt, sock)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi.Mode(), err)
	}
	if _, err := Listen(sock); !errors.Is(err, agent.ErrAgentRunning) {
		t.Fatalf("second listener on a live socket: %v", err)
	}

	info, err := c.AgentInfo(ctx, &agentpb.AgentInfoRequest{})
	if err != nil || info.ResourcesTotal != "cpus:1;mem:1024" {
		t.Fatalf("info %+v %v", info, err)
	}
	codeOf := func(err error) codes.Code { return status.Code(err) }
	if _, err := c.Get(ctx, &agentpb.GetRequest{Id: "nope"}); codeOf(err) != codes.NotFound || status.Convert(err).Message() != `container "nope" not found` {
		t.Fatalf("get unknown: %v", err)
	}
	run := &agentpb.RunRequest{Name: "a", Command: []string{"x"}, MilliCpus: 500, MemMib: 100}
	ct, err := c.Run(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, run); codeOf(err) != codes.AlreadyExists {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := c.Run(ctx, &agentpb.RunRequest{Command: []string{"x"}, MilliCpus: 5000, MemMib: 1}); codeOf(err) != codes.ResourceExhausted {
		t.Fatalf("too big: %v", err)
	}
	if _, err := c.Run(ctx, &agentpb.RunRequest{MilliCpus: 1, MemMib: 1}); codeOf(err) != codes.InvalidArgument {
		t.Fatalf("no command: %v", err)
	}
	if _, err := c.Destroy(ctx, &agentpb.DestroyRequest{Id: "a"}); codeOf(err) != codes.FailedPrecondition {
		t.Fatalf("destroy running: %v", err)
	}
	if _, err := c.Update(ctx, &agentpb.UpdateRequest{Id: "a", MemMib: 200}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Stats(ctx, &agentpb.StatsRequest{Id: "a"})
	if err != nil || st.MemLimitBytes != 200<<20 {
		t.Fatalf("stats %+v %v", st, err)
	}

	// Logs -f streams until the container exits.
	if err := os.WriteFile(filepath.Join(ct.SandboxDir, "stdout"), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stream, err := c.Logs(ctx, &agentpb.LogsRequest{Id: ct.Id, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || string(first.Data) != "hello\n" {
		t.Fatalf("first chunk %v %v", first, err)
	}
	rt.finish(ct.Id, &agent.ExitStatus{Code: 5})
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("logs -f after exit: %v", err)
	}
	w, err := c.Wait(ctx, &agentpb.WaitRequest{Id: "a"})
	if err != nil || w.Exit.GetCode() != 5 || w.State != agent.StateExited {
		t.Fatalf("wait %+v %v", w, err)
	}
	if _, err := c.Kill(ctx, &agentpb.KillRequest{Id: "a"}); codeOf(err) != codes.FailedPrecondition {
		t.Fatalf("kill exited: %v", err)
	}
	if _, err := c.Destroy(ctx, &agentpb.DestroyRequest{Id: "a"}); err != nil {
		t.Fatal(err)
	}
	l2, err := c.List(ctx, &agentpb.ListRequest{})
	if err != nil || len(l2.Containers) != 0 {
		t.Fatalf("list after destroy: %v %v", l2, err)
	}
}
