package master

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/brimnode/brim/resources"
)

// The domain talks to its peers through outboxes of domain messages; the
// gRPC transport owns the streams, drains the outboxes and converts each
// message to protobuf (convert.go) outside the master's lock.

// outbox is the queue of one peer's stream: messages are queued without
// blocking; a queue past its limit ends the stream (the peer is too slow
// and will reconnect). A nil outbox (a disconnected peer) drops what is
// sent. The queue holds only what is pending — an idle agent's outbox is a
// few words, not a preallocated buffer (a 256-slot channel per agent was
// 256 MB of the master's heap at 50,000 agents).
//
// A framework's stream drains its outbox when ready fires. An agent's
// outbox drains itself (startDrain): a goroutine started when something is
// queued sends it, oldest first, and ends when the queue is empty, so
// that an idle agent's stream holds no goroutine for its sends.
type outbox[T any] struct {
	mu      sync.Mutex
	pending []T
	limit   int
	ready   chan struct{}      // 1-buffered: something was queued
	cancel  context.CancelFunc // ends the stream
	// drain sends a batch on the stream (startDrain); one call at a time.
	drain    func([]T) error
	draining bool // a goroutine runs drain; no second one starts
	stopped  bool // stopDrain was called or drain failed: no more sends
	drainers sync.WaitGroup
	closedBy error // why the outbox ended its stream (first reason only)
}

// newOutbox makes a stream's queue holding at most limit messages: agents
// get few messages at a time, frameworks get bursts of offers and updates.
func newOutbox[T any](cancel context.CancelFunc, limit int) *outbox[T] {
	return &outbox[T]{limit: limit, ready: make(chan struct{}, 1), cancel: cancel}
}

// Stream queue limits. The queues hold only what is pending, so a limit
// costs nothing until it is used: it bounds what a peer that stopped
// reading can make the master hold. An agent's queue must take a whole
// launch at once — every RunTask of an ACCEPT is queued before its
// sender takes any, and an agent holds up to ≈1,300 containers at
// 20,000 open files — with the acknowledgements of their updates
// behind them. (It held 256 before: one ACCEPT of 300 small tasks, or
// acknowledgements piling up behind a few large RunTasks to a busy
// agent, ended the stream and lost the launches still queued.)
const (
	agentQueue     = 8192
	frameworkQueue = 8192
)

func (c *outbox[T]) send(m T) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	if len(c.pending) >= c.limit {
		if c.closedBy == nil {
			c.closedBy = fmt.Errorf("%w: %d messages queued", errOutboxFull, len(c.pending))
		}
		c.mu.Unlock()
		c.cancel()
		return false
	}
	c.pending = append(c.pending, m)
	start := c.startLocked()
	c.mu.Unlock()
	if start {
		go c.drainLoop()
		return true
	}
	select {
	case c.ready <- struct{}{}:
	default: // already signalled
	}
	return true
}

// take returns what is queued, oldest first, and empties the queue; the
// stream's sender calls it when ready fires.
func (c *outbox[T]) take() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.pending
	c.pending = nil
	return out
}

// startDrain makes the outbox send itself with drain, called from one
// goroutine at a time with what is queued, oldest first; the first call
// comes now, even with nothing queued (a stream's first message can go
// there, ahead of the queue). A drain error stops the sends and ends the
// stream. The stream's owner calls stopDrain before the stream ends.
func (c *outbox[T]) startDrain(drain func([]T) error) {
	c.mu.Lock()
	c.drain = drain
	start := c.startLocked()
	c.mu.Unlock()
	if start {
		go c.drainLoop()
	}
}

// startLocked says whether send must start a drainer, and counts it.
func (c *outbox[T]) startLocked() bool {
	if c.drain == nil || c.draining || c.stopped {
		return false
	}
	c.draining = true
	c.drainers.Add(1)
	return true
}

func (c *outbox[T]) drainLoop() {
	defer c.drainers.Done()
	for {
		c.mu.Lock()
		if c.stopped {
			c.draining = false
			c.mu.Unlock()
			return
		}
		batch := c.pending
		c.pending = nil
		c.mu.Unlock()
		if err := c.drain(batch); err != nil {
			c.mu.Lock()
			c.stopped, c.draining = true, false
			if c.closedBy == nil {
				c.closedBy = fmt.Errorf("send: %w", err)
			}
			c.mu.Unlock()
			c.cancel()
			return
		}
		c.mu.Lock()
		if len(c.pending) == 0 {
			c.draining = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
}

// errOutboxFull: a peer did not take its messages as fast as they came.
var errOutboxFull = errors.New("the peer's queue is full")

// closeCause says why the outbox ended its stream, or nil if it did not.
func (c *outbox[T]) closeCause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closedBy
}

// stopDrain stops the sends and waits for a drain under way: nothing is
// sent once it returns.
func (c *outbox[T]) stopDrain() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.drainers.Wait()
}

// toAgent is a message for an agent: *runTask, *killTask, *ackStatus or
// *resizeTask.
type toAgent interface{ isToAgent() }

// runTask starts a task on its agent.
type runTask struct {
	info             taskInfo
	framework, agent string
	res              resources.Resources
	// runAsRoot: the run_as_root ACL allows the task's principal to run
	// it as root for its role (the agent checks the resolved uid).
	runAsRoot bool
	// lent: its revocable resources are capacity a demand's hold lends
	// (RunTask.lent), not the agent's oversubscription estimate.
	lent bool
}

// killTask kills framework's task taskID (another framework's task of
// that ID is never touched).
type killTask struct {
	taskID, framework string
	// preempted: the master takes the task's resources back; message
	// names what needed them (pb.KillTask.preempted).
	preempted bool
	message   string
}

// ackStatus forwards a framework's acknowledgement of a status update of
// framework's task taskID.
type ackStatus struct{ taskID, framework, uuid string }

// resizeTask changes framework's running task taskID's resources to res.
type resizeTask struct {
	taskID, framework string
	res               resources.Resources
}

func (*runTask) isToAgent()    {}
func (*killTask) isToAgent()   {}
func (*ackStatus) isToAgent()  {}
func (*resizeTask) isToAgent() {}

// toFramework is an event for a framework: *subscribed, *offersMade,
// *offerRescinded or *taskStatus (an update).
type toFramework interface{ isToFramework() }

// subscribed confirms a subscription.
type subscribed struct {
	framework string
	heartbeat time.Duration
}

// offersMade are new offers, with their agents' hostnames.
type offersMade struct {
	offers    []*offerEntry // never changed once made
	hostnames []string
}

// offerRescinded withdraws an offer.
type offerRescinded struct{ offerID string }

func (*subscribed) isToFramework()     {}
func (*offersMade) isToFramework()     {}
func (*offerRescinded) isToFramework() {}
func (*taskStatus) isToFramework()     {}

// taskStatus is a task status update as the master keeps and forwards it;
// never changed once recorded (a new one replaces it). The reason
// vocabulary is masterlinkpb's (convert.go), shared with agents.
type taskStatus struct {
	taskID, agentID, frameworkID string
	state                        taskState
	reason, message              string
	hasExitCode                  bool
	exitCode                     int32
	uuid                         string
	timestampUnixNano            int64
	resources                    string // the task's resources, with a resource update's answer
}

// registration is an agent's Register message: who it is, what it offers
// and the tasks it runs.
type registration struct {
	agentID, hostname    string // agentID "" the first time
	resources, revocable string // as the agent wrote them
	revInUse             string // what revocable containers held (revInUseSet: sent)
	revInUseSet          bool
	attributes           map[string]string
	oversub              *AgentOversubState // nil: no estimator
	score                float64            // performance score; 0: none
	tasks                []taskReport
	moreTasks            bool // further pages of tasks follow (ReregisterTasks)
}

// taskReport is a task an agent reports when it registers.
type taskReport struct {
	info      taskInfo // info.id "": a report without a task, ignored
	framework string
	resources string
	state     taskState
	// acknowledged: terminal, and its framework acknowledged its end.
	acknowledged bool
	// A terminal task's end, as the agent keeps it.
	reason, message string
	exitCode        *int32
}

// fromAgent is a message from a registered agent: *taskStatus or
// *agentOversub (a heartbeat is nil: it only shows the agent is alive).
type fromAgent interface{ isFromAgent() }

// agentOversub is an agent's new oversubscription status.
type agentOversub struct {
	revocable string // the revocable resources, as the agent wrote them
	inUse     string // what revocable containers held then (inUseSet: sent)
	inUseSet  bool
	state     *AgentOversubState
}

func (*taskStatus) isFromAgent()   {}
func (*agentOversub) isFromAgent() {}

// subscription is a framework's Subscribe call.
type subscription struct {
	info            *frameworkInfo // nil: none sent
	suppressedRoles []string
}

// frameworkInfo is what a framework says of itself when it subscribes.
type frameworkInfo struct {
	id, name, principal string // id "": a new framework
	roles               []string
	revocable           bool
	failover            time.Duration // <= 0: the master's default
}
