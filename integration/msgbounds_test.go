package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/agent/agentpb"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// TestManyLargeTasksReregister: 100 tasks with 90 KB commands (9 MB of
// specs, past gRPC's 4 MiB) run on an agent; `brim container ls` lists
// them and, after the agent restarts, it re-registers with every task
// (none LOST) and ls still works. A 140 KB argument, which the kernel's
// MAX_ARG_STRLEN refuses at exec (once exit 255 with no reason), is
// refused up front by the master and by the agent, naming the limit.
func TestManyLargeTasksReregister(t *testing.T) {
	const n = 100
	// The restart (recovering 100 containers) may take longer than the
	// harness's 2 s before an agent is declared unreachable: allow 20 s.
	m := startMasterProc(t, "--max-missed-heartbeats", "100")
	ag := startLinkedAgent(t, m.Addr, "--resources", "cpus:2;mem:8192")
	d, err := scheduler.New(scheduler.Options{Master: m.Addr, Name: "many", FailoverTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	offers := make(chan *pb.Offer, 100)
	var mu sync.Mutex
	running, ended := map[string]bool{}, map[string]string{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(ctx, scheduler.Callbacks{
			Offers: func(ctx context.Context, os []*pb.Offer) {
				for _, o := range os {
					select {
					case offers <- o:
					case <-ctx.Done():
						return
					}
				}
			},
			Update: func(_ context.Context, st *pb.TaskStatus) {
				mu.Lock()
				defer mu.Unlock()
				switch st.State {
				case pb.TaskState_TASK_RUNNING:
					running[st.TaskId] = true
				case pb.TaskState_TASK_STAGING, pb.TaskState_TASK_STARTING:
				default:
					ended[st.TaskId] = fmt.Sprintf("%s %s %s", st.State, st.Reason, st.Message)
				}
			},
		})
	}()
	t.Cleanup(func() { cancel(); <-done; d.Close() })
	nextOffer := func() *pb.Offer {
		t.Helper()
		select {
		case o := <-offers:
			return o
		case <-time.After(60 * time.Second):
			t.Fatal("no offer")
			return nil
		}
	}

	// Refused at ACCEPT, naming the limit; the offer stays usable.
	big := strings.Repeat("x", 140_000)
	o := nextOffer()
	err = d.Launch(ctx, []string{o.Id}, []*pb.TaskInfo{{TaskId: "big", Resources: "cpus:0.01;mem:64",
		Command: []string{"sh", "-c", "exec sleep 600", big}}}, 0)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "MAX_ARG_STRLEN") {
		t.Fatalf("launch with a 140 KB argument: %v, want InvalidArgument naming MAX_ARG_STRLEN", err)
	}

	// 100 tasks, 30 to an ACCEPT (each ACCEPT is a message of its own).
	pad := strings.Repeat("x", 90_000) // $0 of sh -c: ignored
	for launched := 0; launched < n; {
		var tasks []*pb.TaskInfo
		for i := launched; i < min(n, launched+30); i++ {
			tasks = append(tasks, &pb.TaskInfo{TaskId: fmt.Sprintf("t%03d", i), Resources: "cpus:0.01;mem:64",
				Command: []string{"sh", "-c", "exec sleep 600", pad}})
		}
		// An offer may be a part of what is free (the allocator offers
		// what comes back separately): on to the next one.
		for attempt := 0; ; attempt++ {
			err := d.Launch(ctx, []string{o.Id}, tasks, 0)
			if err == nil {
				break
			}
			if c := status.Code(err); attempt == 20 || (c != codes.ResourceExhausted && c != codes.FailedPrecondition) {
				t.Fatalf("launch tasks %d-: %v", launched, err)
			}
			o = nextOffer()
		}
		launched += len(tasks)
		if launched < n {
			o = nextOffer()
		}
	}
	waitRunning := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Minute)
		for {
			mu.Lock()
			r, e := len(running), fmt.Sprint(ended)
			mu.Unlock()
			if e != "map[]" {
				t.Fatalf("%s: tasks ended: %s", what, e)
			}
			if r == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of %d tasks running", what, r, n)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitRunning("launch")
	lsAll := func(when string) {
		t.Helper()
		cs := ag.list()
		if len(cs) != n {
			t.Fatalf("%s: ls lists %d containers, want %d", when, len(cs), n)
		}
		for _, c := range cs {
			if c.State != "running" {
				t.Fatalf("%s: container %s (%s) is %s", when, c.ID, c.Name, c.State)
			}
		}
	}
	lsAll("after launch")

	// Restart the agent: it re-registers with every task.
	ag.stop()
	waitState(t, m.Addr, "agent disconnected", func(st masterState) bool { return len(st.Agents) == 1 && !st.Agents[0].Connected })
	ag.start()
	waitState(t, m.Addr, "agent re-registered", func(st masterState) bool { return len(st.Agents) == 1 && st.Agents[0].Connected })
	st := getState(t, m.Addr)
	if st.Agents[0].Tasks != n {
		t.Fatalf("re-registered with %d tasks, want %d", st.Agents[0].Tasks, n)
	}
	for _, tk := range st.Tasks {
		if tk.State != "RUNNING" {
			t.Fatalf("after re-registration task %s is %s (%s)", tk.ID, tk.State, tk.Reason)
		}
	}
	mu.Lock()
	e := fmt.Sprint(ended)
	mu.Unlock()
	if e != "map[]" {
		t.Fatalf("after re-registration: tasks ended: %s", e)
	}
	lsAll("after restart")

	// The agent's own API refuses what the kernel would, leaving nothing.
	cc, err := grpc.NewClient("unix://"+ag.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = agentpb.NewAgentClient(cc).Run(ctx, &agentpb.RunRequest{Name: "big", Command: []string{"sh", "-c", "exec sleep 600", big},
		MilliCpus: 10, MemMib: 64})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "the limit is 131071 bytes per argument (the kernel's MAX_ARG_STRLEN)") {
		t.Fatalf("container run with a 140 KB argument: %v, want InvalidArgument naming MAX_ARG_STRLEN", err)
	}
	lsAll("after the refused run")

	// Remove the containers in one call (cleanup would take them one by one).
	ids := []string{"container", "rm", "-f"}
	for _, c := range ag.list() {
		ids = append(ids, c.ID)
	}
	ag.mustBrim(ids...)
}
