package scheduler_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// resizeMaster subscribes the framework and records UpdateTask calls,
// refusing those that name offer "stale".
type resizeMaster struct {
	pb.UnimplementedSchedulerServer
	mu   sync.Mutex
	reqs []*pb.UpdateTaskRequest
}

func (m *resizeMaster) Subscribe(_ *pb.SubscribeRequest, stream pb.Scheduler_SubscribeServer) error {
	if err := stream.Send(&pb.Event{Event: &pb.Event_Subscribed{Subscribed: &pb.Subscribed{FrameworkId: "fw-1"}}}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func (m *resizeMaster) UpdateTask(_ context.Context, r *pb.UpdateTaskRequest) (*pb.Empty, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, r)
	for _, o := range r.OfferIds {
		if o == "stale" {
			return nil, status.Error(codes.FailedPrecondition, "update task t: offer \"stale\": unknown or stale offer")
		}
	}
	return &pb.Empty{}, nil
}

// serveScheduler serves srv on a loopback port until the test ends and
// returns its address.
func serveScheduler(t *testing.T, srv pb.SchedulerServer) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterSchedulerServer(s, srv)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

func TestUpdateTask(t *testing.T) {
	m := &resizeMaster{}
	addr := serveScheduler(t, m)
	d, err := scheduler.New(scheduler.Options{Master: addr, Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	if err := d.UpdateTask(ctx, "t", "cpus:2;mem:256", []string{"o1"}); !errors.Is(err, scheduler.ErrNotSubscribed) {
		t.Fatalf("update before subscribing: %v, want ErrNotSubscribed", err)
	}
	subscribed := make(chan struct{})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(rctx, scheduler.Callbacks{Subscribed: func(context.Context, string) { close(subscribed) }})
	}()
	defer func() { cancel(); <-done }()
	select {
	case <-subscribed:
	case <-time.After(30 * time.Second):
		t.Fatal("not subscribed")
	}
	if err := d.UpdateTask(ctx, "t", "cpus:2;mem:256", []string{"o1", "o2"}); err != nil {
		t.Fatal(err)
	}
	if err := d.UpdateTask(ctx, "t", "cpus:3;mem:256", []string{"stale"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("stale offer: %v, want the master's FailedPrecondition", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.reqs[0]
	if len(m.reqs) != 2 || r.FrameworkId != "fw-1" || r.TaskId != "t" || r.Resources != "cpus:2;mem:256" || len(r.OfferIds) != 2 || r.OfferIds[1] != "o2" {
		t.Fatalf("requests: %v", m.reqs)
	}
}
