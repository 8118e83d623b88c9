package scheduler_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// duplicatingMaster subscribes the framework and sends every update twice
// (as after an agent retry), recording acknowledgements. It ends the first
// stream after the updates to check that the driver re-subscribes with
// its framework ID.
type duplicatingMaster struct {
	pb.UnimplementedSchedulerServer
	mu    sync.Mutex
	acks  []string
	subs  []string // framework IDs the subscriptions carried
	acked chan struct{}
}

func (m *duplicatingMaster) Subscribe(req *pb.SubscribeRequest, stream pb.Scheduler_SubscribeServer) error {
	m.mu.Lock()
	m.subs = append(m.subs, req.GetFramework().GetId())
	n := len(m.subs)
	m.mu.Unlock()
	if err := stream.Send(&pb.Event{Event: &pb.Event_Subscribed{Subscribed: &pb.Subscribed{FrameworkId: "fw-1"}}}); err != nil {
		return err
	}
	if n > 1 {
		<-stream.Context().Done()
		return nil
	}
	for _, id := range []string{"u1", "u1", "u2", "u1"} {
		ev := &pb.Event{Event: &pb.Event_Update{Update: &pb.TaskStatus{TaskId: "t", AgentId: "a", State: pb.TaskState_TASK_RUNNING, Uuid: id}}}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	<-m.acked
	return errors.New("stream broken on purpose")
}

func (m *duplicatingMaster) Acknowledge(_ context.Context, r *pb.AcknowledgeRequest) (*pb.Empty, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.acks = append(m.acks, r.Uuid)
	if len(m.acks) == 4 {
		close(m.acked)
	}
	return &pb.Empty{}, nil
}

func TestDuplicatesDeliveredOnceAcknowledgedAlwaysResubscribeWithID(t *testing.T) {
	m := &duplicatingMaster{acked: make(chan struct{})}
	addr := serveScheduler(t, m)

	d, err := scheduler.New(scheduler.Options{Master: addr, Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Kill(context.Background(), "t"); !errors.Is(err, scheduler.ErrNotSubscribed) {
		t.Fatalf("kill before subscribing: %v, want ErrNotSubscribed", err)
	}
	var mu sync.Mutex
	var got []string
	resubscribed := make(chan struct{})
	subs := 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(ctx, scheduler.Callbacks{
			Subscribed: func(context.Context, string) {
				subs++
				if subs == 2 {
					close(resubscribed)
				}
			},
			Update: func(_ context.Context, st *pb.TaskStatus) {
				mu.Lock()
				got = append(got, st.Uuid)
				mu.Unlock()
			},
		})
	}()
	select {
	case <-resubscribed:
	case <-time.After(30 * time.Second):
		t.Fatal("driver did not re-subscribe")
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != "u1" || got[1] != "u2" {
		t.Fatalf("delivered %v, want [u1 u2]", got)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.acks) != 4 {
		t.Fatalf("acknowledged %v, want every copy (4)", m.acks)
	}
	if len(m.subs) < 2 || m.subs[0] != "" || m.subs[1] != "fw-1" {
		t.Fatalf("subscriptions carried IDs %v, want first none then fw-1", m.subs)
	}
}

func TestJitter(t *testing.T) {
	for _, d := range []time.Duration{time.Millisecond, 200 * time.Millisecond, 5 * time.Second} {
		seen := map[time.Duration]bool{}
		for i := 0; i < 1000; i++ {
			j := scheduler.Jitter(d)
			if j < d/2 || j >= d+d/2 {
				t.Fatalf("jitter(%v) = %v, outside [%v, %v)", d, j, d/2, d+d/2)
			}
			seen[j] = true
		}
		if len(seen) < 10 {
			t.Errorf("jitter(%v): only %d distinct delays in 1000", d, len(seen))
		}
	}
}

// TestRunReportsUnreachableMaster: Run does not wait silently for a master
// that is not there; Disconnected gets the dial error, again and again.
func TestRunReportsUnreachableMaster(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	d, err := scheduler.New(scheduler.Options{Master: addr, Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 10)
	done := make(chan error, 1)
	go func() {
		done <- d.Run(ctx, scheduler.Callbacks{Disconnected: func(_ context.Context, err error, retry time.Duration) {
			if retry <= 0 {
				err = errors.New("no retry delay")
			}
			select {
			case errs <- err:
			default:
			}
		}})
	}()
	for i := 0; i < 2; i++ {
		err := <-errs
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("attempt %d: %v, want Unavailable: connection refused", i, err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}
