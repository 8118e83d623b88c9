package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/scheduler"
)

// TestMasterDemandSeedExample: seed 003's example through `brim dev` with
// real containers: a framework submits demands 1200 and 1234 (OrderBy
// 1200, within 20 minutes of its allocation) with the SDK; 1234 is
// offered only after 1200's container exited; both end FINISHED, which
// `brim demand ls --json` shows.
func TestMasterDemandSeedExample(t *testing.T) {
	addr := testutil.FreeAddr(t)
	startDevProc(t, "--listen", addr, "--allocation-interval", "100ms")
	waitState(t, addr, "the agent registered", func(st masterState) bool { return len(st.Agents) == 1 && st.Agents[0].Connected })
	d, err := scheduler.New(scheduler.Options{Master: addr, Name: "workflow", FailoverTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	offers := make(chan *pb.Offer, 10)
	events := make(chan *pb.DemandEvent, 20)
	ended := make(chan string, 10)
	subscribed := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(ctx, scheduler.Callbacks{
			Subscribed: func(context.Context, string) {
				select {
				case <-subscribed:
				default:
					close(subscribed)
				}
			},
			Offers: func(ctx context.Context, os []*pb.Offer) {
				for _, o := range os {
					if o.DemandId != "" {
						offers <- o
					} else {
						_ = d.Decline(ctx, []string{o.Id}, 3600)
					}
				}
			},
			Demand: func(_ context.Context, ev *pb.DemandEvent) { events <- ev },
			Update: func(_ context.Context, st *pb.TaskStatus) {
				if st.State == pb.TaskState_TASK_FINISHED {
					ended <- st.TaskId
				}
			},
		})
	}()
	t.Cleanup(func() { cancel(); <-done; d.Close() })
	select {
	case <-subscribed:
	case <-time.After(60 * time.Second):
		t.Fatal("framework never subscribed")
	}
	err = d.SubmitDemand(ctx, []byte(`[
	  {"DemandID": 1200, "Resources": "cpus:1;mem:64", "Duration": {"Time": [null, "+10m"]}},
	  {"DemandID": 1234, "OrderBy": 1200, "Resources": "cpus:1;mem:64", "Duration": {"Time": [null, "+20m"], "Strategy": "loose"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	run := func(id, cmd string) {
		t.Helper()
		var o *pb.Offer
		select {
		case o = <-offers:
		case <-time.After(60 * time.Second):
			t.Fatalf("no offer for demand %s", id)
		}
		if o.DemandId != id {
			t.Fatalf("offer for demand %s, want %s", o.DemandId, id)
		}
		task := "t" + id
		if err := d.Launch(ctx, []string{o.Id}, []*pb.TaskInfo{{TaskId: task, Resources: o.Resources, Command: []string{"sh", "-c", cmd}}}, 0); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-ended:
			if got != task {
				t.Fatalf("task %s finished, want %s", got, task)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("task %s never finished", task)
		}
	}
	run("1200", "sleep 1")
	run("1234", "true")
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := runBrim(t, "demand", "ls", "--json", "--master", addr)
		var ds []struct {
			ID          string    `json:"id"`
			State       string    `json:"state"`
			AllocatedAt time.Time `json:"allocatedAt"`
			EndedAt     time.Time `json:"endedAt"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ds) != nil || len(ds) != 2 {
			t.Fatalf("brim demand ls: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if ds[0].State == "FINISHED" && ds[1].State == "FINISHED" {
			if ds[1].AllocatedAt.Before(ds[0].EndedAt) {
				t.Fatalf("1234 allocated at %s, before 1200 ended at %s", ds[1].AllocatedAt, ds[0].EndedAt)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("demands not FINISHED: %s", r.stdout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A bad document from the CLI: exit 1, the field named, nothing stored.
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"DemandID": "x", "FrameworkID": "nope", "Resources": "cpus:1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runBrim(t, "demand", "submit", "-f", bad, "--master", addr); r.code != 1 || !strings.Contains(r.stderr, "FrameworkID") {
		t.Fatalf("bad submit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
