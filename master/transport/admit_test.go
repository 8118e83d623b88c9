package transport

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
)

// admittingMaster serves a master with opts, admitting slots
// registrations at once with wait, over gRPC with masterlink's server
// options; it returns a connection to it. Both end at cleanup, after
// stop (nil: none) — what the test must undo before the master stops.
func admittingMaster(t *testing.T, opts master.Options, slots int, wait time.Duration, stop func()) (*master.Master, *grpc.ClientConn) {
	t.Helper()
	opts.RegistrationSlots, opts.RegisterTimeout = slots, wait
	m, err := master.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(masterlink.ServerOptions()...)
	New(m, Options{}).RegisterGRPC(srv)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = srv.Serve(l) }()
	go func() { defer wg.Done(); _ = m.Run(ctx) }()
	t.Cleanup(func() {
		if stop != nil {
			stop()
		}
		cancel()
		srv.Stop()
		wg.Wait()
	})
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return m, cc
}

// TestAdmissionBoundsRegistrations: with every registration slot held by
// a stream that sends nothing (or a Register and never its task pages),
// another agent waits; once the register timeout passes the silent
// streams give their slots back, the waiting agent registers, and a
// late registration still goes through.
func TestAdmissionBoundsRegistrations(t *testing.T) {
	const wait = 1500 * time.Millisecond
	m, cc := admittingMaster(t, master.Options{HeartbeatInterval: 100 * time.Millisecond}, 2, wait, nil)
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	connect := func() pb.AgentLink_ConnectClient {
		t.Helper()
		s, err := pb.NewAgentLinkClient(cc).Connect(sctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	register := func(s pb.AgentLink_ConnectClient, id string, more bool) {
		t.Helper()
		err := s.Send(&pb.AgentMessage{Msg: &pb.AgentMessage_Register{Register: &pb.Register{
			AgentId: id, Hostname: id, Resources: "cpus:1;mem:64", MoreTasks: more}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	registered := func(s pb.AgentLink_ConnectClient, who string) {
		t.Helper()
		msg, err := s.Recv()
		if err != nil || msg.GetRegistered() == nil {
			t.Fatalf("%s: %v, %v; want Registered", who, msg, err)
		}
	}
	known := func(id string) bool {
		for _, a := range m.State().Agents {
			if a.ID == id {
				return true
			}
		}
		return false
	}
	inUse := func() int { return m.Metrics().RegistrationsAdmitted }

	silent := connect() // opens the stream, sends nothing (yet)
	pages := connect()
	register(pages, "pages", true) // and never the pages
	deadline := time.Now().Add(20 * time.Second)
	for inUse() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d registrations admitted, want the 2 slots taken", inUse())
		}
		time.Sleep(5 * time.Millisecond)
	}
	waiting := connect()
	register(waiting, "waiting", false)
	time.Sleep(300 * time.Millisecond) // well within the wait
	if known("waiting") {
		t.Fatal("an agent registered while every registration slot was held")
	}
	registered(waiting, "the waiting agent, once the silent streams gave their slots back")
	register(silent, "late", false)
	registered(silent, "a registration that came after its slot was given back")
	if known("pages") {
		t.Error("an agent registered without its last task page")
	}
	// The stream without its last page gives its slot back at its own
	// timeout, which may come a moment after the others'.
	for deadline := time.Now().Add(10 * time.Second); inUse() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d registration slots held after every registration ended or timed out", inUse())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// blockingStore holds the first write of agent "slow" until release is
// closed; everything else is kept nowhere.
type blockingStore struct {
	release chan struct{}
	writing chan struct{} // closed when the write of "slow" began
}

func (s *blockingStore) Load() (*master.Persisted, error) { return &master.Persisted{}, nil }
func (s *blockingStore) PutAgent(id string, _ master.PersistedAgent) error {
	if id == "slow" {
		close(s.writing)
		<-s.release
	}
	return nil
}
func (s *blockingStore) PutFramework(string, master.PersistedFramework) error { return nil }
func (s *blockingStore) DeleteFramework(string) error                         { return nil }
func (s *blockingStore) PutReservations(string, resources.Resources) error    { return nil }
func (s *blockingStore) PutQuota(string, allocator.Quota) error               { return nil }
func (s *blockingStore) PutWeights(map[string]float64) error                  { return nil }
func (s *blockingStore) PutDemand(*demand.Demand) error                       { return nil }

// TestAdmissionNotHeldOverTheStore: a registration gives its slot back
// once the registry has the agent, before the store's write of a new
// agent: another agent registers while that write waits. (Held over
// etcd's writes, too few were in flight to fill its transactions: 10,000
// first registrations took twice as long.)
func TestAdmissionNotHeldOverTheStore(t *testing.T) {
	store := &blockingStore{release: make(chan struct{}), writing: make(chan struct{})}
	released := false
	_, cc := admittingMaster(t, master.Options{HeartbeatInterval: 100 * time.Millisecond, Store: store}, 1, time.Minute, func() {
		if !released {
			close(store.release)
		}
	})
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	register := func(id string) pb.AgentLink_ConnectClient {
		t.Helper()
		s, err := pb.NewAgentLinkClient(cc).Connect(sctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&pb.AgentMessage{Msg: &pb.AgentMessage_Register{Register: &pb.Register{
			AgentId: id, Hostname: id, Resources: "cpus:1;mem:64"}}}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	slow := register("slow")
	select {
	case <-store.writing:
	case <-sctx.Done():
		t.Fatal("the store never got the new agent's write")
	}
	fast := register("fast")
	if msg, err := fast.Recv(); err != nil || msg.GetRegistered() == nil {
		t.Fatalf("an agent while another's store write waited: %v, %v; want Registered", msg, err)
	}
	close(store.release)
	released = true
	if msg, err := slow.Recv(); err != nil || msg.GetRegistered() == nil {
		t.Fatalf("the agent whose write waited: %v, %v; want Registered once written", msg, err)
	}
}
