package master

import (
	"context"
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
type outbox[T any] struct {
	mu      sync.Mutex
	pending []T
	limit   int
	ready   chan struct{}      // 1-buffered: something was queued
	cancel  context.CancelFunc // ends the stream
}

// newOutbox makes a stream's queue holding at most limit messages: agents
// get few messages at a time, frameworks get bursts of offers and updates.
func newOutbox[T any](cancel context.CancelFunc, limit int) *outbox[T] {
	return &outbox[T]{limit: limit, ready: make(chan struct{}, 1), cancel: cancel}
}

// Stream queue limits.
const (
	agentQueue     = 256
	frameworkQueue = 8192
)

func (c *outbox[T]) send(m T) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	if len(c.pending) >= c.limit {
		c.mu.Unlock()
		c.cancel()
		return false
	}
	c.pending = append(c.pending, m)
	c.mu.Unlock()
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
}

// killTask kills a task.
type killTask struct{ taskID, framework string }

// ackStatus forwards a framework's acknowledgement of a status update.
type ackStatus struct{ taskID, uuid string }

// resizeTask changes a running task's resources to res.
type resizeTask struct {
	taskID string
	res    resources.Resources
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
