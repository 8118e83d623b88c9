package transport

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/brimnode/brim/internal/masteraddr"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/master"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// TestGateWakesHeldStreamsForALeaderOnly: the streams a standby holds
// wait for a leader to name or for its own election; a change to no
// leader or to this master itself (the expiry of a dead leader's key
// names it a moment before it is elected) does not wake them — 50,000
// held streams woken cost half a second of CPU while the election
// loaded the registry.
func TestGateWakesHeldStreamsForALeaderOnly(t *testing.T) {
	g := &Gate{self: "10.0.0.2:5050", changed: make(chan struct{})}
	for _, c := range []struct {
		leader string
		wake   bool
	}{
		{"10.0.0.1:5050", true},  // another master: named at once
		{"10.0.0.1:5050", false}, // the same again
		{"", false},              // its key expired: still none to name
		{"10.0.0.2:5050", false}, // this master: they wait for lead
		{"10.0.0.3:5050", true},
	} {
		held := g.changed
		g.SetLeader(c.leader)
		select {
		case <-held:
			if !c.wake {
				t.Errorf("setLeader(%q) woke the held streams", c.leader)
			}
		default:
			if c.wake {
				t.Errorf("setLeader(%q) left the held streams waiting", c.leader)
			}
		}
	}
	held := g.changed
	m, err := master.New(master.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g.Lead(New(m, Options{}))
	select {
	case <-held:
	default:
		t.Error("lead left the held streams waiting")
	}
}

// enderFunc is a LeaderEnder.
type enderFunc func(ctx context.Context, addr string) (bool, error)

func (f enderFunc) EndLeader(ctx context.Context, addr string) (bool, error) { return f(ctx, addr) }

// openPort is a loopback address that accepts connections until the
// test ends.
func openPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() { // ends when the listener closes
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return l.Addr().String()
}

// TestGateEndsOnlyALeaderThatRefuses: a standby ends the session of a
// suspected leader only when every further connection attempt is
// refused and etcd still names it — not a leader that accepts (a client
// whose own link broke said it was unreachable), nor one no longer
// named.
func TestGateEndsOnlyALeaderThatRefuses(t *testing.T) {
	dead, alive := testutil.FreeAddr(t), openPort(t)
	for _, c := range []struct {
		name, named, suspect string
		ended                bool
	}{
		{"refusing and named", dead, dead, true},
		{"accepting", alive, alive, false},
		{"refusing, another named meanwhile", alive, dead, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &Gate{self: "127.0.0.1:1", changed: make(chan struct{}), deadHold: time.Minute, suspects: make(chan string, 1)}
			g.SetLeader(c.named)
			ended := make(chan string, 4)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { // owned by the test: waited for below
				defer close(done)
				g.EndDeadLeaders(ctx, enderFunc(func(_ context.Context, addr string) (bool, error) {
					ended <- addr
					return true, nil
				}), slog.New(slog.DiscardHandler))
			}()
			defer func() { cancel(); <-done }()
			g.suspects <- c.suspect
			// The checks take deadLeaderChecks × deadLeaderCheckGap;
			// wait well past them before saying nothing was ended.
			select {
			case addr := <-ended:
				if !c.ended || addr != c.suspect {
					t.Fatalf("ended the session of %s; want %v for %s", addr, c.ended, c.suspect)
				}
			case <-time.After(deadLeaderChecks*deadLeaderCheckGap + 2*time.Second):
				if c.ended {
					t.Fatalf("the session of %s, refusing every connection, was not ended", c.suspect)
				}
			}
		})
	}
}

// TestGateSuspectsARefusingLeader: a stream whose client could not
// reach the named leader makes it a suspect when the standby's own probe
// is refused, and not when the probe connects (the stream is then sent
// to the leader).
func TestGateSuspectsARefusingLeader(t *testing.T) {
	dead, alive := testutil.FreeAddr(t), openPort(t)
	for _, c := range []struct {
		leader  string
		suspect bool
	}{{dead, true}, {alive, false}} {
		g := &Gate{self: "127.0.0.1:1", changed: make(chan struct{}), deadHold: time.Minute, suspects: make(chan string, 1)}
		g.SetLeader(c.leader)
		// As the gRPC server hands the client's metadata to the handler.
		md, _ := metadata.FromOutgoingContext(masteraddr.WithUnreachable(context.Background(), c.leader))
		ctx, cancel := context.WithTimeout(metadata.NewIncomingContext(context.Background(), md), time.Second)
		_, err := g.await(ctx)
		cancel()
		var nl interface{ GRPCStatus() *status.Status }
		if !errors.As(err, &nl) {
			t.Fatalf("await with %s named: %v, want the standby's answer", c.leader, err)
		}
		select {
		case s := <-g.suspects:
			if !c.suspect || s != c.leader {
				t.Errorf("await suspected %s (want %v for %s)", s, c.suspect, c.leader)
			}
		default:
			if c.suspect {
				t.Errorf("await did not suspect %s, which refuses connections", c.leader)
			}
		}
	}
}

// frozenPort is a loopback address whose connections the kernel accepts
// and nobody ever reads: a master stopped with SIGSTOP (or wedged).
func frozenPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().String()
}

// TestGateHoldsTheClientsOfAFrozenLeader: a client that could not reach
// the named leader is held by the standby when the leader's port accepts
// connections but never answers (a frozen process: the kernel completes
// the handshakes), as when the port refuses them — not sent back to the
// frozen leader, where it waited for a link that never answered. A
// leader that answers is named at once, and neither is suspected dead.
func TestGateHoldsTheClientsOfAFrozenLeader(t *testing.T) {
	for _, c := range []struct {
		name   string
		leader string
		held   bool
	}{{"frozen", frozenPort(t), true}, {"answering", openPort(t), false}} {
		t.Run(c.name, func(t *testing.T) {
			g := &Gate{self: "127.0.0.1:1", changed: make(chan struct{}), deadHold: time.Minute, suspects: make(chan string, 1)}
			g.SetLeader(c.leader)
			md, _ := metadata.FromOutgoingContext(masteraddr.WithUnreachable(context.Background(), c.leader))
			ctx, cancel := context.WithTimeout(metadata.NewIncomingContext(context.Background(), md), 2*time.Second)
			defer cancel()
			_, err := g.await(ctx)
			named, ok := masteraddr.Leader(err)
			if !ok {
				t.Fatalf("await: %v, want the standby's answer", err)
			}
			switch {
			case c.held && (named != "" || ctx.Err() == nil):
				t.Fatalf("a frozen leader's client was answered %q before its call ended, want it held", named)
			case !c.held && named != c.leader:
				t.Fatalf("an answering leader's client was answered %q, want the leader %s", named, c.leader)
			}
			select {
			case s := <-g.suspects:
				t.Errorf("await suspected %s, which does not refuse connections", s)
			default:
			}
		})
	}
}

// TestGatedSchedulerServesEveryCall: a highly available master that
// leads serves every unary call of the Scheduler service, not only the
// ones its gate was written with: each gets a domain answer (an unknown
// framework, an empty request), never Unimplemented. SubmitDemand and
// CancelDemand were Unimplemented behind the gate: frameworks could
// submit demands to a single master only.
func TestGatedSchedulerServesEveryCall(t *testing.T) {
	m, err := master.New(master.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := NewGate(GateOptions{Self: "127.0.0.1:1", Scheme: "http", DeadHold: time.Minute})
	g.Lead(New(m, Options{}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	g.RegisterGRPC(srv)
	go func() { _ = srv.Serve(l) }() // owned here: Stop at cleanup ends it
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, md := range pb.Scheduler_ServiceDesc.Methods {
		method := "/" + pb.Scheduler_ServiceDesc.ServiceName + "/" + md.MethodName
		err := cc.Invoke(ctx, method, &pb.Empty{}, &pb.Empty{})
		if status.Code(err) == codes.Unimplemented {
			t.Errorf("%s through the leading gate: %v", md.MethodName, err)
		}
	}
}
