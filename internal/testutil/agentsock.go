package testutil

import (
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"

	"github.com/brimnode/brim/agent/agentpb"
)

// ServeAgent serves srv — a fake agent API — on a unix socket in a
// temporary directory until the test ends, and returns the socket's
// path.
func ServeAgent(t testing.TB, srv agentpb.AgentServer) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	agentpb.RegisterAgentServer(gs, srv)
	go func() { _ = gs.Serve(l) }() // ends with Stop
	t.Cleanup(gs.Stop)
	return sock
}
