package master_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/transport"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// authCluster is a master with framework authentication: principals ops,
// dev and intern; ops may register as ads and reserve for ads, dev as ads
// and web, intern as nothing.
func authCluster(t *testing.T) *cluster {
	t.Helper()
	return authClusterWith(t, master.Options{}, "127.0.0.1:0")
}

// authClusterWith is authCluster with options, listening on addr.
func authClusterWith(t *testing.T, opts master.Options, addr string) *cluster {
	t.Helper()
	c := newClusterAt(t, opts, addr)
	dir := t.TempDir()
	auth, err := transport.LoadAuth(
		writeFile(t, dir, "creds.json", `[{"principal":"ops","secret":"s3cret"},{"principal":"dev","secret":"pw"},{"principal":"intern","secret":"pw2"}]`),
		writeFile(t, dir, "acls.json", `{"rules":[
			{"principals":["ops"],"action":"register_framework","roles":["ads"]},
			{"principals":["dev"],"action":"register_framework","roles":["ads","web"]},
			{"principals":["ops"],"action":"reserve","roles":["ads"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c.api.SetAuthorizer(auth)
	return c
}

// session is a driver running until the test ends.
type session struct {
	d          *scheduler.Driver
	subscribed chan string
	offers     chan []*pb.Offer
	done       chan error
}

func startSession(t *testing.T, opts scheduler.Options) *session {
	t.Helper()
	d, err := scheduler.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s := &session{d: d, subscribed: make(chan string, 10), offers: make(chan []*pb.Offer, 100), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		s.done <- d.Run(ctx, scheduler.Callbacks{
			Subscribed: func(_ context.Context, id string) { s.subscribed <- id },
			Offers:     func(_ context.Context, os []*pb.Offer) { s.offers <- os },
		})
	}()
	t.Cleanup(func() { cancel(); <-s.done; d.Close() })
	return s
}

// refused waits for Run to give up and checks its code and message.
func (s *session) refused(t *testing.T, code codes.Code, msgParts ...string) {
	t.Helper()
	select {
	case id := <-s.subscribed:
		t.Fatalf("subscribed as %s, want %s", id, code)
	case err := <-s.done:
		s.done <- err // for the cleanup
		if status.Code(err) != code {
			t.Fatalf("run: %v, want %s", err, code)
		}
		for _, p := range msgParts {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("run: %q does not say %q", err, p)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("neither subscribed nor refused")
	}
}

func (s *session) waitSubscribed(t *testing.T) string {
	t.Helper()
	select {
	case id := <-s.subscribed:
		return id
	case err := <-s.done:
		s.done <- err
		t.Fatalf("run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not subscribed")
	}
	return ""
}

func TestFrameworkAuthenticationAndRegisterACL(t *testing.T) {
	c := authCluster(t)
	c.startAgent(t.TempDir(), newFakeRunner())
	base := scheduler.Options{Master: c.addr, Name: "fw", Roles: []string{"ads"}}

	t.Run("no credentials", func(t *testing.T) {
		startSession(t, base).refused(t, codes.Unauthenticated, "framework authentication required", "--principal")
	})
	t.Run("wrong secret", func(t *testing.T) {
		o := base
		o.Principal, o.Secret = "ops", "nope"
		startSession(t, o).refused(t, codes.Unauthenticated, `"ops"`)
	})
	t.Run("unknown principal", func(t *testing.T) {
		o := base
		o.Principal, o.Secret = "mallory", "s3cret"
		startSession(t, o).refused(t, codes.Unauthenticated, `"mallory"`)
	})
	t.Run("role not permitted", func(t *testing.T) {
		o := base
		o.Principal, o.Secret, o.Roles = "ops", "s3cret", []string{"web"}
		startSession(t, o).refused(t, codes.PermissionDenied, `principal "ops"`, `role "web"`, "register_framework")
	})
	t.Run("default role not permitted", func(t *testing.T) {
		o := base
		o.Principal, o.Secret, o.Roles = "intern", "pw2", nil
		startSession(t, o).refused(t, codes.PermissionDenied, `principal "intern"`, `role "default"`)
	})

	// ops may register as ads: it gets offers and launches.
	o := base
	o.Principal, o.Secret = "ops", "s3cret"
	ops := startSession(t, o)
	id := ops.waitSubscribed(t)
	var offer *pb.Offer
	select {
	case os := <-ops.offers:
		offer = os[0]
	case <-time.After(30 * time.Second):
		t.Fatal("no offers")
	}
	ctx := context.Background()
	var fwState master.FrameworkState
	for _, f := range c.m.State().Frameworks {
		if f.ID == id {
			fwState = f
		}
	}
	if len(fwState.Roles) != 1 || fwState.Roles[0] != "ads" || fwState.Principal != "ops" {
		t.Fatalf("framework state %+v", fwState)
	}

	// dev is authenticated and may register as ads, but it is not the
	// framework's principal: its calls for ops's framework are refused.
	cc, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := pb.NewSchedulerClient(cc)
	as := func(p, s string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, transport.AuthMetadata, "Basic "+base64.StdEncoding.EncodeToString([]byte(p+":"+s)))
	}
	_, err = api.Decline(as("dev", "pw"), &pb.DeclineRequest{FrameworkId: id, OfferIds: []string{offer.Id}})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `principal "dev"`) || !strings.Contains(err.Error(), `"ops"`) {
		t.Fatalf("decline by another principal: %v", err)
	}
	_, err = api.Kill(ctx, &pb.KillRequest{FrameworkId: id, TaskId: "x"})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("kill without credentials: %v", err)
	}
	// Failing over ops's framework as dev is refused; a principal in the
	// framework info that is not the caller too.
	stream, err := api.Subscribe(as("dev", "pw"), &pb.SubscribeRequest{Framework: &pb.FrameworkInfo{Id: id, Name: "hijack", Roles: []string{"ads"}}})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "fail over") {
		t.Fatalf("failover by another principal: %v", err)
	}
	stream, err = api.Subscribe(as("dev", "pw"), &pb.SubscribeRequest{Framework: &pb.FrameworkInfo{Name: "liar", Roles: []string{"ads"}, Principal: "ops"}})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `names principal "ops"`) {
		t.Fatalf("subscribe naming another principal: %v", err)
	}

	// RESERVE: on behalf of someone else, or without the reserve ACL,
	// refused without using the offer; the framework's own calls work.
	reserve := func(res string) error {
		return ops.d.Accept(ctx, []string{offer.Id}, []*pb.Operation{{Op: &pb.Operation_Reserve_{Reserve: &pb.Operation_Reserve{Resources: res}}}}, 0)
	}
	if err := reserve("cpus(ads,dev):1"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("reserve on behalf of dev: %v", err)
	}
	// ops steps aside (suppress, then decline) so dev gets the agent below.
	if err := ops.d.Suppress(ctx); err != nil {
		t.Fatalf("suppress by the framework's principal: %v", err)
	}
	if err := ops.d.Decline(ctx, []string{offer.Id}, 0); err != nil {
		t.Fatalf("decline by the framework's principal: %v", err)
	}
	if err := ops.d.Reconcile(ctx); err != nil {
		t.Fatalf("reconcile: %v", err)
	}

	// dev registers as web; it may not reserve (no rule names it).
	o = base
	o.Principal, o.Secret, o.Roles = "dev", "pw", []string{"web"}
	dev := startSession(t, o)
	dev.waitSubscribed(t)
	select {
	case os := <-dev.offers:
		err := dev.d.Accept(ctx, []string{os[0].Id}, []*pb.Operation{{Op: &pb.Operation_Reserve_{Reserve: &pb.Operation_Reserve{Resources: "cpus(web,dev):1"}}}}, 0)
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `principal "dev" may not reserve for role "web"`) {
			t.Fatalf("reserve without the ACL: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no offers for dev")
	}
}

func TestFrameworkAuthOffWithoutAuthorizer(t *testing.T) {
	c := newCluster(t, master.Options{})
	// Credentials sent to a master without an Authorizer are ignored.
	s := startSession(t, scheduler.Options{Master: c.addr, Name: "fw", Principal: "ops", Secret: "whatever"})
	s.waitSubscribed(t)
	if _, err := scheduler.New(scheduler.Options{Master: c.addr, Principal: "a:b"}); err == nil {
		t.Fatal("a principal with ':' accepted")
	}
}
