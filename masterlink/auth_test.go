package masterlink_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// gateMaster records the authorization metadata of every stream and
// refuses registrations with refuse's code while it is set.
type gateMaster struct {
	pb.UnimplementedAgentLinkServer
	mu     sync.Mutex
	refuse codes.Code // codes.OK: accept
	auths  chan []string
	kick   chan struct{} // ends the live stream
}

func (m *gateMaster) setRefuse(c codes.Code) {
	m.mu.Lock()
	m.refuse = c
	m.mu.Unlock()
}

func (m *gateMaster) Connect(stream pb.AgentLink_ConnectServer) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	m.auths <- md.Get("authorization")
	if _, err := stream.Recv(); err != nil {
		return err
	}
	m.mu.Lock()
	refuse := m.refuse
	m.mu.Unlock()
	if refuse != codes.OK {
		return status.Error(refuse, "refused by the test")
	}
	if err := stream.Send(&pb.MasterMessage{Msg: &pb.MasterMessage_Registered{Registered: &pb.Registered{AgentId: "a1", HeartbeatIntervalNanos: int64(time.Hour)}}}); err != nil {
		return err
	}
	select {
	case <-stream.Context().Done():
	case <-m.kick:
	}
	return nil
}

func startGate(t *testing.T, refuse codes.Code) (*gateMaster, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &gateMaster{refuse: refuse, auths: make(chan []string, 1000), kick: make(chan struct{}, 1)}
	s := grpc.NewServer()
	pb.RegisterAgentLinkServer(s, m)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return m, l.Addr().String()
}

func newAuthClient(t *testing.T, addr, principal, secret string) *masterlink.Client {
	t.Helper()
	c, err := masterlink.New(masterlink.Options{Master: addr, StateDir: t.TempDir(), Resources: resources.MustParse("cpus:1;mem:128"),
		Runner: idleRunner{}, Principal: principal, Secret: masterlink.NewSecret(secret), ReconnectMin: 10 * time.Millisecond, ReconnectMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func nextAuth(t *testing.T, m *gateMaster) []string {
	t.Helper()
	select {
	case a := <-m.auths:
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("no stream")
		return nil
	}
}

func TestCredentialsOnTheStream(t *testing.T) {
	m, addr := startGate(t, codes.OK)
	run(t, newAuthClient(t, addr, "agent1", "s3:cret"))
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("agent1:s3:cret"))
	if got := nextAuth(t, m); len(got) != 1 || got[0] != want {
		t.Fatalf("authorization metadata %q, want %q", got, want)
	}

	m2, addr2 := startGate(t, codes.OK)
	run(t, newAuthClient(t, addr2, "", ""))
	if got := nextAuth(t, m2); len(got) != 0 {
		t.Fatalf("authorization metadata %q sent without a principal", got)
	}

	if _, err := masterlink.New(masterlink.Options{Master: addr, StateDir: t.TempDir(), Runner: idleRunner{}, Principal: "a:b"}); err == nil {
		t.Fatal("a principal with ':' was accepted")
	}
}

// TestFirstRegistrationRejectedEndsRun: a refusal before the agent ever
// registered ends Run with ErrRejected and the master's status.
func TestFirstRegistrationRejectedEndsRun(t *testing.T) {
	for _, code := range []codes.Code{codes.Unauthenticated, codes.PermissionDenied} {
		_, addr := startGate(t, code)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // bounds a Run that would retry
		err := newAuthClient(t, addr, "agent1", "bad").Run(ctx)
		cancel()
		if !errors.Is(err, masterlink.ErrRejected) || status.Code(err) != code {
			t.Fatalf("run: %v, want %s wrapping ErrRejected", err, code)
		}
	}
}

// TestRejectedAfterRegistrationRetries: once registered, a refusal (the
// master's credentials changed) is retried until the master accepts the
// agent again; Run does not end.
func TestRejectedAfterRegistrationRetries(t *testing.T) {
	m, addr := startGate(t, codes.OK)
	c := newAuthClient(t, addr, "agent1", "s")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	nextAuth(t, m)
	waitConnected(t, c, done)

	// Break the stream while the master refuses: the client keeps trying.
	m.setRefuse(codes.Unauthenticated)
	m.kick <- struct{}{}
	for range 3 {
		nextAuth(t, m)
	}
	select {
	case err := <-done:
		t.Fatalf("run ended after a refusal that followed a registration: %v", err)
	default:
	}
	m.setRefuse(codes.OK)
	waitConnected(t, c, done)
}

func waitConnected(t *testing.T, c *masterlink.Client, done <-chan error) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !c.Connected() {
		select {
		case err := <-done:
			t.Fatalf("run: %v", err)
		case <-deadline:
			t.Fatal("not connected")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestSecretRotates: a new secret (an agent's reload) is sent from the
// next stream on, without a restart of the link.
func TestSecretRotates(t *testing.T) {
	m, addr := startGate(t, codes.OK)
	secret := masterlink.NewSecret("old")
	c, err := masterlink.New(masterlink.Options{Master: addr, StateDir: t.TempDir(), Resources: resources.MustParse("cpus:1;mem:128"),
		Runner: idleRunner{}, Principal: "agent1", Secret: secret, ReconnectMin: 10 * time.Millisecond, ReconnectMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte("agent1:"+s)) }
	if got := nextAuth(t, m); len(got) != 1 || got[0] != basic("old") {
		t.Fatalf("first stream's authorization %q, want %q", got, basic("old"))
	}
	waitConnected(t, c, done)
	secret.Set("new")
	m.kick <- struct{}{} // the master ends the stream; the client reconnects
	if got := nextAuth(t, m); len(got) != 1 || got[0] != basic("new") {
		t.Fatalf("authorization after the rotation %q, want %q", got, basic("new"))
	}
}
