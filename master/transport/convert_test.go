package transport

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/brimnode/brim/master"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"google.golang.org/protobuf/proto"
)

func TestAcceptRequestFromPB(t *testing.T) {
	req := acceptRequestFromPB(&pb.AcceptRequest{
		FrameworkId: "fw", OfferIds: []string{"o1"}, Filters: &pb.Filters{RefuseSeconds: 2},
		Operations: []*pb.Operation{
			{Op: &pb.Operation_Launch_{Launch: &pb.Operation_Launch{Tasks: []*pb.TaskInfo{
				{TaskId: "t1", Name: "n", Resources: "cpus:1", Command: []string{"true"}, Env: []string{"A=1"}, Labels: map[string]string{"k": "v"},
					Image: "registry.example.com/app:1", ImagePull: "always", ImageReadWrite: true},
			}}}},
			{Op: &pb.Operation_Reserve_{Reserve: &pb.Operation_Reserve{Resources: "cpus(ads,ops):1"}}},
			{Op: &pb.Operation_Unreserve_{Unreserve: &pb.Operation_Unreserve{Resources: "cpus(ads,ops):1"}}},
			{},
		},
	})
	if req.FrameworkID != "fw" || len(req.OfferIDs) != 1 || req.Refuse == nil || *req.Refuse != 2*time.Second {
		t.Fatalf("request %+v", req)
	}
	if len(req.Operations) != 4 {
		t.Fatalf("%d operations, want 4", len(req.Operations))
	}
	l := req.Operations[0]
	if l.Kind != master.OpLaunch || len(l.Tasks) != 1 || l.Tasks[0].Resources != "cpus:1" {
		t.Fatalf("launch %+v", l)
	}
	if ti := l.Tasks[0].Info; ti.ID != "t1" || ti.Name != "n" || ti.Command[0] != "true" || ti.Env[0] != "A=1" || ti.Labels["k"] != "v" {
		t.Errorf("task info %+v", ti)
	}
	if req.Operations[1].Kind != master.OpReserve || req.Operations[1].Resources != "cpus(ads,ops):1" || req.Operations[2].Kind != master.OpUnreserve {
		t.Errorf("reserve/unreserve %+v %+v", req.Operations[1], req.Operations[2])
	}
	if req.Operations[3].Kind != master.OpUnknown {
		t.Errorf("an empty operation is %v, want opUnknown", req.Operations[3].Kind)
	}
	// What the agent gets back is the task as described, with the master's fields.
	back := taskInfoToPB(&master.RunTask{Info: l.Tasks[0].Info, FrameworkID: "fw", AgentID: "a1", Resources: resources.MustParse("cpus:1")})
	if back.TaskId != "t1" || back.FrameworkId != "fw" || back.AgentId != "a1" || back.Resources != "cpus:1" || back.Labels["k"] != "v" {
		t.Errorf("task info to the agent %v", back)
	}
	if back.Image != "registry.example.com/app:1" || back.ImagePull != "always" || !back.ImageReadWrite {
		t.Errorf("the task's image did not pass through: %v", back)
	}
}

// TestReasonsMatchPB: the reasons the domain sets are the proto's, by
// name: the domain holds its own copy of the ones it uses, so that it
// links no generated code.
func TestReasonsMatchPB(t *testing.T) {
	for _, r := range []struct{ domain, pb string }{
		{master.ReasonAgentUnreachable, pb.ReasonAgentUnreachable},
		{master.ReasonAgentRemoved, pb.ReasonAgentRemoved},
		{master.ReasonUnknownOnAgent, pb.ReasonTaskUnknownOnAgent},
		{master.ReasonFrameworkRemoved, pb.ReasonFrameworkRemoved},
		{master.ReasonReconciliation, pb.ReasonReconciliation},
		{master.ReasonInvalidTask, pb.ReasonInvalidTask},
		{master.ReasonPreempted, pb.ReasonContainerPreempted},
		{master.ReasonTaskUnauthorized, pb.ReasonTaskUnauthorized},
		{master.ReasonResourcesUpdated, pb.ReasonResourcesUpdated},
		{master.ReasonResourcesUpdateFailed, pb.ReasonResourcesUpdateFailed},
	} {
		if r.domain != r.pb || r.pb == "" {
			t.Errorf("domain reason %q, proto %q", r.domain, r.pb)
		}
	}
}

// TestOffersEventSize: the Offers events of a cycle that offers a
// framework more agents than one event holds are each well under gRPC's
// 4 MiB default once converted (one event of 50,000 offers was 4.15 MB,
// and the framework never got it).
func TestOffersEventSize(t *testing.T) {
	m, err := master.New(master.Options{AllocationInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2017 {
		out := master.NewOutbox[master.ToAgent](func() {}, master.AgentQueue)
		reg := &master.Registration{Hostname: fmt.Sprintf("host-%05d", i), Resources: "cpus:16;mem:65536"}
		if _, _, err := m.RegisterAgent(reg, "", out, func() {}); err != nil {
			t.Fatal(err)
		}
	}
	fwOut := master.NewOutbox[master.ToFramework](func() {}, master.FrameworkQueue)
	if _, err := m.Subscribe(&master.Subscription{Info: &master.FrameworkInfo{Name: "big"}}, fwOut); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	offers, events := 0, 0
	for deadline := time.Now().Add(30 * time.Second); offers < 2017; {
		select {
		case <-fwOut.Ready():
		case <-time.After(time.Until(deadline)):
			t.Fatalf("%d offers in %d events within 30 s, want 2017", offers, events)
		}
		for _, ev := range fwOut.Take() {
			made, ok := ev.(*master.OffersMade)
			if !ok {
				continue
			}
			events++
			offers += len(made.Offers())
			if size := proto.Size(frameworkEventToPB(made)); size > 1<<20 {
				t.Errorf("event of %d offers is %d bytes, want under 1 MiB", len(made.Offers()), size)
			}
		}
	}
	if events < 3 {
		t.Errorf("2017 offers in %d events, want at least 3", events)
	}
}
