package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
)

// oversubState is the oversubscription part of an agent in GET /state.
type oversubState struct {
	Agents []struct {
		ID               string `json:"id"`
		Revocable        string `json:"revocable"`
		Oversubscription *struct {
			Estimator   string `json:"estimator"`
			QoS         string `json:"qos"`
			Estimate    string `json:"estimate"`
			Summary     string `json:"summary"`
			Corrections []struct {
				Type        string  `json:"type"`
				ContainerID string  `json:"containerId"`
				TaskID      string  `json:"taskId"`
				Signal      string  `json:"signal"`
				Value       float64 `json:"value"`
				Threshold   float64 `json:"threshold"`
				Active      bool    `json:"active"`
			} `json:"corrections"`
		} `json:"oversubscription"`
	} `json:"agents"`
	Tasks []struct {
		ID        string `json:"id"`
		State     string `json:"state"`
		Resources string `json:"resources"`
		Reason    string `json:"reason"`
	} `json:"tasks"`
}

func getOversubState(t *testing.T, addr string) oversubState {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st oversubState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// waitOversubState polls /state until ok holds (the deadline only bounds
// a hung test).
func waitOversubState(t *testing.T, addr, what string, ok func(oversubState) bool) oversubState {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := getOversubState(t, addr)
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; state: %s", what, sprint(st))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// taskContainer is the part of `brim container ls --json` these tests read.
type taskContainer struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Revocable bool              `json:"revocable"`
	Labels    map[string]string `json:"labels"`
}

// containerOfTask is the agent's container running task id (found by its
// brim.task label: the name also holds the framework).
func containerOfTask(t *testing.T, a *agentProc, id string) taskContainer {
	t.Helper()
	out := a.mustBrim("container", "ls", "--json")
	var cs []taskContainer
	if err := json.Unmarshal([]byte(out), &cs); err != nil {
		t.Fatalf("ls --json: %v: %s", err, out)
	}
	for _, c := range cs {
		if c.Labels["brim.task"] == id {
			return c
		}
	}
	t.Fatalf("no container for task %s: %s", id, out)
	return taskContainer{}
}

// TestMasterOversubFixed: a `brim agent --master` with the fixed estimator
// forwards its estimate; /state shows it; a framework without the
// REVOCABLE capability is offered only non-revocable resources, while
// `brim run --revocable` runs on revocable resources in the best-effort
// cgroup class.
func TestMasterOversubFixed(t *testing.T) {
	m := startMasterProc(t)
	a := startAgent(t, "--master", m.Addr, "--estimator", "fixed", "--estimator-opt", "resources=cpus:1;mem:512",
		"--estimator-interval", "1s", "--no-bpf", "--status-retry-min", "200ms", "--status-retry-max", "2s")

	// (b) /state shows the agent's estimate, its estimator and why.
	st := waitOversubState(t, m.Addr, "the agent's estimate", func(st oversubState) bool {
		return len(st.Agents) == 1 && st.Agents[0].Oversubscription != nil && st.Agents[0].Oversubscription.Estimate != ""
	})
	ov := st.Agents[0].Oversubscription
	est, err := resources.Parse(ov.Estimate)
	if err != nil {
		t.Fatalf("estimate %q: %v", ov.Estimate, err)
	}
	if est.Revocable().IsEmpty() || !est.NonRevocable().IsEmpty() || est.Flatten().CPUs() != resources.MustParse("cpus:1").CPUs() ||
		ov.Estimator != "fixed" || ov.QoS != "noop" || ov.Summary == "" || len(ov.Corrections) != 0 || st.Agents[0].Revocable != ov.Estimate {
		t.Fatalf("agent oversubscription in /state: %s (revocable %s)", sprint(ov), st.Agents[0].Revocable)
	}

	// (a) A framework without the capability: its first offer holds the
	// whole non-revocable agent and nothing revocable.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := scheduler.New(scheduler.Options{Master: m.Addr, Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	offered := make(chan string, 16)
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_ = d.Run(ctx, scheduler.Callbacks{Offers: func(ctx context.Context, offers []*pb.Offer) {
			var ids []string
			for _, o := range offers {
				ids = append(ids, o.Id)
				offered <- o.Resources
			}
			// Keep them away from the plain framework for the rest of
			// the test: the revocable run below gets the agent.
			_ = d.Decline(ctx, ids, 600)
		}})
	}()
	defer func() { cancel(); <-runDone }()
	var first string
	select {
	case first = <-offered:
	case <-time.After(60 * time.Second):
		t.Fatal("no offer to the framework without the REVOCABLE capability")
	}
	plain, err := resources.Parse(first)
	if err != nil {
		t.Fatalf("offer %q: %v", first, err)
	}
	if !plain.Revocable().IsEmpty() || plain.Flatten().CPUs() != resources.MustParse("cpus:2").CPUs() {
		t.Fatalf("offer to a framework without REVOCABLE: %s, want the agent's 2 non-revocable cpus only", first)
	}

	// The capable framework: its task runs on revocable resources only.
	r := startRun(t, m.Addr, "--revocable", "--task-id", "rev-1", "--cpus", "0.5", "--mem", "64", "--", "sleep", "600")
	r.waitLine(t, "task rev-1: RUNNING")
	st = waitOversubState(t, m.Addr, "the revocable task", func(st oversubState) bool {
		for _, tk := range st.Tasks {
			if tk.ID == "rev-1" && tk.State == "RUNNING" {
				return true
			}
		}
		return false
	})
	for _, tk := range st.Tasks {
		if tk.ID != "rev-1" {
			continue
		}
		res, err := resources.Parse(tk.Resources)
		if err != nil || res.Revocable().IsEmpty() || !res.NonRevocable().IsEmpty() {
			t.Fatalf("revocable task's resources %q (%v): want revocable only", tk.Resources, err)
		}
	}
	c := containerOfTask(t, a, "rev-1")
	if !c.Revocable {
		t.Fatalf("task container not revocable: %s", sprint(c))
	}
	// Best-effort class: 10 shares per cpu, at least 2 (5 here) and, where
	// the kernel has it, a SCHED_IDLE group (whose cpu.shares the kernel
	// then reads back as the idle weight, 3).
	shares, _ := strconv.Atoi(a.cgroupFile("cpu", c.ID, "cpu.shares"))
	if _, err := os.Stat(filepath.Join(testutil.CgroupRoot, "cpu", a.Parent, c.ID, "cpu.idle")); err == nil {
		if got := a.cgroupFile("cpu", c.ID, "cpu.idle"); got != "1" {
			t.Fatalf("revocable cpu.idle = %s, want 1", got)
		}
		if shares != 5 && shares != 3 {
			t.Fatalf("revocable cpu.shares = %d, want 5 (or the idle weight 3)", shares)
		}
	} else if shares != 5 {
		t.Fatalf("revocable cpu.shares = %d, want 5", shares)
	}
	t.Logf("revocable task %s: cpu.shares %d", c.ID, shares)
	// The plain framework never got anything revocable.
	for {
		select {
		case o := <-offered:
			if res, err := resources.Parse(o); err != nil || !res.Revocable().IsEmpty() {
				t.Fatalf("offer to a framework without REVOCABLE: %s (%v)", o, err)
			}
			continue
		default:
		}
		break
	}
}

// TestMasterOversubQoSKill: the load QoS controller with a tiny threshold
// preempts a busy revocable task; `brim run` sees it end KILLED with
// reason CONTAINER_PREEMPTED and a message naming the trigger, and /state
// lists the kill with its signal.
func TestMasterOversubQoSKill(t *testing.T) {
	m := startMasterProc(t)
	startAgent(t, "--master", m.Addr, "--estimator", "fixed", "--estimator-opt", "resources=cpus:1;mem:512",
		"--estimator-interval", "1s", "--no-bpf", "--status-retry-min", "200ms", "--status-retry-max", "2s",
		"--qos", "load", "--qos-opt", "load5=0.0001", "--qos-opt", "cooldown=1s", "--qos-opt", "grace=0", "--qos-opt", "psi=0", "--qos-interval", "1s")
	waitOversubState(t, m.Addr, "the agent's estimate", func(st oversubState) bool {
		return len(st.Agents) == 1 && st.Agents[0].Oversubscription != nil && st.Agents[0].Oversubscription.Estimate != ""
	})
	// A busy loop keeps the host's load above the threshold.
	r := startRun(t, m.Addr, "--revocable", "--task-id", "rev-busy", "--cpus", "0.2", "--mem", "32", "--", "sh", "-c", "while :; do :; done")
	line := r.waitLine(t, "task rev-busy: KILLED")
	t.Logf("brim run: %s", line)
	if !strings.Contains(line, "(CONTAINER_PREEMPTED)") || !strings.Contains(line, "trigger load") {
		t.Fatalf("preempted task's status: %q, want reason CONTAINER_PREEMPTED and the trigger", line)
	}
	if code := r.wait(t); code == 0 {
		t.Fatalf("brim run exited 0 for a preempted task:\n%s", r.output())
	}
	st := waitOversubState(t, m.Addr, "the kill in /state", func(st oversubState) bool {
		if len(st.Agents) != 1 || st.Agents[0].Oversubscription == nil {
			return false
		}
		for _, c := range st.Agents[0].Oversubscription.Corrections {
			if c.Type == "KILL" && c.TaskID == "rev-busy" {
				return true
			}
		}
		return false
	})
	for _, c := range st.Agents[0].Oversubscription.Corrections {
		if c.TaskID == "rev-busy" && (c.Signal != "load" || c.Active || c.Value <= c.Threshold) {
			t.Fatalf("kill in /state: %s", sprint(c))
		}
	}
	for _, tk := range st.Tasks {
		if tk.ID == "rev-busy" && (tk.State != "KILLED" || tk.Reason != "CONTAINER_PREEMPTED") {
			t.Fatalf("preempted task in /state: %s", sprint(tk))
		}
	}
}

// TestDevRevocable: the quick start. `brim dev` takes the agent's
// oversubscription flags; `brim run --revocable` runs on the fixed
// estimator's revocable resources and `brim run` without it does not.
func TestDevRevocable(t *testing.T) {
	addr := testutil.FreeAddr(t)
	startDevProc(t, "--listen", addr, "--allocation-interval", "100ms", "--estimator", "fixed",
		"--estimator-opt", "resources=cpus:1;mem:512", "--estimator-interval", "1s", "--no-bpf")
	waitOversubState(t, addr, "the dev agent's estimate", func(st oversubState) bool {
		return len(st.Agents) == 1 && st.Agents[0].Oversubscription != nil && st.Agents[0].Oversubscription.Estimator == "fixed" &&
			st.Agents[0].Oversubscription.Estimate != ""
	})
	for _, args := range [][]string{{"--revocable", "--task-id", "dev-rev"}, {"--task-id", "dev-plain"}} {
		r := startRun(t, addr, append(args, "--cpus", "0.5", "--mem", "64", "--", "sleep", "600")...)
		r.waitLine(t, "RUNNING")
	}
	st := getOversubState(t, addr)
	seen := 0
	for _, tk := range st.Tasks {
		res, err := resources.Parse(tk.Resources)
		if err != nil {
			t.Fatalf("task %s resources %q: %v", tk.ID, tk.Resources, err)
		}
		switch tk.ID {
		case "dev-rev":
			seen++
			if res.Revocable().IsEmpty() || !res.NonRevocable().IsEmpty() {
				t.Errorf("revocable task on %s", tk.Resources)
			}
		case "dev-plain":
			seen++
			if !res.Revocable().IsEmpty() {
				t.Errorf("task without --revocable on %s", tk.Resources)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("tasks in /state: %s", sprint(st.Tasks))
	}
}
