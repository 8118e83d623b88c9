package runner_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"github.com/brimnode/brim/scheduler/runner"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeMaster is a scheduler API that offers fixed offers once per
// subscription, answers launches with launchErr or runs each launched
// task to exitCode, and records the launches. A fake: the runner's
// behaviour against the real master is in integration/.
type fakeMaster struct {
	pb.UnimplementedSchedulerServer
	offers    []*pb.Offer
	launchErr error
	exitCode  int32
	// lost: the task's end is the master's reconciliation answer LOST
	// (its agent missed the re-registration window), nothing after.
	lost bool
	// repeat: after RUNNING, what a failover brings before the end — the
	// new leader's reconciliation answer RUNNING, then the agent's
	// unacknowledged updates sent again: STARTING, RUNNING.
	repeat bool

	mu       sync.Mutex
	launched []string
	stream   pb.Scheduler_SubscribeServer
	sendMu   sync.Mutex
}

func (m *fakeMaster) Subscribe(_ *pb.SubscribeRequest, stream pb.Scheduler_SubscribeServer) error {
	m.mu.Lock()
	m.stream = stream
	m.mu.Unlock()
	m.send(&pb.Event{Event: &pb.Event_Subscribed{Subscribed: &pb.Subscribed{FrameworkId: "fw"}}})
	if len(m.offers) > 0 {
		m.send(&pb.Event{Event: &pb.Event_Offers{Offers: &pb.Offers{Offers: m.offers}}})
	}
	<-stream.Context().Done()
	return nil
}

func (m *fakeMaster) send(ev *pb.Event) {
	m.mu.Lock()
	s := m.stream
	m.mu.Unlock()
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	_ = s.Send(ev)
}

func (m *fakeMaster) Accept(_ context.Context, r *pb.AcceptRequest) (*pb.Empty, error) {
	if m.launchErr != nil {
		return nil, m.launchErr
	}
	for _, op := range r.Operations {
		for _, ti := range op.GetLaunch().GetTasks() {
			m.mu.Lock()
			m.launched = append(m.launched, ti.TaskId+"="+ti.Resources)
			m.mu.Unlock()
			st := &pb.TaskStatus{TaskId: ti.TaskId, AgentId: "a1", State: pb.TaskState_TASK_RUNNING}
			go func() {
				m.send(&pb.Event{Event: &pb.Event_Update{Update: st}})
				if m.repeat {
					m.send(&pb.Event{Event: &pb.Event_Update{Update: &pb.TaskStatus{TaskId: st.TaskId, AgentId: "a1",
						State: pb.TaskState_TASK_RUNNING, Reason: pb.ReasonReconciliation}}})
					for _, s := range []pb.TaskState{pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING} {
						m.send(&pb.Event{Event: &pb.Event_Update{Update: &pb.TaskStatus{TaskId: st.TaskId, AgentId: "a1", State: s}}})
					}
				}
				if m.lost {
					m.send(&pb.Event{Event: &pb.Event_Update{Update: &pb.TaskStatus{TaskId: st.TaskId, State: pb.TaskState_TASK_LOST,
						Reason: pb.ReasonReconciliation, Message: "unknown task"}}})
					return
				}
				end := &pb.TaskStatus{TaskId: st.TaskId, AgentId: "a1", State: pb.TaskState_TASK_FINISHED, HasExitCode: true, ExitCode: m.exitCode}
				if m.exitCode != 0 {
					end.State = pb.TaskState_TASK_FAILED
				}
				m.send(&pb.Event{Event: &pb.Event_Update{Update: end}})
			}()
		}
	}
	return &pb.Empty{}, nil
}

func (m *fakeMaster) Decline(context.Context, *pb.DeclineRequest) (*pb.Empty, error) {
	return &pb.Empty{}, nil
}
func (m *fakeMaster) Suppress(context.Context, *pb.SuppressRequest) (*pb.Empty, error) {
	return &pb.Empty{}, nil
}
func (m *fakeMaster) Acknowledge(context.Context, *pb.AcknowledgeRequest) (*pb.Empty, error) {
	return &pb.Empty{}, nil
}
func (m *fakeMaster) Reconcile(context.Context, *pb.ReconcileRequest) (*pb.Empty, error) {
	return &pb.Empty{}, nil
}

func serve(t *testing.T, m pb.SchedulerServer) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterSchedulerServer(s, m)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

// runAgainst runs cfg's tasks against the master at addr; out collects
// what Run printed.
func runAgainst(t *testing.T, ctx context.Context, addr string, cfg runner.Config) (string, error) {
	t.Helper()
	d, err := scheduler.New(scheduler.Options{Master: addr, Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var out bytes.Buffer
	cfg.Master, cfg.Out = addr, &out
	if cfg.Task == nil {
		cfg.Task = &pb.TaskInfo{Name: "t", Command: []string{"true"}}
	}
	if cfg.IDs == nil {
		cfg.IDs = []string{"t"}
	}
	err = runner.Run(ctx, d, cfg)
	return out.String(), err
}

func offers(agentRes ...string) []*pb.Offer {
	var out []*pb.Offer
	for i := 0; i+1 < len(agentRes); i += 2 {
		out = append(out, &pb.Offer{Id: "o-" + agentRes[i], AgentId: agentRes[i], Resources: agentRes[i+1]})
	}
	return out
}

func TestRunFinished(t *testing.T) {
	m := &fakeMaster{offers: offers("a1", "cpus:2;mem:1024")}
	out, err := runAgainst(t, context.Background(), serve(t, m), runner.Config{Want: resources.MustParse("cpus:0.5;mem:64"),
		IDs: []string{"t-0", "t-1"}, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out)
	}
	if got := strings.Join(m.launched, " "); got != "t-0=cpus:0.5;mem:64 t-1=cpus:0.5;mem:64" {
		t.Errorf("launched %s", got)
	}
	for _, want := range []string{"subscribed as framework fw", "task t-0: RUNNING on agent a1", "task t-1: FINISHED on agent a1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestRunPrintsTransitions: a state a task is already in, or one it has
// passed (a reconciliation answer, then the updates its agent resends
// after a failover: STARTING after RUNNING), is not printed again.
func TestRunPrintsTransitions(t *testing.T) {
	m := &fakeMaster{offers: offers("a1", "cpus:2;mem:1024"), repeat: true}
	out, err := runAgainst(t, context.Background(), serve(t, m), runner.Config{Want: resources.MustParse("cpus:0.5;mem:64"), Timeout: time.Minute})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out)
	}
	if n := strings.Count(out, "task t: RUNNING"); n != 1 {
		t.Errorf("RUNNING printed %d times, want once:\n%s", n, out)
	}
	if strings.Contains(out, "task t: STARTING") {
		t.Errorf("a STARTING older than the RUNNING shown was printed:\n%s", out)
	}
	if !strings.Contains(out, "task t: FINISHED on agent a1") {
		t.Errorf("output lacks the end:\n%s", out)
	}
}

func TestRunExitCode(t *testing.T) {
	m := &fakeMaster{offers: offers("a1", "cpus:2;mem:1024"), exitCode: 3}
	out, err := runAgainst(t, context.Background(), serve(t, m), runner.Config{Want: resources.MustParse("cpus:0.5;mem:64")})
	var ee *runner.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || ee.TaskID != "t" {
		t.Fatalf("Run: %v, want the task's exit code 3\n%s", err, out)
	}
}

// TestRunLostByReconciliation: the master's LOST answer to a
// reconciliation is final (it kills the task should its agent turn up):
// Run ends with it at once instead of waiting out its timeout.
func TestRunLostByReconciliation(t *testing.T) {
	m := &fakeMaster{offers: offers("a1", "cpus:2;mem:1024"), lost: true}
	start := time.Now()
	out, err := runAgainst(t, context.Background(), serve(t, m), runner.Config{Want: resources.MustParse("cpus:0.5;mem:64"), Timeout: time.Minute})
	var ee *runner.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(out, "task t: LOST (RECONCILIATION): unknown task") {
		t.Fatalf("Run: %v, want exit 1 on the LOST answer\n%s", err, out)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Run took %v: it waited for more than the LOST answer", d)
	}
}

// TestRunUnfittable: no offer ever fits; Run gives up after the timeout
// naming the largest free resources offered.
func TestRunUnfittable(t *testing.T) {
	m := &fakeMaster{offers: offers("a1", "cpus:2;mem:1024", "a2", "cpus:1;mem:4096")}
	out, err := runAgainst(t, context.Background(), serve(t, m), runner.Config{Want: resources.MustParse("cpus:4;mem:64"), Timeout: 300 * time.Millisecond})
	if !errors.Is(err, runner.ErrTimeout) || !strings.Contains(err.Error(), "no agent can fit cpus:4;mem:64") ||
		!strings.Contains(err.Error(), "the largest free resources offered: cpus 2 on agent a1, mem 4096 on agent a2") {
		t.Fatalf("Run: %v\n%s", err, out)
	}
	for _, want := range []string{"waiting for an offer that fits cpus:4;mem:64 (1 task(s) to launch)", "agent a2 offers cpus:1;mem:4096: does not fit cpus:4;mem:64"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if len(m.launched) != 0 {
		t.Errorf("launched %v", m.launched)
	}
}

// TestRunNoOffers: subscribed, but no agent offers anything.
func TestRunNoOffers(t *testing.T) {
	out, err := runAgainst(t, context.Background(), serve(t, &fakeMaster{}), runner.Config{Want: resources.MustParse("cpus:1;mem:64"), Timeout: 300 * time.Millisecond})
	if !errors.Is(err, runner.ErrTimeout) || !strings.Contains(err.Error(), "no offer within") {
		t.Fatalf("Run: %v\n%s", err, out)
	}
}

// TestRunRefused: a launch the master refuses for good ends the run at
// once with the master's reason (no timeout set: it would wait forever
// otherwise).
func TestRunRefused(t *testing.T) {
	m := &fakeMaster{offers: offers("a1", "cpus:2;mem:1024"),
		launchErr: status.Error(codes.InvalidArgument, `operation 0: task ID "t" is in use: invalid argument`)}
	out, err := runAgainst(t, context.Background(), serve(t, m), runner.Config{Want: resources.MustParse("cpus:1;mem:64")})
	if !errors.Is(err, runner.ErrRefused) || !strings.Contains(err.Error(), `task ID "t" is in use`) {
		t.Fatalf("Run: %v\n%s", err, out)
	}
}

// TestRunUnreachable: no master at the address; Run says what it waits
// for and gives up with the dial error.
func TestRunUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	explained := 0
	out, err := runAgainst(t, context.Background(), addr, runner.Config{Want: resources.MustParse("cpus:1;mem:64"), Timeout: 500 * time.Millisecond,
		Explain: func(_ context.Context, err error) error { explained++; return fmt.Errorf("%w (explained)", err) }})
	if !errors.Is(err, runner.ErrTimeout) || !strings.Contains(err.Error(), "cannot reach the master at "+addr) ||
		!strings.Contains(err.Error(), "connection refused (explained)") {
		t.Fatalf("Run: %v\n%s", err, out)
	}
	if explained == 0 || !strings.Contains(out, "waiting for the master at "+addr+": dial tcp "+addr) {
		t.Errorf("Explain called %d times; output:\n%s", explained, out)
	}
}

// TestRunInterrupted: ctx ends before any task launched.
func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, err := runAgainst(t, ctx, serve(t, &fakeMaster{}), runner.Config{Want: resources.MustParse("cpus:1;mem:64")})
	if !errors.Is(err, runner.ErrInterrupted) {
		t.Fatalf("Run: %v\n%s", err, out)
	}
}

// failoverMaster is a master that stages the first launch of each task
// and dies before it answers: the call fails with codes.Unavailable and
// the subscription breaks, but the task runs (its agent re-registers
// with it). The next subscription offers again; a second launch of a
// task it knows is refused as in use, as the real master does, and a
// reconciliation of it is answered RUNNING, then FINISHED. A fake: the
// failover itself is in integration/ (TestMasterHAKill9DuringLaunches).
type failoverMaster struct {
	fakeMaster // offers, Decline, Suppress, Acknowledge; launched: every ACCEPT's tasks, refused ones too

	known      map[string]bool // tasks staged
	reconciled []string        // task IDs asked about
	drop       chan struct{}   // closed to break the subscription
}

func (m *failoverMaster) Subscribe(_ *pb.SubscribeRequest, stream pb.Scheduler_SubscribeServer) error {
	drop := make(chan struct{})
	m.mu.Lock()
	m.stream, m.drop = stream, drop
	m.mu.Unlock()
	m.send(&pb.Event{Event: &pb.Event_Subscribed{Subscribed: &pb.Subscribed{FrameworkId: "fw"}}})
	m.send(&pb.Event{Event: &pb.Event_Offers{Offers: &pb.Offers{Offers: m.offers}}})
	select {
	case <-stream.Context().Done():
	case <-drop:
	}
	return status.Error(codes.Unavailable, "error reading from server: EOF")
}

func (m *failoverMaster) Accept(_ context.Context, r *pb.AcceptRequest) (*pb.Empty, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, op := range r.Operations {
		for _, ti := range op.GetLaunch().GetTasks() {
			m.launched = append(m.launched, ti.TaskId)
			if m.known[ti.TaskId] {
				return nil, status.Errorf(codes.InvalidArgument, "operation 0: task ID %q is in use: invalid argument", ti.TaskId)
			}
			m.known[ti.TaskId] = true
		}
	}
	close(m.drop) // killed after staging, before answering
	return nil, status.Error(codes.Unavailable, "error reading from server: connection reset by peer")
}

func (m *failoverMaster) Reconcile(_ context.Context, r *pb.ReconcileRequest) (*pb.Empty, error) {
	m.mu.Lock()
	m.reconciled = append(m.reconciled, r.TaskIds...)
	var known []string
	for _, id := range r.TaskIds {
		if m.known[id] {
			known = append(known, id)
		}
	}
	m.mu.Unlock()
	go func() {
		for _, id := range known {
			m.send(&pb.Event{Event: &pb.Event_Update{Update: &pb.TaskStatus{TaskId: id, AgentId: "a1", State: pb.TaskState_TASK_RUNNING,
				Reason: pb.ReasonReconciliation}}})
			m.send(&pb.Event{Event: &pb.Event_Update{Update: &pb.TaskStatus{TaskId: id, AgentId: "a1", State: pb.TaskState_TASK_FINISHED,
				HasExitCode: true, Uuid: "u-" + id}}})
		}
	}()
	return &pb.Empty{}, nil
}

// TestRunLaunchInDoubt is the regression test of a flake of
// TestMasterHAKill9DuringLaunches: the leader, killed between staging a
// launch and answering it, had sent it to the agent; brim run took the
// failed call for a launch that did not happen and launched the task
// again at the new leader (which the agent's re-registration had told
// about it: refused as in use, ending the run; or, when the agent
// reported it late, launched twice: the second launch FAILED and the
// task was neither RUNNING nor LOST). A launch whose call failed without
// the master's answer counts as launched; the next subscription
// reconciles it and the task is never launched twice.
func TestRunLaunchInDoubt(t *testing.T) {
	m := &failoverMaster{fakeMaster: fakeMaster{offers: offers("a1", "cpus:2;mem:1024")}, known: map[string]bool{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := runAgainst(t, ctx, serve(t, m), runner.Config{Want: resources.MustParse("cpus:0.5;mem:64"), Timeout: time.Minute})
	if err != nil {
		t.Fatalf("Run: %v, want the task to finish\n%s", err, out)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if got := strings.Join(m.launched, " "); got != "t" {
		t.Errorf("launches %q, want t once", got)
	}
	if got := strings.Join(m.reconciled, " "); got != "t" {
		t.Errorf("reconciled %q, want t", got)
	}
	for _, want := range []string{"the master may have launched t", "task t: RUNNING on agent a1 (RECONCILIATION)", "task t: FINISHED on agent a1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// An offer of the same batch that another offer left with nothing to
// place is declined without a word: it fits ("agent a2 offers
// cpus:4;mem:2048: does not fit cpus:0.1;mem:32" was printed about it).
func TestRunNoFitOnlyForWhatDoesNotFit(t *testing.T) {
	m := &fakeMaster{offers: offers("a3", "cpus:0.05;mem:16", "a1", "cpus:2;mem:1024", "a2", "cpus:4;mem:2048")}
	out, err := runAgainst(t, context.Background(), serve(t, m), runner.Config{Want: resources.MustParse("cpus:0.1;mem:32"), Timeout: time.Minute})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out)
	}
	if strings.Contains(out, "agent a2 offers") || strings.Contains(out, "agent a1 offers") {
		t.Errorf("an offer that fits was said not to:\n%s", out)
	}
	if !strings.Contains(out, "agent a3 offers cpus:0.05;mem:16: does not fit cpus:0.1;mem:32") {
		t.Errorf("the offer too small was not named:\n%s", out)
	}
}
