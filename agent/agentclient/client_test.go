package agentclient_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/brimnode/brim/agent/agentclient"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/internal/testutil"
)

// wedgedAgent answers nothing: every call waits for its caller to go.
type wedgedAgent struct {
	agentpb.UnimplementedAgentServer
}

func (wedgedAgent) Get(ctx context.Context, _ *agentpb.GetRequest) (*agentpb.Container, error) {
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

func (wedgedAgent) Kill(ctx context.Context, _ *agentpb.KillRequest) (*agentpb.Container, error) {
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

func (wedgedAgent) Wait(ctx context.Context, _ *agentpb.WaitRequest) (*agentpb.Container, error) {
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

// TestCallTimeout: with CallTimeout a call to a wedged agent fails with
// DeadlineExceeded at the bound (a kill's plus its grace), naming it,
// though its caller's context has none; Wait, which lasts until the
// container exits, is left to its caller.
func TestCallTimeout(t *testing.T) {
	sock := testutil.ServeAgent(t, wedgedAgent{})
	c, err := agentclient.Dial(sock, agentclient.CallTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })

	// The caller gives up only after 10 s (Canceled): an unbounded call
	// would end so, a bounded one earlier with DeadlineExceeded.
	ctx, cancel := context.WithCancel(context.Background())
	stop := time.AfterFunc(10*time.Second, cancel)
	_, err = c.Get(ctx, &agentpb.GetRequest{Id: "x"})
	stop.Stop()
	cancel()
	if code := status.Code(err); code != codes.DeadlineExceeded || !strings.Contains(err.Error(), "did not answer Get within 200ms") {
		t.Fatalf("Get of a wedged agent: %v (%v), want DeadlineExceeded from the call timeout, naming it", code, err)
	}

	// A kill's bound counts its grace too.
	_, err = c.Kill(context.Background(), &agentpb.KillRequest{Id: "x", GraceNanos: int64(300 * time.Millisecond)})
	if code := status.Code(err); code != codes.DeadlineExceeded || !strings.Contains(err.Error(), "did not answer Kill within 500ms") {
		t.Fatalf("Kill with a 300ms grace of a wedged agent: %v (%v), want the bound 200ms + the grace", code, err)
	}

	// Wait outlives the bound: it ends when its caller cancels.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(1500*time.Millisecond, cancel)
	_, err = c.Wait(ctx, &agentpb.WaitRequest{Id: "x"})
	if code := status.Code(err); code != codes.Canceled {
		t.Fatalf("Wait: %v (%v), want Canceled by its caller, not the call timeout", code, err)
	}

	if _, err := agentclient.Dial(sock, agentclient.CallTimeout(-time.Second)); err == nil {
		t.Fatal("Dial with a negative call timeout: no error")
	}
}
