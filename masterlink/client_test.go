package masterlink_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// idleRunner runs nothing; the tests drive Client.Update directly.
type idleRunner struct{}

func (idleRunner) LaunchTask(context.Context, masterlink.Task) error        { return nil }
func (idleRunner) KillTask(context.Context, string, string) error           { return nil }
func (idleRunner) Tasks(context.Context) ([]masterlink.TaskSnapshot, error) { return nil, nil }

// scriptedMaster is a master that records what the agent sends and
// acknowledges only when told to.
type scriptedMaster struct {
	pb.UnimplementedAgentLinkServer
	statuses chan *pb.TaskStatus
	acks     chan *pb.StatusAck
	regs     chan *pb.Register
	overs    chan *pb.Oversubscribed
	cmds     chan *pb.MasterMessage // sent to the agent as they come
}

func (m *scriptedMaster) Connect(stream pb.AgentLink_ConnectServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	m.regs <- first.GetRegister()
	id := first.GetRegister().GetAgentId()
	if id == "" {
		id = "assigned-id"
	}
	if err := stream.Send(&pb.MasterMessage{Msg: &pb.MasterMessage_Registered{Registered: &pb.Registered{AgentId: id, HeartbeatIntervalNanos: int64(time.Hour)}}}); err != nil {
		return err
	}
	go func() {
		for {
			select {
			case a := <-m.acks:
				if stream.Send(&pb.MasterMessage{Msg: &pb.MasterMessage_Ack{Ack: a}}) != nil {
					return
				}
			case cmd := <-m.cmds:
				if stream.Send(cmd) != nil {
					return
				}
			case <-stream.Context().Done():
				return
			}
		}
	}()
	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		if st := msg.GetStatus(); st != nil {
			m.statuses <- st
		}
		if o := msg.GetOversubscribed(); o != nil {
			m.overs <- o
		}
	}
}

func startScripted(t *testing.T, opts ...grpc.ServerOption) (*scriptedMaster, string) {
	t.Helper()
	m, addr, _ := startScriptedServer(t, opts...)
	return m, addr
}

// startScriptedServer is startScripted with its server, for a test that
// stops it as a killed master stops: its connections closed.
func startScriptedServer(t *testing.T, opts ...grpc.ServerOption) (*scriptedMaster, string, *grpc.Server) {
	t.Helper()
	return startScriptedServerWith(t, nil, opts...)
}

// startScriptedServerWith is startScriptedServer with more services:
// register adds them to the server, given its address.
func startScriptedServerWith(t *testing.T, register func(*grpc.Server, string), opts ...grpc.ServerOption) (*scriptedMaster, string, *grpc.Server) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &scriptedMaster{statuses: make(chan *pb.TaskStatus, 100), acks: make(chan *pb.StatusAck, 10), regs: make(chan *pb.Register, 10),
		overs: make(chan *pb.Oversubscribed, 100), cmds: make(chan *pb.MasterMessage, 10)}
	s := grpc.NewServer(opts...)
	pb.RegisterAgentLinkServer(s, m)
	if register != nil {
		register(s, l.Addr().String())
	}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return m, l.Addr().String(), s
}

func newClient(t *testing.T, addr, dir string) *masterlink.Client {
	t.Helper()
	return newClientWith(t, addr, dir, idleRunner{})
}

func newClientWith(t *testing.T, addr, dir string, r masterlink.TaskRunner) *masterlink.Client {
	t.Helper()
	c, err := masterlink.New(masterlink.Options{Master: addr, StateDir: dir, Resources: resources.MustParse("cpus:1;mem:128"),
		Runner: r, RetryMin: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func run(t *testing.T, c *masterlink.Client) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func next(t *testing.T, ch <-chan *pb.TaskStatus) *pb.TaskStatus {
	t.Helper()
	select {
	case st := <-ch:
		return st
	case <-time.After(30 * time.Second):
		t.Fatal("no status update")
		return nil
	}
}

// TestRetryUntilAcknowledgedOneInFlight: an update is resent with the same
// UUID until acknowledged; the task's next update waits for that.
func TestRetryUntilAcknowledgedOneInFlight(t *testing.T) {
	m, addr := startScripted(t)
	dir := t.TempDir()
	c := newClient(t, addr, dir)
	for _, s := range []pb.TaskState{pb.TaskState_TASK_RUNNING, pb.TaskState_TASK_FINISHED} {
		if err := c.Update(masterlink.Status{TaskID: "t1", State: s}); err != nil {
			t.Fatal(err)
		}
	}
	run(t, c)
	first := next(t, m.statuses)
	if first.State != pb.TaskState_TASK_RUNNING || first.Uuid == "" {
		t.Fatalf("first update %s %q", first.State, first.Uuid)
	}
	// Two retries of the same update, never the next one.
	for range 2 {
		if st := next(t, m.statuses); st.Uuid != first.Uuid {
			t.Fatalf("got %s (%s) before %s was acknowledged", st.State, st.Uuid, first.Uuid)
		}
	}
	m.acks <- &pb.StatusAck{TaskId: "t1", Uuid: first.Uuid}
	for {
		st := next(t, m.statuses)
		if st.Uuid == first.Uuid {
			continue // a retry sent before the acknowledgement arrived
		}
		if st.State != pb.TaskState_TASK_FINISHED {
			t.Fatalf("after the ack: %s", st.State)
		}
		break
	}
	if got := c.AgentID(); got != "assigned-id" {
		t.Fatalf("agent id %q", got)
	}
	b, err := os.ReadFile(filepath.Join(dir, "masterlink", "agent-id"))
	if err != nil || strings.TrimSpace(string(b)) != "assigned-id" {
		t.Fatalf("persisted agent id %q, %v", b, err)
	}
}

// TestCheckpointSurvivesRestart: unacknowledged updates are on disk before
// Update returns, a repeated state is dropped, and a new client on the same
// state dir re-registers with the same ID and delivers them.
func TestCheckpointSurvivesRestart(t *testing.T) {
	m, addr := startScripted(t)
	dir := t.TempDir()
	c := newClient(t, "127.0.0.1:1", dir) // never connects
	for _, s := range []pb.TaskState{pb.TaskState_TASK_RUNNING, pb.TaskState_TASK_RUNNING} {
		if err := c.Update(masterlink.Status{TaskID: "t1", State: s}); err != nil {
			t.Fatal(err)
		}
	}
	code := 7
	if err := c.Update(masterlink.Status{TaskID: "t1", State: pb.TaskState_TASK_FAILED, ExitCode: &code}); err != nil {
		t.Fatal(err)
	}
	c2 := newClient(t, addr, dir)
	run(t, c2)
	if reg := <-m.regs; reg.AgentId != "" {
		t.Fatalf("first registration with id %q", reg.AgentId)
	}
	st := next(t, m.statuses)
	if st.State != pb.TaskState_TASK_RUNNING {
		t.Fatalf("first delivered %s", st.State)
	}
	m.acks <- &pb.StatusAck{TaskId: "t1", Uuid: st.Uuid}
	for {
		s := next(t, m.statuses)
		if s.Uuid == st.Uuid {
			continue
		}
		if s.State != pb.TaskState_TASK_FAILED || !s.HasExitCode || s.ExitCode != 7 {
			t.Fatalf("second delivered %s exit %v %d (the repeated RUNNING must be dropped)", s.State, s.HasExitCode, s.ExitCode)
		}
		break
	}
}

// TestOversubscription: the status set before the link is up travels with
// the Register; later changes are sent whole (a revocable change keeps the
// corrections), in order, and an unchanged status is not sent again.
func TestOversubscription(t *testing.T) {
	m, addr := startScripted(t)
	c := newClient(t, addr, t.TempDir())
	kill := &pb.Correction{Type: "KILL", ContainerId: "c1", TaskId: "t1", Signal: "load", Value: 3, Threshold: 1, AppliedUnixNano: 42}
	if err := c.SetOversubscription(masterlink.Oversubscription{Revocable: resources.MustParse("cpus{REV}:1"), Estimator: "fixed",
		QoS: "load", Summary: "fixed 1 cpu", Corrections: []*pb.Correction{kill}}); err != nil {
		t.Fatal(err)
	}
	run(t, c)
	var reg *pb.Register
	select {
	case reg = <-m.regs:
	case <-time.After(30 * time.Second):
		t.Fatal("no register")
	}
	o := reg.GetOversubscription()
	if reg.Revocable != "cpus{REV}:1" || o.GetRevocable() != "cpus{REV}:1" || o.GetEstimator() != "fixed" || o.GetQos() != "load" ||
		o.GetSummary() != "fixed 1 cpu" || len(o.GetCorrections()) != 1 || !proto.Equal(o.GetCorrections()[0], kill) {
		t.Fatalf("register: %v", reg)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !c.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("never connected")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.SetRevocable(resources.MustParse("cpus{REV}:1")); err != nil { // unchanged: not sent
		t.Fatal(err)
	}
	if err := c.SetRevocable(resources.MustParse("cpus{REV}:0.5")); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateOversubscription(func(o *masterlink.Oversubscription) { o.Corrections = nil }); err != nil {
		t.Fatal(err)
	}
	next := func() *pb.Oversubscribed {
		select {
		case o := <-m.overs:
			return o
		case <-time.After(30 * time.Second):
			t.Fatal("no oversubscribed message")
			return nil
		}
	}
	if o := next(); o.Revocable != "cpus{REV}:0.5" || len(o.Corrections) != 1 || o.Estimator != "fixed" {
		t.Fatalf("first update: %v, want the new revocable with the corrections kept", o)
	}
	if o := next(); o.Revocable != "cpus{REV}:0.5" || len(o.Corrections) != 0 || o.RevocableInUseSet {
		t.Fatalf("second update: %v, want no corrections (and no in-use figure: none was set)", o)
	}
	// An estimate goes with what was in use when it was computed.
	if err := c.UpdateOversubscription(func(o *masterlink.Oversubscription) {
		o.Revocable, o.InUse, o.InUseSet = resources.MustParse("cpus{REV}:0.25"), resources.MustParse("cpus{REV}:0.25;mem{REV}:64"), true
	}); err != nil {
		t.Fatal(err)
	}
	if o := next(); o.Revocable != "cpus{REV}:0.25" || o.RevocableInUse != "cpus{REV}:0.25;mem{REV}:64" || !o.RevocableInUseSet {
		t.Fatalf("third update: %v, want the estimate with its in-use figure", o)
	}
}

// holdingRunner holds the tasks named in held (Tasks lists them ended).
type holdingRunner struct {
	idleRunner
	mu   sync.Mutex
	held []string
}

func (r *holdingRunner) hold(ids ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = ids
}

func (r *holdingRunner) Tasks(context.Context) ([]masterlink.TaskSnapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []masterlink.TaskSnapshot
	for _, id := range r.held {
		out = append(out, masterlink.TaskSnapshot{Task: masterlink.Task{ID: id}, State: pb.TaskState_TASK_FINISHED})
	}
	return out, nil
}

// TestEndedTasksForgotten: a task whose end the master acknowledged is
// forgotten (its checkpoint removed) once the runner no longer holds it,
// not before, nor while one of its updates waits. Before, every task an
// agent ever ran kept a checkpoint and a queue in memory.
func TestEndedTasksForgotten(t *testing.T) {
	m, addr := startScripted(t)
	dir := t.TempDir()
	r := &holdingRunner{}
	r.hold("t1", "t2", "t3")
	c := newClientWith(t, addr, dir, r)
	for _, id := range []string{"t1", "t2", "t3"} {
		for _, s := range []pb.TaskState{pb.TaskState_TASK_RUNNING, pb.TaskState_TASK_FINISHED} {
			if err := c.Update(masterlink.Status{TaskID: id, State: s}); err != nil {
				t.Fatal(err)
			}
		}
	}
	run(t, c)
	// Acknowledge everything but t3's end.
	acked, done := map[string]bool{}, map[string]int{}
	for done["t1"] < 2 || done["t2"] < 2 || done["t3"] < 1 {
		st := next(t, m.statuses)
		if acked[st.Uuid] || st.TaskId == "t3" && st.State == pb.TaskState_TASK_FINISHED {
			continue
		}
		acked[st.Uuid] = true
		done[st.TaskId]++
		m.acks <- &pb.StatusAck{TaskId: st.TaskId, Uuid: st.Uuid}
	}
	records := func() []string {
		ents, err := os.ReadDir(filepath.Join(dir, "masterlink", "updates"))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".") {
				out = append(out, strings.TrimSuffix(e.Name(), ".json"))
			}
		}
		slices.Sort(out)
		return out
	}
	time.Sleep(3 * time.Second) // three rounds: every task is held
	if got := records(); !slices.Equal(got, []string{"t1", "t2", "t3"}) {
		t.Fatalf("checkpoints while the runner holds every task: %v", got)
	}
	r.hold("t1")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if got := records(); slices.Equal(got, []string{"t1", "t3"}) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("checkpoints once t2 and t3 are no longer held: %v, want t1 (held) and t3 (its end unacknowledged)", got)
		}
	}
}
