package master_test

import (
	"context"
	"testing"
	"time"

	"github.com/brimnode/brim/master"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func (f *framework) nextRescind(t *testing.T) string {
	t.Helper()
	select {
	case id := <-f.rescinds:
		return id
	case <-time.After(30 * time.Second):
		t.Fatal("no rescind")
		return ""
	}
}

func TestOfferTimeoutRescinds(t *testing.T) {
	c := newCluster(t, master.Options{OfferTimeout: 200 * time.Millisecond})
	c.startAgent(t.TempDir(), newFakeRunner())
	f := c.startFramework("fw")
	o := f.nextOffers(t)[0]
	if id := f.nextRescind(t); id != o.Id {
		t.Fatalf("rescinded %s, want %s", id, o.Id)
	}
	if err := f.d.Launch(context.Background(), []string{o.Id}, []*pb.TaskInfo{{TaskId: "t", Resources: "cpus:1;mem:64", Command: []string{"true"}}}, 0); err == nil {
		t.Fatal("launch on a rescinded offer succeeded")
	}
}

func TestDeclineFilterAndRevive(t *testing.T) {
	c := newCluster(t, master.Options{})
	c.startAgent(t.TempDir(), newFakeRunner())
	f := c.startFramework("fw")
	o := f.nextOffers(t)[0]
	ctx := context.Background()
	if err := f.d.Decline(ctx, []string{o.Id}, 3600); err != nil {
		t.Fatal(err)
	}
	if err := f.d.Decline(ctx, []string{o.Id}, 1); err == nil {
		t.Fatal("declined the same offer twice")
	}
	// Filtered for an hour: only Revive brings the agent back.
	if err := f.d.Revive(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.nextOffers(t)[0]; got.AgentId != o.AgentId || got.Id == o.Id {
		t.Fatalf("after revive: offer %s of %s", got.Id, got.AgentId)
	}
}

// TestDeclineSameOfferTwiceInOneCall: a DECLINE naming one offer twice
// is refused as invalid, and the offer stays usable. Before, the second
// mention dereferenced the offer the first had removed: a panic that
// ended the master process (gRPC does not recover handlers).
func TestDeclineSameOfferTwiceInOneCall(t *testing.T) {
	c := newCluster(t, master.Options{})
	c.startAgent(t.TempDir(), newFakeRunner())
	f := c.startFramework("fw")
	o := f.nextOffers(t)[0]
	ctx := context.Background()
	err := f.d.Decline(ctx, []string{o.Id, o.Id}, 1)
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("decline [%s %s]: %v, want InvalidArgument", o.Id, o.Id, err)
	}
	if err := f.d.Launch(ctx, []string{o.Id}, []*pb.TaskInfo{{TaskId: "t", Resources: "cpus:1;mem:64", Command: []string{"true"}}}, 0); err != nil {
		t.Fatalf("the offer after a refused decline: %v", err)
	}
}

func TestAcceptReserveThenOfferedReserved(t *testing.T) {
	c := newCluster(t, master.Options{})
	c.startAgent(t.TempDir(), newFakeRunner())
	f := c.startFramework("fw", "ads")
	o := f.nextOffers(t)[0]
	ctx := context.Background()
	bad := []*pb.Operation{{Op: &pb.Operation_Reserve_{Reserve: &pb.Operation_Reserve{Resources: "cpus(web,me):1"}}}}
	if err := f.d.Accept(ctx, []string{o.Id}, bad, 0); err == nil {
		t.Fatal("reserved for a role the framework does not have")
	}
	rev := []*pb.Operation{{Op: &pb.Operation_Reserve_{Reserve: &pb.Operation_Reserve{Resources: "cpus(ads,me){REV}:1"}}}}
	if err := f.d.Accept(ctx, []string{o.Id}, rev, 0); err == nil {
		t.Fatal("reserved revocable resources")
	}
	ok := []*pb.Operation{{Op: &pb.Operation_Reserve_{Reserve: &pb.Operation_Reserve{Resources: "cpus(ads,me):1;mem(ads,me):512"}}}}
	if err := f.d.Accept(ctx, []string{o.Id}, ok, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.d.Revive(ctx); err != nil {
		t.Fatal(err)
	}
	got := resources.MustParse(f.nextOffers(t)[0].Resources)
	if want := resources.MustParse("cpus(ads,me):1;mem(ads,me):512"); !got.Contains(want) {
		t.Fatalf("offer %s does not hold the reservation %s", got, want)
	}
	if st := c.m.State(); len(st.Agents) != 1 || st.Agents[0].Reserved == "" {
		t.Fatalf("state without the reservation: %+v", st.Agents)
	}
}

func TestRevocableShrinkRescinds(t *testing.T) {
	c := newCluster(t, master.Options{})
	r := newFakeRunner()
	c.startAgent(t.TempDir(), r)
	d, err := scheduler.New(scheduler.Options{Master: c.addr, Name: "be", Revocable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	offers := make(chan []*pb.Offer, 10)
	rescinds := make(chan string, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(ctx, scheduler.Callbacks{
			Offers:  func(_ context.Context, os []*pb.Offer) { offers <- os },
			Rescind: func(_ context.Context, id string) { rescinds <- id },
		})
	}()
	defer func() { cancel(); <-done }()
	first := <-offers // the agent's non-revocable resources
	r.mu.Lock()
	cl := r.client
	r.mu.Unlock()
	if err := cl.SetRevocable(resources.MustParse("cpus{REV}:2;mem{REV}:512")); err != nil {
		t.Fatal(err)
	}
	var revOffer *pb.Offer
	for revOffer == nil {
		select {
		case os := <-offers:
			for _, o := range os {
				if !resources.MustParse(o.Resources).Revocable().IsEmpty() {
					revOffer = o
				}
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no revocable offer (first offer %s)", first[0].Resources)
		}
	}
	if err := cl.SetRevocable(resources.MustParse("cpus{REV}:0.5")); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-rescinds:
		if id != revOffer.Id {
			t.Fatalf("rescinded %s, want the revocable offer %s", id, revOffer.Id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("revocable offer not rescinded when the revocable resources shrank")
	}
}

func TestFrameworkFailoverTimeoutKillsTasks(t *testing.T) {
	c := newCluster(t, master.Options{})
	r := newFakeRunner()
	c.startAgent(t.TempDir(), r)
	d, err := scheduler.New(scheduler.Options{Master: c.addr, Name: "short", FailoverTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	offers := make(chan []*pb.Offer, 10)
	running := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(ctx, scheduler.Callbacks{
			Offers: func(_ context.Context, os []*pb.Offer) { offers <- os },
			Update: func(_ context.Context, st *pb.TaskStatus) {
				if st.State == pb.TaskState_TASK_RUNNING {
					running <- struct{}{}
				}
			},
		})
	}()
	o := (<-offers)[0]
	if err := d.Launch(ctx, []string{o.Id}, []*pb.TaskInfo{{TaskId: "orphan", Resources: "cpus:1;mem:64", Command: []string{"sleep", "1000"}}}, 0); err != nil {
		t.Fatal(err)
	}
	<-running
	cancel() // the framework goes away and does not come back
	<-done
	d.Close()
	r.waitKilled(t, "orphan", 30*time.Second, "after the failover timeout")
	if fws := c.m.State().Frameworks; len(fws) != 0 {
		t.Fatalf("framework still registered: %+v", fws)
	}
}

// An empty RESERVE is refused (it crashed the master), and a RESERVE
// naming two of the framework's roles reserves each part for its own role
// (the whole went to the first one).
func TestAcceptReserveEmptyAndTwoRoles(t *testing.T) {
	c := newCluster(t, master.Options{})
	c.startAgent(t.TempDir(), newFakeRunner())
	f := c.startFramework("fw", "ads", "web")
	o := f.nextOffers(t)[0]
	ctx := context.Background()
	for _, text := range []string{"", ";"} {
		empty := []*pb.Operation{{Op: &pb.Operation_Reserve_{Reserve: &pb.Operation_Reserve{Resources: text}}}}
		if err := f.d.Accept(ctx, []string{o.Id}, empty, 0); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("empty reserve %q: %v, want InvalidArgument", text, err)
		}
	}
	two := []*pb.Operation{{Op: &pb.Operation_Reserve_{Reserve: &pb.Operation_Reserve{Resources: "cpus(ads,me):1;cpus(web,me):1"}}}}
	if err := f.d.Accept(ctx, []string{o.Id}, two, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.d.Revive(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]resources.Resources{"ads": resources.MustParse("cpus(ads,me):1"), "web": resources.MustParse("cpus(web,me):1")}
	seen := map[string]bool{}
	for len(seen) < 2 {
		for _, o := range f.nextOffers(t) {
			res := resources.MustParse(o.Resources)
			if r := res.Reserved(o.Role); !r.IsEmpty() {
				if !r.Equal(want[o.Role]) {
					t.Fatalf("offer for %s holds the reservation %s, want %s", o.Role, r, want[o.Role])
				}
				seen[o.Role] = true
			}
			_ = f.d.Decline(ctx, []string{o.Id}, 0)
		}
	}
	st := c.m.State()
	if got := resources.MustParse(st.Agents[0].Reserved); !got.Equal(resources.MustParse("cpus(ads,me):1;cpus(web,me):1")) {
		t.Fatalf("reserved %s", st.Agents[0].Reserved)
	}
}
