package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
)

// demandFramework is a framework of the SDK on a `brim dev` master: its
// demand offers, its other offers (declined unless keep), its tasks'
// updates.
type demandFramework struct {
	d       *scheduler.Driver
	demand  chan *pb.Offer
	drf     chan *pb.Offer
	updates chan *pb.TaskStatus
}

// startDemandFramework subscribes framework name; with keepDRF its DRF
// offers are passed on (drf), otherwise declined for an hour.
func startDemandFramework(t *testing.T, addr, name string, keepDRF bool) *demandFramework {
	t.Helper()
	d, err := scheduler.New(scheduler.Options{Master: addr, Name: name, FailoverTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f := &demandFramework{d: d, demand: make(chan *pb.Offer, 10), drf: make(chan *pb.Offer, 10), updates: make(chan *pb.TaskStatus, 50)}
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
					switch {
					case o.DemandId != "":
						f.demand <- o
					case keepDRF:
						select {
						case f.drf <- o:
						default:
							_ = d.Decline(ctx, []string{o.Id}, 3600)
						}
					default:
						_ = d.Decline(ctx, []string{o.Id}, 3600)
					}
				}
			},
			Update: func(_ context.Context, st *pb.TaskStatus) { f.updates <- st },
		})
	}()
	t.Cleanup(func() { cancel(); <-done; d.Close() })
	select {
	case <-subscribed:
	case <-time.After(60 * time.Second):
		t.Fatalf("framework %s never subscribed", name)
	}
	return f
}

// shownDemand is what `brim demand show --json` prints that the tests read.
type shownDemand struct {
	ID    string    `json:"id"`
	State string    `json:"state"`
	Start time.Time `json:"start"`
}

func writeDoc(t *testing.T, dir, name, doc string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMasterDemandUpdateCLI: through `brim dev` and the CLI, a strict
// demand whose start names a time zone is planned at that instant in
// UTC; the same document submitted again exits 0 with the stored demand
// (it was a 409); `brim demand update` moves its window (an offset this
// time) and show prints the new start; an update naming another
// DemandID exits 1 naming the field, the demand unchanged.
func TestMasterDemandUpdateCLI(t *testing.T) {
	addr := testutil.FreeAddr(t)
	startDevProc(t, "--listen", addr, "--allocation-interval", "100ms")
	waitState(t, addr, "the agent registered", func(st masterState) bool { return len(st.Agents) == 1 && st.Agents[0].Connected })
	f := startDemandFramework(t, addr, "planned", false)
	fw := f.d.FrameworkID()
	year := time.Now().UTC().Year() + 1
	doc := func(id, at string) string {
		return `{"DemandID": "` + id + `", "FrameworkID": "` + fw + `", "Resources": "cpus:1;mem:64",
		  "Start": {"Time": ["` + at + `", "+10m"], "Strategy": "strict"}, "Duration": {"Time": [null, "+10m"], "Strategy": "strict"}}`
	}
	dir := t.TempDir()
	first := writeDoc(t, dir, "first.json", doc("u", fmt.Sprintf("%d-01-15 10:00:00 Europe/Paris", year)))
	show := func() shownDemand {
		t.Helper()
		r := runBrim(t, "demand", "show", "u", "--json", "--master", addr)
		var d shownDemand
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &d) != nil {
			t.Fatalf("brim demand show: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		return d
	}
	for i := range 2 { // the second time: the same document again
		if r := runBrim(t, "demand", "submit", "-f", first, "--master", addr); r.code != 0 {
			t.Fatalf("brim demand submit (%d): exit %d\n%s%s", i+1, r.code, r.stdout, r.stderr)
		}
	}
	if d := show(); d.State != "ACCEPTED" || !d.Start.Equal(time.Date(year, 1, 15, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("submitted: %s at %s, want ACCEPTED at 09:00Z (10:00 in Paris in January)", d.State, d.Start)
	}
	moved := writeDoc(t, dir, "moved.json", doc("u", fmt.Sprintf("%d-01-15 14:30:00 +02:00", year)))
	if r := runBrim(t, "demand", "update", "u", "-f", moved, "--master", addr); r.code != 0 || !strings.Contains(r.stdout, "ACCEPTED") {
		t.Fatalf("brim demand update: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := time.Date(year, 1, 15, 12, 30, 0, 0, time.UTC)
	if d := show(); d.State != "ACCEPTED" || !d.Start.Equal(want) {
		t.Fatalf("updated: %s at %s, want ACCEPTED at %s", d.State, d.Start, want)
	}
	other := writeDoc(t, dir, "other.json", doc("v", fmt.Sprintf("%d-01-16 10:00:00", year)))
	if r := runBrim(t, "demand", "update", "u", "-f", other, "--master", addr); r.code != 1 || !strings.Contains(r.stderr, "DemandID") {
		t.Fatalf("update naming demand v: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if d := show(); !d.Start.Equal(want) {
		t.Fatalf("after a refused update: start %s, want %s", d.Start, want)
	}
	if r := runBrim(t, "demand", "ls", "--master", addr); r.code != 0 || strings.Count(r.stdout, "\n") != 2 {
		t.Fatalf("brim demand ls: one demand wanted: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestMasterDemandPreemptsContainer: through `brim dev` with real
// containers, a DRF framework's task holds the agent's cpus when a
// strict demand booked there comes near its start: the master preempts
// it --demand-reclaim-ahead before (its container killed, its framework
// told KILLED, CONTAINER_PREEMPTED, naming the demand), and the demand's
// framework is offered the capacity at the start.
func TestMasterDemandPreemptsContainer(t *testing.T) {
	addr := testutil.FreeAddr(t)
	startDevProc(t, "--listen", addr, "--allocation-interval", "100ms",
		"--demand-lead", "10s", "--demand-reclaim-ahead", "5s", "--demand-pickup", "1m")
	waitState(t, addr, "the agent registered", func(st masterState) bool { return len(st.Agents) == 1 && st.Agents[0].Connected })
	batch := startDemandFramework(t, addr, "batch", true)
	var o *pb.Offer
	select {
	case o = <-batch.drf:
	case <-time.After(60 * time.Second):
		t.Fatal("the batch framework was offered nothing")
	}
	res, err := resources.Parse(o.Resources)
	if err != nil {
		t.Fatal(err)
	}
	all := fmt.Sprintf("cpus:%s;mem:%s", res.Scalar("cpus"), res.Scalar("mem"))
	ctx := context.Background()
	if err := batch.d.Launch(ctx, []string{o.Id}, []*pb.TaskInfo{{TaskId: "b1", Resources: all, Command: []string{"sleep", "600"}}}, 0); err != nil {
		t.Fatal(err)
	}
	waitTaskState(t, batch, "b1", pb.TaskState_TASK_RUNNING, 60*time.Second)
	planned := startDemandFramework(t, addr, "planned", false)
	start := time.Now().UTC().Add(25 * time.Second).Truncate(time.Second)
	doc := writeDoc(t, t.TempDir(), "s.json", `{"DemandID": "s", "FrameworkID": "`+planned.d.FrameworkID()+`", "Resources": "cpus:1;mem:64",
	  "Start": {"Time": ["`+start.Format(time.RFC3339)+`", "+2m"], "Strategy": "strict"}, "Duration": {"Time": [null, "+5m"], "Strategy": "strict"}}`)
	if r := runBrim(t, "demand", "submit", "-f", doc, "--master", addr); r.code != 0 || !strings.Contains(r.stdout, "ACCEPTED") {
		t.Fatalf("brim demand submit: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	st := waitTaskState(t, batch, "b1", pb.TaskState_TASK_KILLED, 90*time.Second)
	if st.Reason != pb.ReasonContainerPreempted || !strings.Contains(st.Message, "demand s") {
		t.Fatalf("b1 killed with %s %q, want CONTAINER_PREEMPTED naming demand s", st.Reason, st.Message)
	}
	select {
	case d := <-planned.demand:
		if d.DemandId != "s" {
			t.Fatalf("demand offer for %s, want s", d.DemandId)
		}
		if time.Now().Add(time.Second).Before(start) {
			t.Fatalf("demand s offered at %s, before its start %s", time.Now().UTC(), start)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("demand s was never offered its capacity")
	}
}

// waitTaskState waits for task id of f to reach state, failing on any
// other terminal state.
func waitTaskState(t *testing.T, f *demandFramework, id string, state pb.TaskState, within time.Duration) *pb.TaskStatus {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case st := <-f.updates:
			if st.TaskId != id {
				continue
			}
			if st.State == state {
				return st
			}
			if st.State.Terminal() {
				t.Fatalf("task %s: %s %s %q, want %s", id, st.State, st.Reason, st.Message, state)
			}
		case <-deadline:
			t.Fatalf("task %s never reached %s", id, state)
		}
	}
}
