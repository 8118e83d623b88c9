package master

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// TestAdmissionBoundsRegistrations: with every registration slot held by
// a stream that sends nothing (or a Register and never its task pages),
// another agent waits; once the register timeout passes the silent
// streams give their slots back, the waiting agent registers, and a
// late registration still goes through.
func TestAdmissionBoundsRegistrations(t *testing.T) {
	const wait = 1500 * time.Millisecond
	m, err := New(Options{HeartbeatInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m.admission = newAdmission(2, wait)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(masterlink.ServerOptions()...)
	m.RegisterGRPC(srv)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = srv.Serve(l) }()
	go func() { defer wg.Done(); _ = m.Run(ctx) }()
	t.Cleanup(func() { cancel(); srv.Stop(); wg.Wait() })

	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
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
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.agents[id] != nil
	}

	silent := connect() // opens the stream, sends nothing (yet)
	pages := connect()
	register(pages, "pages", true) // and never the pages
	deadline := time.Now().Add(20 * time.Second)
	for m.admission.inUse() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d registrations admitted, want the 2 slots taken", m.admission.inUse())
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
	if n := m.admission.inUse(); n != 0 {
		t.Errorf("%d registration slots held after every registration ended or timed out", n)
	}
}
