package masterlink

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/atomicfile"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"google.golang.org/protobuf/proto"
)

type nopRunner struct{}

func (nopRunner) LaunchTask(context.Context, Task) error         { return nil }
func (nopRunner) KillTask(context.Context, string, string) error { return nil }
func (nopRunner) Tasks(context.Context) ([]TaskSnapshot, error)  { return nil, nil }

// TestResizeAnswersQueued: answers to resource updates take the task's
// latest state and are queued even when that state repeats; an answer for
// a task that ended, or that the client never reported, is dropped.
func TestResizeAnswersQueued(t *testing.T) {
	c, err := New(Options{Master: "127.0.0.1:1", StateDir: t.TempDir(), Runner: nopRunner{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Status{
		{TaskID: "t1", State: pb.TaskState_TASK_RUNNING},
		{TaskID: "t1", Reason: pb.ReasonResourcesUpdated, Resources: resources.MustParse("cpus:1;mem:64")},
		{TaskID: "t1", Reason: pb.ReasonResourcesUpdateFailed, Message: "no room"},
		{TaskID: "t1", State: pb.TaskState_TASK_RUNNING}, // a plain repeat: dropped
		{TaskID: "t2", State: pb.TaskState_TASK_RUNNING},
		{TaskID: "t2", State: pb.TaskState_TASK_FINISHED},
		{TaskID: "t2", Reason: pb.ReasonResourcesUpdated, Resources: resources.MustParse("cpus:1")},
		{TaskID: "never", Reason: pb.ReasonResourcesUpdateFailed},
	} {
		if err := c.Update(s); err != nil {
			t.Fatal(err)
		}
	}
	q := c.out.queues["t1"]
	if len(q.Pending) != 3 {
		t.Fatalf("t1 queue: %+v, want RUNNING and two answers", q.Pending)
	}
	for _, u := range q.Pending[1:] {
		if u.State != pb.TaskState_TASK_RUNNING {
			t.Fatalf("answer in state %s, want the task's latest (RUNNING)", u.State)
		}
	}
	if st := q.Pending[1].proto("t1", "", "a"); st.Resources != "cpus:1;mem:64" || st.Reason != pb.ReasonResourcesUpdated {
		t.Fatalf("answer on the wire: %+v", st)
	}
	if n := len(c.out.queues["t2"].Pending); n != 2 {
		t.Fatalf("t2 queue has %d updates, want RUNNING and FINISHED only", n)
	}
	if c.out.queues["never"] != nil {
		t.Fatalf("answer queued for a task never reported")
	}
	// The answers survive a restart (the resources field is checkpointed).
	c2, err := New(Options{Master: "127.0.0.1:1", StateDir: c.opts.StateDir, Runner: nopRunner{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c2.out.queues["t1"].Pending[1].Resources; got != "cpus:1;mem:64" {
		t.Fatalf("checkpointed answer resources %q", got)
	}
}

var t0 = time.Unix(1_700_000_000, 0)

// fixedRand returns r for every draw.
func fixedRand(r float64) func() float64 { return func() float64 { return r } }

func running(id string) Status  { return Status{TaskID: id, State: pb.TaskState_TASK_RUNNING} }
func finished(id string) Status { return Status{TaskID: id, State: pb.TaskState_TASK_FINISHED} }

// add enqueues st as update uuid and puts it, as the Client does once the
// checkpoint is written.
func add(t *testing.T, o *outbox, st Status, uuid string, at time.Time) bool {
	t.Helper()
	q, ok := o.enqueue(st, uuid, at)
	if ok {
		o.put(q)
	}
	return ok
}

func uuids(hs []head) string {
	var s []string
	for _, h := range hs {
		s = append(s, h.TaskID+"/"+h.Update.UUID)
	}
	return strings.Join(s, " ")
}

// TestOutboxEnqueue: updates queue in order; a repeated state and an
// answer to a resize for a task that ended or was never reported are
// dropped; an answer takes the latest state; the outbox is unchanged until
// the checkpointed queue is put.
func TestOutboxEnqueue(t *testing.T) {
	o := newOutbox(backoff{Min: time.Second, Max: time.Minute}, fixedRand(0))
	if _, ok := o.enqueue(Status{TaskID: "t1", Reason: pb.ReasonResourcesUpdated}, "x", t0); ok {
		t.Fatal("answer queued for a task never reported")
	}
	q, ok := o.enqueue(running("t1"), "u1", t0)
	if !ok || len(q.Pending) != 1 {
		t.Fatalf("enqueue: %+v %v", q, ok)
	}
	if o.last("t1") != pb.TaskState_TASK_UNKNOWN || len(o.queues) != 0 {
		t.Fatal("enqueue changed the outbox before put (a failed checkpoint must leave it as it was)")
	}
	o.put(q)
	if add(t, o, running("t1"), "u2", t0) {
		t.Fatal("a repeat of the latest state queued")
	}
	if !add(t, o, Status{TaskID: "t1", Reason: pb.ReasonResourcesUpdateFailed, Message: "no room"}, "u3", t0) {
		t.Fatal("answer dropped")
	}
	if !add(t, o, Status{TaskID: "t1", Reason: pb.ReasonResourcesUpdated}, "u4", t0) {
		t.Fatal("a second answer (same state) dropped")
	}
	if !add(t, o, finished("t1"), "u5", t0) || add(t, o, Status{TaskID: "t1", Reason: pb.ReasonResourcesUpdated}, "u6", t0) {
		t.Fatal("finished dropped, or an answer after the end queued")
	}
	var got []string
	for _, u := range o.queues["t1"].Pending {
		got = append(got, u.UUID+":"+u.State.String())
	}
	if want := "u1:TASK_RUNNING u3:TASK_RUNNING u4:TASK_RUNNING u5:TASK_FINISHED"; strings.Join(got, " ") != want {
		t.Fatalf("queue %v, want %s", got, want)
	}
}

// TestOutboxDueAndAck: one head in flight per task; resent at the backoff
// (doubling, capped), not before; the ack of the head makes the next
// update due at once; stale or duplicate acks change nothing; a new stream
// resends every head with the backoff from the start.
func TestOutboxDueAndAck(t *testing.T) {
	o := newOutbox(backoff{Min: 10 * time.Second, Max: 30 * time.Second}, fixedRand(0))
	add(t, o, running("a"), "a1", t0)
	add(t, o, finished("a"), "a2", t0.Add(time.Millisecond))
	add(t, o, running("b"), "b1", t0.Add(2*time.Millisecond))

	type step struct {
		at       time.Duration // since t0
		ack      string        // task/uuid acknowledged before
		ackOK    bool          // the ack drops the head
		rewind   bool
		want     string
		wantNext time.Duration // since t0; -1: none
	}
	for i, s := range []step{
		{at: 0, want: "a/a1 b/b1", wantNext: 10 * time.Second},
		{at: 5 * time.Second, want: "", wantNext: 10 * time.Second},
		{at: 10 * time.Second, want: "a/a1 b/b1", wantNext: 30 * time.Second},                      // retry 1: 20 s
		{at: 30 * time.Second, want: "a/a1 b/b1", wantNext: 60 * time.Second},                      // retry 2: 40 s, capped at 30
		{at: 31 * time.Second, ack: "a/a2", want: "", wantNext: 60 * time.Second},                  // not the head: stale
		{at: 32 * time.Second, ack: "a/a1", ackOK: true, want: "a/a2", wantNext: 42 * time.Second}, // next update at once
		{at: 33 * time.Second, ack: "a/a1", want: "", wantNext: 42 * time.Second},                  // duplicate
		{at: 34 * time.Second, rewind: true, want: "a/a2 b/b1", wantNext: 44 * time.Second},        // new stream
		{at: 35 * time.Second, ack: "b/b1", ackOK: true, want: "", wantNext: 44 * time.Second},
		{at: 36 * time.Second, ack: "a/a2", ackOK: true, want: "", wantNext: -1},
	} {
		if s.ack != "" {
			task, id, _ := strings.Cut(s.ack, "/")
			q, ok := o.ack("", task, id)
			if ok != s.ackOK {
				t.Fatalf("step %d: ack %s: ok %v, want %v", i, s.ack, ok, s.ackOK)
			}
			if ok && (q.TaskID != task || (len(q.Pending) > 0 && q.Pending[0].UUID == id)) {
				t.Fatalf("step %d: ack returned %+v", i, q)
			}
		}
		if s.rewind {
			o.rewind()
		}
		hs, next := o.due(t0.Add(s.at))
		if got := uuids(hs); got != s.want {
			t.Fatalf("step %d at %v: due %q, want %q", i, s.at, got, s.want)
		}
		wantNext := time.Time{}
		if s.wantNext >= 0 {
			wantNext = t0.Add(s.wantNext)
		}
		if !next.Equal(wantNext) {
			t.Fatalf("step %d at %v: next %v, want %v", i, s.at, next.Sub(t0), s.wantNext)
		}
	}
}

// TestBackoff: doubling from Min, capped at Max, the jitter only ever
// shortening a delay, by at most its share.
func TestBackoff(t *testing.T) {
	b := backoff{Min: 500 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2}
	for n, want := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		if got := b.delay(n, 0); got != want {
			t.Errorf("delay(%d) without jitter %v, want %v", n, got, want)
		}
		if got := b.delay(n, 0.5); got != want*9/10 {
			t.Errorf("delay(%d) with r=0.5 %v, want %v", n, got, want*9/10)
		}
	}
	for n := range 100 {
		for _, r := range []float64{0, 0.3, 0.999999} {
			d := b.delay(n, r)
			if d > b.Max || d < b.Min*8/10 {
				t.Fatalf("delay(%d, %v) = %v: outside [%v, %v]", n, r, d, b.Min*8/10, b.Max)
			}
		}
	}
	if d := b.delay(1000, 0.999999); d < 4*time.Second {
		t.Fatalf("delay after many retries %v: the cap must hold (no overflow), jitter at most 20%%", d)
	}
}

// TestOutboxCheckpointRoundTrip: what enqueue and ack return, saved,
// loads back as the same queues; what was in flight is due at once after
// the load.
func TestOutboxCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	o := newOutbox(backoff{Min: time.Second, Max: time.Minute}, fixedRand(0))
	code := 3
	for i, st := range []Status{running("a"), {TaskID: "a", State: pb.TaskState_TASK_FAILED, ExitCode: &code, Message: "boom"},
		running("b"), {TaskID: "b", Reason: pb.ReasonResourcesUpdated, Resources: resources.MustParse("cpus:2;mem:64")}, running("c")} {
		q, ok := o.enqueue(st, fmt.Sprintf("u%d", i), t0.Add(time.Duration(i)*time.Second))
		if !ok {
			t.Fatalf("status %d dropped", i)
		}
		if err := q.save(testDir(t, dir)); err != nil {
			t.Fatal(err)
		}
		o.put(q)
	}
	o.due(t0)
	q, ok := o.ack("", "c", "u4")
	if !ok {
		t.Fatal("ack c")
	}
	if err := q.save(testDir(t, dir)); err != nil {
		t.Fatal(err)
	}
	loaded, err := loadQueues(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 3 {
		t.Fatalf("loaded %d queues", len(loaded))
	}
	p := newOutbox(o.retry, fixedRand(0))
	for id, lq := range loaded {
		w := o.queues[id]
		if lq.TaskID != w.TaskID || lq.Last != w.Last || len(lq.Pending) != len(w.Pending) {
			t.Fatalf("task %s: loaded %+v, saved %+v", id, lq, w)
		}
		for i := range w.Pending {
			a, b := lq.Pending[i], w.Pending[i]
			if !proto.Equal(a.proto(id, "", "ag"), b.proto(id, "", "ag")) || !a.Timestamp.Equal(b.Timestamp) {
				t.Fatalf("task %s update %d: loaded %+v, saved %+v", id, i, a, b)
			}
		}
		p.put(lq)
	}
	if p.last("c") != pb.TaskState_TASK_RUNNING || len(p.queues["c"].Pending) != 0 {
		t.Fatalf("acknowledged task c: %+v (its last state must stay known)", p.queues["c"])
	}
	if add(t, p, running("c"), "again", t0) {
		t.Fatal("a repeat after the restart queued again")
	}
	if hs, _ := p.due(t0.Add(time.Millisecond)); uuids(hs) != "a/u0 b/u2" {
		t.Fatalf("due after load: %q", uuids(hs))
	}
	if _, err := loadQueues(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing dir loaded")
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadQueues(dir); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Fatalf("corrupt checkpoint: %v", err)
	}
}

// TestOutboxAcknowledged: a task is acknowledged once its terminal update
// and every one before it are; what the agent tells the master at
// re-registration so that it never adopts the ended task again.
func TestOutboxAcknowledged(t *testing.T) {
	o := newOutbox(backoff{Min: time.Second, Max: time.Minute}, fixedRand(0))
	if o.acknowledged("", "t1") {
		t.Fatal("unknown task acknowledged")
	}
	add(t, o, running("t1"), "u1", t0)
	add(t, o, finished("t1"), "u2", t0)
	if o.acknowledged("", "t1") {
		t.Fatal("acknowledged with two updates pending")
	}
	o.ack("", "t1", "u1")
	if o.acknowledged("", "t1") {
		t.Fatal("acknowledged with the terminal update pending")
	}
	o.ack("", "t1", "u2")
	if !o.acknowledged("", "t1") {
		t.Fatal("not acknowledged after the terminal update's ack")
	}
	add(t, o, running("t2"), "u3", t0)
	o.ack("", "t2", "u3")
	if o.acknowledged("", "t2") {
		t.Fatal("a running task acknowledged")
	}
}

// TestOutboxPerFramework (issue 30): two frameworks' tasks of one ID have
// queues of their own: the second's updates never wait behind the
// first's unacknowledged end (before, b's STARTING and RUNNING waited
// for the retry of a's FINISHED, minutes away, which the master then took
// for b's end), each update goes out with its framework, an
// acknowledgement reaches the update it names (by framework and task, or
// by task and UUID from an older master), and a new launch of an ended
// task drops that run's unacknowledged updates.
func TestOutboxPerFramework(t *testing.T) {
	o := newOutbox(backoff{Min: time.Hour, Max: time.Hour}, fixedRand(0))
	add(t, o, Status{TaskID: "x", FrameworkID: "a", State: pb.TaskState_TASK_FINISHED}, "a1", t0)
	if hs, _ := o.due(t0); uuids(hs) != "x/a1" || hs[0].FrameworkID != "a" {
		t.Fatalf("due %q (%+v), want a's end", uuids(hs), hs)
	}
	add(t, o, Status{TaskID: "x", FrameworkID: "b", State: pb.TaskState_TASK_STARTING}, "b1", t0.Add(time.Second))
	add(t, o, Status{TaskID: "x", FrameworkID: "b", State: pb.TaskState_TASK_RUNNING}, "b2", t0.Add(2*time.Second))
	hs, _ := o.due(t0.Add(time.Second))
	if uuids(hs) != "x/b1" || hs[0].FrameworkID != "b" {
		t.Fatalf("due %q, want b's STARTING at once beside a's end in flight", uuids(hs))
	}
	if st := hs[0].Update.proto(hs[0].TaskID, hs[0].FrameworkID, "ag"); st.FrameworkId != "b" || st.TaskId != "x" {
		t.Fatalf("on the wire: %+v", st)
	}
	if _, ok := o.ack("a", "x", "b0"); ok {
		t.Fatal("an acknowledgement of an update no queue has was taken")
	}
	if _, ok := o.ack("b", "x", "b1"); !ok {
		t.Fatal("b's acknowledgement of b1 refused")
	}
	if _, ok := o.ack("", "x", "b2"); !ok { // an older master names no framework
		t.Fatal("an acknowledgement by task and UUID refused")
	}
	if o.last(queueKey("a", "x")) != pb.TaskState_TASK_FINISHED || o.last(queueKey("b", "x")) != pb.TaskState_TASK_RUNNING {
		t.Fatalf("last states %s %s", o.last(queueKey("a", "x")), o.last(queueKey("b", "x")))
	}
	// a launches x again: its ended run's end is no longer wanted.
	q, ok := o.relaunched(queueKey("a", "x"))
	if !ok || len(q.Pending) != 0 || q.FrameworkID != "a" {
		t.Fatalf("relaunched: %+v %v", q, ok)
	}
	o.put(q)
	// A task reported through its ID's queue alone (an older runner's
	// checkpoint) answers for its framework's.
	add(t, o, Status{TaskID: "old", State: pb.TaskState_TASK_FINISHED}, "o1", t0)
	if o.acknowledged("a", "old") {
		t.Fatal("a task with its end pending acknowledged")
	}
	if _, ok := o.ack("a", "old", "o1"); !ok || !o.acknowledged("a", "old") {
		t.Fatal("the end of a task of the ID's queue, acknowledged, is not")
	}
	if _, ok := o.relaunched(queueKey("b", "x")); ok {
		t.Fatal("a running task's updates dropped at a relaunch")
	}
	if !add(t, o, Status{TaskID: "x", FrameworkID: "a", State: pb.TaskState_TASK_STARTING}, "a2", t0.Add(3*time.Second)) {
		t.Fatal("the new run's STARTING dropped")
	}
}

// TestCheckpointPerFramework: each framework's task has its own
// checkpoint file, read back under the same queue; a checkpoint written
// before frameworks were kept (t.json, no framework) still loads.
func TestCheckpointPerFramework(t *testing.T) {
	dir := t.TempDir()
	for _, q := range []*queue{
		{TaskID: "x", FrameworkID: "a", Last: pb.TaskState_TASK_FINISHED, Pending: []update{{UUID: "a1", State: pb.TaskState_TASK_FINISHED}}},
		{TaskID: "x", FrameworkID: "../b", Last: pb.TaskState_TASK_RUNNING},
		{TaskID: "old", Last: pb.TaskState_TASK_RUNNING},
	} {
		if err := q.save(testDir(t, dir)); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 3 {
		t.Fatalf("checkpoint files %v, want 3 in %s", files, dir)
	}
	qs, err := loadQueues(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a, b, old := qs[queueKey("a", "x")], qs[queueKey("../b", "x")], qs["old"]; a == nil || len(a.Pending) != 1 || b == nil || b.FrameworkID != "../b" || old == nil {
		t.Fatalf("loaded %v", qs)
	}
}

// TestQueueDurability: a task's status checkpoint is fsynced while it
// holds a terminal update, not for STARTING or RUNNING alone.
func TestQueueDurability(t *testing.T) {
	for _, tc := range []struct {
		states []pb.TaskState
		want   bool
	}{
		{nil, false},
		{[]pb.TaskState{pb.TaskState_TASK_STARTING}, false},
		{[]pb.TaskState{pb.TaskState_TASK_STARTING, pb.TaskState_TASK_RUNNING}, false},
		{[]pb.TaskState{pb.TaskState_TASK_RUNNING, pb.TaskState_TASK_FINISHED}, true},
		{[]pb.TaskState{pb.TaskState_TASK_FAILED}, true},
	} {
		q := &queue{TaskID: "t"}
		for _, s := range tc.states {
			q.Pending = append(q.Pending, update{State: s})
		}
		if got := q.durable(); got != tc.want {
			t.Errorf("durable(%v) = %v, want %v", tc.states, got, tc.want)
		}
	}
}

// testDir is the atomicfile.Dir of dir.
func testDir(t *testing.T, dir string) *atomicfile.Dir {
	t.Helper()
	d, err := atomicfile.NewDir(dir, 8)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
