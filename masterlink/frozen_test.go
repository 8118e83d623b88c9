package masterlink_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
)

// frozenLink takes an agent's stream and never answers its registration.
type frozenLink struct {
	pb.UnimplementedAgentLinkServer
}

func (frozenLink) Connect(stream pb.AgentLink_ConnectServer) error {
	<-stream.Context().Done()
	return stream.Context().Err()
}

func serveMaster(t *testing.T, link pb.AgentLinkServer, names *testutil.LeaderNamer) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	names.Addr = l.Addr().String()
	s := grpc.NewServer()
	if link != nil {
		pb.RegisterAgentLinkServer(s, link)
	}
	pb.RegisterMastersServer(s, names)
	go func() { _ = s.Serve(l) }() // ends with Stop
	t.Cleanup(s.Stop)
	return names.Addr
}

// logLines records the messages a client logs, in order.
type logLines struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

func (l *logLines) said(prefix string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}

// A leader that froze while an agent registered — its stream taken, no
// Registered answer — must not hold the agent until the keepalive (15 s)
// or the register timeout (30 s) gives up: the agent watches who leads
// from its session's start and leaves for the leader another master
// names. Before, the watch started only once registered: the agent's
// session with the frozen master ended by the keepalive, never by the
// watch.
func TestAgentLeavesALeaderFrozenDuringRegistration(t *testing.T) {
	frozenNames := &testutil.LeaderNamer{Frozen: true}
	frozen := serveMaster(t, frozenLink{}, frozenNames)
	standbyNames := &testutil.LeaderNamer{}
	standby := serveMaster(t, nil, standbyNames)
	next, nextAddr, _ := startScriptedServerWith(t, func(s *grpc.Server, addr string) {
		pb.RegisterMastersServer(s, &testutil.LeaderNamer{Addr: addr, Leader: addr})
	})
	standbyNames.Leader = nextAddr

	logs := &logLines{}
	c, err := masterlink.New(masterlink.Options{Master: frozen + "," + standby + "," + nextAddr, StateDir: t.TempDir(),
		Resources: resources.MustParse("cpus:1;mem:128"), Runner: idleRunner{},
		RetryMin: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond, Log: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	select {
	case <-next.regs:
	case <-time.After(time.Minute): // a bound against a hang, not a timing
		t.Fatal("the agent never registered with the new leader")
	}
	if !logs.said("a new leader was elected and the master in use does not answer as the leader") {
		t.Fatalf("the agent reached the new leader without its watch leaving the frozen one; it logged %q", logs.msgs)
	}
}
