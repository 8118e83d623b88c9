package masterlink

import (
	"slices"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// update is one checkpointed status update.
type update struct {
	UUID      string       `json:"uuid"`
	State     pb.TaskState `json:"state"`
	Reason    string       `json:"reason,omitempty"`
	Message   string       `json:"message,omitempty"`
	ExitCode  *int         `json:"exitCode,omitempty"`
	Resources string       `json:"resources,omitempty"`
	Timestamp time.Time    `json:"timestamp"`
}

func newUpdate(st Status, id string, at time.Time) update {
	u := update{UUID: id, State: st.State, Reason: st.Reason, Message: st.Message, ExitCode: st.ExitCode, Timestamp: at}
	if !st.Resources.IsEmpty() {
		u.Resources = st.Resources.String()
	}
	return u
}

func (u *update) proto(taskID, frameworkID, agentID string) *pb.TaskStatus {
	st := &pb.TaskStatus{TaskId: taskID, FrameworkId: frameworkID, AgentId: agentID, State: u.State, Reason: u.Reason, Message: u.Message,
		Uuid: u.UUID, TimestampUnixNano: u.Timestamp.UnixNano(), Resources: u.Resources}
	if u.ExitCode != nil {
		st.HasExitCode, st.ExitCode = true, int32(*u.ExitCode)
	}
	return st
}

// queueKey names the queue of framework fw's task id: tasks of several
// frameworks may share an ID on an agent, one after the other, and the
// updates of one must never wait behind, or be taken for, another's. A
// task ID has no "/" (the master's rule), so the key is unambiguous; a
// status without a framework (a runner older than frameworks in
// statuses, a checkpoint written then) keys by the task ID alone.
func queueKey(fw, id string) string {
	if fw == "" {
		return id
	}
	return id + "/" + fw
}

// queue is a task's unacknowledged updates, oldest first: the exported
// fields are its checkpoint (one file per task), the others live only as
// long as the process.
type queue struct {
	TaskID      string       `json:"taskId"`
	FrameworkID string       `json:"frameworkId,omitempty"`
	Last        pb.TaskState `json:"last"`
	Pending     []update     `json:"pending,omitempty"`

	inflight string    // UUID of the head as last sent on this stream
	retryAt  time.Time // when the head in flight is sent again
	attempt  int       // sends of the head in flight on this stream, less one
}

func (q *queue) key() string { return queueKey(q.FrameworkID, q.TaskID) }

// head is an update due to be sent.
type head struct {
	TaskID, FrameworkID string
	Update              update
}

// outbox is the agent's at-least-once queue of status updates: per task,
// the updates the master has not acknowledged, sent one at a time, in
// order, resent with backoff until acknowledged. It is pure — no I/O, no
// clock, no gRPC (callers pass the time, new UUIDs, and the random source
// of the jitter) — so each rule is unit tested alone; the Client persists
// what enqueue and ack return and sends what due returns.
//
//	enqueue ──► pending ──due──► head in flight ──ack(head)──► next head due
//	                               │  ▲
//	                    retryAt    │  │ resent, backoff grows
//	                               └──┘   (rewind on a new stream: at once)
//
// Not safe for concurrent use: the Client holds its lock around it.
type outbox struct {
	queues map[string]*queue // by queueKey
	retry  backoff
	rand   func() float64 // in [0, 1): the jitter
}

func newOutbox(retry backoff, rand func() float64) *outbox {
	return &outbox{queues: map[string]*queue{}, retry: retry, rand: rand}
}

// enqueue returns task st's queue (st.FrameworkID's st.TaskID) with st
// appended as update (uuid id, made at), for the caller to checkpoint and
// then put; the outbox itself is unchanged. ok is false when st is
// dropped: a repeat of the task's latest state (runners may report again
// after a restart), or an answer to a resource update for a task that
// ended or was never reported. Such an answer takes the task's latest
// state.
func (o *outbox) enqueue(st Status, id string, at time.Time) (q *queue, ok bool) {
	old := o.queues[queueKey(st.FrameworkID, st.TaskID)]
	if resizeAnswer(st.Reason) {
		if old == nil || old.Last == pb.TaskState_TASK_UNKNOWN || old.Last.Terminal() {
			return nil, false
		}
		st.State = old.Last
	} else if old != nil && old.Last == st.State {
		return nil, false
	}
	q = &queue{TaskID: st.TaskID, FrameworkID: st.FrameworkID}
	if old != nil {
		*q = *old
		q.Pending = slices.Clone(old.Pending)
	}
	q.Pending = append(q.Pending, newUpdate(st, id, at))
	q.Last = st.State
	return q, true
}

// put installs q (from enqueue, once checkpointed, or from disk).
func (o *outbox) put(q *queue) { o.queues[q.key()] = q }

// relaunched returns, for the caller to checkpoint and then put, task
// key's queue emptied of the updates of an ended run still pending: the
// master launched the task (framework and ID) again, so it has let go of
// the run that ended, and a retry of that run's final update would be
// taken for the new run's. ok is false when there is nothing to drop.
func (o *outbox) relaunched(key string) (q *queue, ok bool) {
	old := o.queues[key]
	if old == nil || !old.Last.Terminal() || len(old.Pending) == 0 {
		return nil, false
	}
	q = &queue{TaskID: old.TaskID, FrameworkID: old.FrameworkID, Last: pb.TaskState_TASK_UNKNOWN}
	return q, true
}

// due returns the heads to send at now, marking them in flight: every
// head not yet sent on this stream, and every head whose retry fell due
// (its next retry then backs off further); and when the earliest head in
// flight falls due again (zero when none is pending).
func (o *outbox) due(now time.Time) (out []head, next time.Time) {
	for _, q := range o.queues {
		if len(q.Pending) == 0 {
			continue
		}
		h := q.Pending[0]
		if q.inflight != h.UUID {
			q.inflight, q.attempt = h.UUID, 0
			q.retryAt = now.Add(o.retry.delay(0, o.rand()))
			out = append(out, head{q.TaskID, q.FrameworkID, h})
		} else if !now.Before(q.retryAt) {
			q.attempt++
			q.retryAt = now.Add(o.retry.delay(q.attempt, o.rand()))
			out = append(out, head{q.TaskID, q.FrameworkID, h})
		}
		if next.IsZero() || q.retryAt.Before(next) {
			next = q.retryAt
		}
	}
	slices.SortFunc(out, func(a, b head) int { return a.Update.Timestamp.Compare(b.Update.Timestamp) })
	return out, next
}

// ack drops the head of framework fw's task taskID if its UUID is id and
// returns the queue to checkpoint; ok is false for a duplicate or stale
// acknowledgement. An update's UUID is unique: an acknowledgement naming
// another framework than the update's queue (an older master sends none;
// an update of an older runner's checkpoint has none) is matched by the
// task ID and the UUID. The next update of the task is due at once.
func (o *outbox) ack(fw, taskID, id string) (q *queue, ok bool) {
	q = o.queues[queueKey(fw, taskID)]
	if q == nil || len(q.Pending) == 0 || q.Pending[0].UUID != id {
		for _, c := range o.queues {
			if c.TaskID == taskID && len(c.Pending) > 0 && c.Pending[0].UUID == id {
				q = c
				break
			}
		}
	}
	if q == nil || len(q.Pending) == 0 || q.Pending[0].UUID != id {
		return nil, false
	}
	q.Pending = slices.Delete(q.Pending, 0, 1)
	q.inflight, q.attempt = "", 0
	return q, true
}

// rewind makes every head due at once, its backoff from the start: a new
// stream has seen none of them.
func (o *outbox) rewind() {
	for _, q := range o.queues {
		q.inflight, q.attempt = "", 0
	}
}

// last returns the latest state reported for task key (queueKey;
// TASK_UNKNOWN: none).
func (o *outbox) last(key string) pb.TaskState {
	if q := o.queues[key]; q != nil {
		return q.Last
	}
	return pb.TaskState_TASK_UNKNOWN
}

// acknowledged reports whether framework fw's task id's latest reported
// state is terminal and every update of it was acknowledged (the queue
// stays, with nothing pending, after its last acknowledgement). A task
// with no queue of its framework was reported through the queue of its
// ID alone (a runner, or a checkpoint, older than frameworks in
// statuses): that one answers.
func (o *outbox) acknowledged(fw, id string) bool {
	q := o.queues[queueKey(fw, id)]
	if q == nil {
		q = o.queues[queueKey("", id)]
	}
	return q != nil && q.Last.Terminal() && len(q.Pending) == 0
}

// backoff is a capped exponential backoff with jitter: the delay before
// retry n (from 0) is Min·2ⁿ capped at Max, less a random share of up to
// Jitter of it — so it never exceeds Max and spreads the retries of many
// agents (20,000 reconnecting at once after a master restart).
type backoff struct {
	Min, Max time.Duration
	Jitter   float64 // in [0, 1)
}

// delay returns the delay before retry n given r, a random number in
// [0, 1): within [(1−Jitter)·d, d] for d = min(Min·2ⁿ, Max).
func (b backoff) delay(n int, r float64) time.Duration {
	d := b.Min
	for i := 0; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	return d - time.Duration(float64(d)*b.Jitter*r)
}
