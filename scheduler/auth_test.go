package scheduler_test

import (
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// authRecordingMaster records the authorization metadata of each call and
// refuses subscriptions without it, as the master does.
type authRecordingMaster struct {
	pb.UnimplementedSchedulerServer
	mu   sync.Mutex
	seen map[string]string // RPC → authorization metadata
}

func (m *authRecordingMaster) record(ctx context.Context, rpc string) string {
	md, _ := metadata.FromIncomingContext(ctx)
	v := strings.Join(md.Get("authorization"), ",")
	m.mu.Lock()
	m.seen[rpc] = v
	m.mu.Unlock()
	return v
}

func (m *authRecordingMaster) Subscribe(_ *pb.SubscribeRequest, stream pb.Scheduler_SubscribeServer) error {
	if m.record(stream.Context(), "Subscribe") == "" {
		return status.Error(codes.Unauthenticated, "framework authentication required")
	}
	if err := stream.Send(&pb.Event{Event: &pb.Event_Subscribed{Subscribed: &pb.Subscribed{FrameworkId: "fw-1"}}}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func (m *authRecordingMaster) Kill(ctx context.Context, _ *pb.KillRequest) (*pb.Empty, error) {
	m.record(ctx, "Kill")
	return &pb.Empty{}, nil
}

func TestPrincipalSentWithEveryCallAndUnauthenticatedEndsRun(t *testing.T) {
	m := &authRecordingMaster{seen: map[string]string{}}
	addr := serveScheduler(t, m)

	// Without a principal nothing is sent, and Run gives up at once on
	// Unauthenticated (no retry loop).
	anon, err := scheduler.New(scheduler.Options{Master: addr, Name: "anon"})
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if err := anon.Run(context.Background(), scheduler.Callbacks{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("run without credentials: %v, want Unauthenticated", err)
	}

	d, err := scheduler.New(scheduler.Options{Master: addr, Name: "t", Principal: "ops", Secret: "s3:cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithCancel(context.Background())
	subscribed := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- d.Run(ctx, scheduler.Callbacks{Subscribed: func(context.Context, string) { close(subscribed) }})
	}()
	select {
	case <-subscribed:
	case err := <-done:
		t.Fatalf("run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not subscribed")
	}
	if err := d.Kill(ctx, "task"); err != nil {
		t.Fatalf("kill: %v", err)
	}
	cancel()
	<-done
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:s3:cret"))
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rpc := range []string{"Subscribe", "Kill"} {
		if m.seen[rpc] != want {
			t.Errorf("%s carried authorization %q, want %q", rpc, m.seen[rpc], want)
		}
	}
}
