package masterlink_test

import (
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/brimnode/brim/internal/masteraddr"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// standbyOf answers as a standby does while a dead leader's key lingers
// in etcd: it names the leader to a client that does not say it could
// not reach it, and holds the one that does until the client gives up.
type standbyOf struct {
	pb.UnimplementedAgentLinkServer
	leader string
	seen   chan string // the unreachable leader each stream named
}

func (s *standbyOf) Connect(stream pb.AgentLink_ConnectServer) error {
	dead := masteraddr.UnreachableFrom(stream.Context())
	s.seen <- dead
	if dead != s.leader {
		return masteraddr.NotLeader(s.leader)
	}
	<-stream.Context().Done()
	return nil
}

// TestLeaderLostGoesToTheStandbyOnce: when the link to the leader an
// agent registered with breaks, the agent tells the standby it reaches
// next that the leader is unreachable, and is held there. Before, a
// listed leader that failed was not remembered: the standby sent the
// agent back to the dead leader, which it then tried twice before it
// came back — 3.3 streams per agent at 50,000 agents, most of the
// failover's CPU spent before the election.
func TestLeaderLostGoesToTheStandbyOnce(t *testing.T) {
	leader, leaderAddr, leaderSrv := startScriptedServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sb := &standbyOf{leader: leaderAddr, seen: make(chan string, 10)}
	srv := grpc.NewServer()
	pb.RegisterAgentLinkServer(srv, sb)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)

	run(t, newClient(t, leaderAddr+","+l.Addr().String(), t.TempDir()))
	waitRegister(t, leader, 10*time.Second, "with the leader")
	leaderSrv.Stop() // as a killed master: its connections closed

	select {
	case dead := <-sb.seen:
		if dead != leaderAddr {
			t.Fatalf("the agent's first stream to the standby named %q unreachable, want the dead leader %s", dead, leaderAddr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not come to the standby within 10s")
	}
	select {
	case dead := <-sb.seen:
		t.Fatalf("the agent opened another stream to the standby (unreachable %q): it was not held", dead)
	case <-time.After(time.Second):
	}
}
