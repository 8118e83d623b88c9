package scheduler_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/brimnode/brim/internal/masteraddr"
	"github.com/brimnode/brim/internal/testutil"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/scheduler"
)

// fakeMaster serves the scheduler and masters APIs: the leader it names
// (LeaderNamer), and, when it is that leader and not frozen, a
// subscription it holds open.
type fakeMaster struct {
	pb.UnimplementedSchedulerServer
	testutil.LeaderNamer
}

func (m *fakeMaster) Subscribe(_ *pb.SubscribeRequest, stream pb.Scheduler_SubscribeServer) error {
	if m.Frozen || m.Leader != m.Addr {
		<-stream.Context().Done()
		return stream.Context().Err()
	}
	if err := stream.Send(&pb.Event{Event: &pb.Event_Subscribed{Subscribed: &pb.Subscribed{FrameworkId: "fw-1"}}}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func serveFake(t *testing.T, m *fakeMaster) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.Addr = l.Addr().String()
	s := grpc.NewServer()
	pb.RegisterSchedulerServer(s, m)
	pb.RegisterMastersServer(s, m)
	go func() { _ = s.Serve(l) }() // ends with Stop
	t.Cleanup(s.Stop)
}

// A leader that froze while a framework subscribed — the stream open, no
// Subscribed event yet — must not hold the framework until gRPC's
// keepalive gives up (15 s): the framework watches who leads from the
// moment it calls Subscribe and leaves for the leader another master
// names. Before, the watch started only once subscribed, and a framework
// started just before a leader's freeze stayed with it (seen by `make
// chaos`: frameworks reaching the new leader 7–15 s after the election).
func TestFrameworkLeavesALeaderFrozenDuringSubscribe(t *testing.T) {
	frozen := &fakeMaster{LeaderNamer: testutil.LeaderNamer{Frozen: true}}
	standby := &fakeMaster{}
	next := &fakeMaster{}
	for _, m := range []*fakeMaster{frozen, standby, next} {
		serveFake(t, m)
	}
	standby.Leader, next.Leader = next.Addr, next.Addr

	d, err := scheduler.New(scheduler.Options{Master: frozen.Addr + "," + standby.Addr + "," + next.Addr, Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	firstErr := make(chan error, 1)
	subscribed := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- d.Run(ctx, scheduler.Callbacks{
			Disconnected: func(_ context.Context, err error, _ time.Duration) {
				select {
				case firstErr <- err:
				default:
				}
			},
			Subscribed: func(_ context.Context, id string) {
				select {
				case subscribed <- id:
				default:
				}
			},
		})
	}()
	select {
	case err := <-firstErr:
		var moved *masteraddr.LeaderMovedError
		if !errors.As(err, &moved) || moved.Leader != next.Addr {
			t.Fatalf("the first subscription ended with %v, want the leader moved to %s", err, next.Addr)
		}
	case <-time.After(time.Minute): // a bound against a hang, not a timing
		t.Fatal("the framework never left the frozen leader")
	}
	select {
	case id := <-subscribed:
		if id != "fw-1" {
			t.Fatalf("subscribed as %q", id)
		}
	case <-time.After(time.Minute):
		t.Fatal("the framework never subscribed with the new leader")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}
