package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// updateFramework is an in-test framework: it keeps the offers it gets
// (newest last) and passes on every status update.
type updateFramework struct {
	d       *scheduler.Driver
	offers  chan *pb.Offer
	updates chan *pb.TaskStatus

	mu      sync.Mutex
	resized int // RESOURCES_UPDATED updates seen
}

func startUpdateFramework(t *testing.T, addr string) *updateFramework {
	t.Helper()
	d, err := scheduler.New(scheduler.Options{Master: addr, Name: "resizer", FailoverTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f := &updateFramework{d: d, offers: make(chan *pb.Offer, 100), updates: make(chan *pb.TaskStatus, 100)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Run(ctx, scheduler.Callbacks{
			Offers: func(_ context.Context, os []*pb.Offer) {
				for _, o := range os {
					f.offers <- o
				}
			},
			Update: func(_ context.Context, st *pb.TaskStatus) {
				if st.Reason == pb.ReasonResourcesUpdated {
					f.mu.Lock()
					f.resized++
					f.mu.Unlock()
				}
				f.updates <- st
			},
		})
	}()
	t.Cleanup(func() { cancel(); <-done; d.Close() })
	return f
}

func (f *updateFramework) nextOffer(t *testing.T) *pb.Offer {
	t.Helper()
	select {
	case o := <-f.offers:
		return o
	case <-time.After(60 * time.Second):
		t.Fatal("no offer")
		return nil
	}
}

// waitUpdate waits for an update of task id with the given state and
// reason ("" for any), failing on a terminal state.
func (f *updateFramework) waitUpdate(t *testing.T, id string, state pb.TaskState, reason string) *pb.TaskStatus {
	t.Helper()
	deadline := time.After(90 * time.Second)
	for {
		select {
		case st := <-f.updates:
			if st.TaskId != id {
				continue
			}
			if st.State == state && (reason == "" || st.Reason == reason) {
				return st
			}
			switch st.State {
			case pb.TaskState_TASK_FINISHED, pb.TaskState_TASK_FAILED, pb.TaskState_TASK_KILLED, pb.TaskState_TASK_LOST:
				t.Fatalf("task %s ended: %s %s %s", id, st.State, st.Reason, st.Message)
			}
			if st.Reason == pb.ReasonResourcesUpdateFailed {
				t.Fatalf("task %s: update failed: %s", id, st.Message)
			}
		case <-deadline:
			t.Fatalf("no %s %s update of task %s", state, reason, id)
		}
	}
}

// stateTask is task id in the master's /state: its agent and resources.
func stateTask(t *testing.T, addr, id string) (agent, res string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Tasks []struct {
			ID        string `json:"id"`
			AgentID   string `json:"agentId"`
			Resources string `json:"resources"`
		} `json:"tasks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	for _, tk := range st.Tasks {
		if tk.ID == id {
			return tk.AgentID, tk.Resources
		}
	}
	t.Fatalf("task %s not in /state: %+v", id, st.Tasks)
	return "", ""
}

// TestMasterUpdateTask: a framework grows a running task with an offer
// and shrinks it back; the container's cgroups follow live, the framework
// gets one RUNNING/RESOURCES_UPDATED update per change, /state shows the
// new resources, and growth beyond the offer is refused without effect.
func TestMasterUpdateTask(t *testing.T) {
	m := startMasterProc(t)
	ag := startLinkedAgent(t, m.Addr) // cpus:2;mem:2048
	f := startUpdateFramework(t, m.Addr)
	ctx := context.Background()

	const id = "resize-1"
	o := f.nextOffer(t)
	if err := f.d.Launch(ctx, []string{o.Id}, []*pb.TaskInfo{{TaskId: id, Resources: "cpus:0.5;mem:64", Command: []string{"sleep", "600"}}}, 0); err != nil {
		t.Fatal(err)
	}
	f.waitUpdate(t, id, pb.TaskState_TASK_RUNNING, "")
	c := containerOfTask(t, ag, id)
	checkLimits := func(when string, shares, memMiB int) {
		t.Helper()
		if got := ag.cgroupFile("cpu", c.ID, "cpu.shares"); got != strconv.Itoa(shares) {
			t.Fatalf("%s: cpu.shares = %s, want %d", when, got, shares)
		}
		if got := ag.cgroupFile("memory", c.ID, "memory.limit_in_bytes"); got != strconv.Itoa(memMiB<<20) {
			t.Fatalf("%s: memory.limit_in_bytes = %s, want %d MiB", when, got, memMiB)
		}
		t.Logf("%s: container %s: cpu.shares %d, memory.limit_in_bytes %d MiB", when, c.ID, shares, memMiB)
	}
	checkLimits("at launch", 512, 64)

	// Grow cpus and mem with the offer of what the launch left.
	o = f.nextOffer(t)
	if task, _ := stateTask(t, m.Addr, id); o.AgentId != task {
		t.Fatalf("offer of agent %s, task on %s", o.AgentId, task)
	}
	if err := f.d.UpdateTask(ctx, id, "cpus:1;mem:256", []string{o.Id}); err != nil {
		t.Fatal(err)
	}
	st := f.waitUpdate(t, id, pb.TaskState_TASK_RUNNING, pb.ReasonResourcesUpdated)
	if !resources.MustParse(st.Resources).Equal(resources.MustParse("cpus:1;mem:256")) {
		t.Fatalf("RESOURCES_UPDATED carries %q", st.Resources)
	}
	checkLimits("after grow", 1024, 256)
	if _, got := stateTask(t, m.Addr, id); got != "cpus:1;mem:256" {
		t.Fatalf("/state after grow: %s", got)
	}

	// Growth beyond the offer: refused, the offer and the container stay.
	o = f.nextOffer(t) // what the grow left: cpus:1;mem:1792
	err := f.d.UpdateTask(ctx, id, "cpus:2.5;mem:256", []string{o.Id})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("update beyond the offer: %v, want ResourceExhausted", err)
	}
	checkLimits("after refused update", 1024, 256)

	// Shrink: no offer; the cgroups shrink and /state follows.
	if err := f.d.UpdateTask(ctx, id, "cpus:0.25;mem:48", nil); err != nil {
		t.Fatal(err)
	}
	f.waitUpdate(t, id, pb.TaskState_TASK_RUNNING, pb.ReasonResourcesUpdated)
	checkLimits("after shrink", 256, 48)
	if _, got := stateTask(t, m.Addr, id); got != "cpus:0.25;mem:48" {
		t.Fatalf("/state after shrink: %s", got)
	}
	// The refused update's offer is still good: the task grows with it.
	if err := f.d.UpdateTask(ctx, id, "cpus:1;mem:48", []string{o.Id}); err != nil {
		t.Fatalf("grow with the offer a refused update named: %v", err)
	}
	f.waitUpdate(t, id, pb.TaskState_TASK_RUNNING, pb.ReasonResourcesUpdated)
	checkLimits("after second grow", 1024, 48)

	// One update per change, even though the agent retries until acked:
	// a reconcile round trip later, still three.
	if err := f.d.Reconcile(ctx, id); err != nil {
		t.Fatal(err)
	}
	f.waitUpdate(t, id, pb.TaskState_TASK_RUNNING, "RECONCILIATION")
	f.mu.Lock()
	n := f.resized
	f.mu.Unlock()
	if n != 3 {
		t.Fatalf("framework saw %d RESOURCES_UPDATED updates, want 3", n)
	}
	// The agent's checkpoint has the new resources (reported on
	// re-registration).
	var inspected struct {
		Labels map[string]string `json:"labels"`
	}
	out := ag.mustBrim("container", "inspect", c.ID)
	if err := json.Unmarshal([]byte(out), &inspected); err != nil {
		t.Fatalf("inspect: %v: %s", err, out)
	}
	if got := inspected.Labels["brim.resources"]; got != "cpus:1;mem:48" {
		t.Fatalf("container's resources label after updates: %q", got)
	}

	// A restarted master learns the task's resources from the agent's
	// re-registration, and the task can be resized again.
	m.stop()
	m.start()
	waitState(t, m.Addr, "the agent back with its task", func(st masterState) bool {
		return len(st.Agents) == 1 && st.Agents[0].Connected && st.Agents[0].Tasks == 1 &&
			len(st.Frameworks) == 1 && st.Frameworks[0].Connected
	})
	if _, got := stateTask(t, m.Addr, id); got != "cpus:1;mem:48" {
		t.Fatalf("/state after a master restart: %s", got)
	}
	if err := f.d.UpdateTask(ctx, id, "cpus:0.5;mem:48", nil); err != nil {
		t.Fatalf("update after a master restart: %v", err)
	}
	f.waitUpdate(t, id, pb.TaskState_TASK_RUNNING, pb.ReasonResourcesUpdated)
	checkLimits("after a master restart and a shrink", 512, 48)
}

// TestMasterUpdateTaskFailure: a shrink the kernel refuses (a memory limit
// below what the task holds, no swap to push it to) comes back as a
// RUNNING/RESOURCES_UPDATE_FAILED update naming the cause; the task keeps
// running with its old limits and the master keeps its old resources.
func TestMasterUpdateTaskFailure(t *testing.T) {
	m := startMasterProc(t)
	ag := startLinkedAgent(t, m.Addr)
	f := startUpdateFramework(t, m.Addr)
	ctx := context.Background()

	const id = "hold-1"
	o := f.nextOffer(t)
	// The shell keeps 64 MiB in a variable (touched pages, not reclaimable
	// without swap).
	hold := `x=$(head -c 67108864 /dev/zero | tr '\0' a); echo held; sleep 600`
	if err := f.d.Launch(ctx, []string{o.Id}, []*pb.TaskInfo{{TaskId: id, Resources: "cpus:0.5;mem:160", Command: []string{"sh", "-c", hold}}}, 0); err != nil {
		t.Fatal(err)
	}
	f.waitUpdate(t, id, pb.TaskState_TASK_RUNNING, "")
	c := containerOfTask(t, ag, id)
	eventually(t, "the task to hold 64 MiB", func() bool {
		n, _ := strconv.ParseInt(ag.cgroupFile("memory", c.ID, "memory.usage_in_bytes"), 10, 64)
		return n >= 64<<20
	})
	if err := f.d.UpdateTask(ctx, id, "cpus:0.5;mem:16", nil); err != nil {
		t.Fatal(err)
	}
	st := f.waitUpdate(t, id, pb.TaskState_TASK_RUNNING, pb.ReasonResourcesUpdateFailed)
	if st.Message == "" {
		t.Fatal("RESOURCES_UPDATE_FAILED without a message")
	}
	t.Logf("refused shrink: %s", st.Message)
	if got := ag.cgroupFile("memory", c.ID, "memory.limit_in_bytes"); got != strconv.Itoa(160<<20) {
		t.Fatalf("memory.limit_in_bytes after a failed shrink = %s, want 160 MiB", got)
	}
	if _, got := stateTask(t, m.Addr, id); got != "cpus:0.5;mem:160" {
		t.Fatalf("/state after a failed shrink: %s", got)
	}
	// The task can still be resized (nothing is left in flight).
	if err := f.d.UpdateTask(ctx, id, "cpus:0.25;mem:160", nil); err != nil {
		t.Fatal(err)
	}
	f.waitUpdate(t, id, pb.TaskState_TASK_RUNNING, pb.ReasonResourcesUpdated)
	if got := ag.cgroupFile("cpu", c.ID, "cpu.shares"); got != "256" {
		t.Fatalf("cpu.shares after the next update = %s, want 256", got)
	}
}
