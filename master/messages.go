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
// transport (master/transport) owns the streams, drains the outboxes and
// converts each message to protobuf outside the master's lock.

// Outbox is the queue of one peer's stream: messages are queued without
// blocking; a queue past its limit ends the stream (the peer is too slow
// and will reconnect). A nil Outbox (a disconnected peer) drops what is
// sent. The queue holds only what is pending — an idle agent's Outbox is a
// few words, not a preallocated buffer (a 256-slot channel per agent was
// 256 MB of the master's heap at 50,000 agents).
//
// A framework's stream drains its Outbox when Ready fires. An agent's
// Outbox drains itself (StartDrain): a goroutine started when something is
// queued sends it, oldest first, and ends when the queue is empty, so
// that an idle agent's stream holds no goroutine for its sends. Safe for
// concurrent use; the stream's owner calls StopDrain before the stream
// ends.
type Outbox[T any] struct {
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

// NewOutbox makes a stream's queue holding at most limit messages: agents
// get few messages at a time, frameworks get bursts of offers and updates.
func NewOutbox[T any](cancel context.CancelFunc, limit int) *Outbox[T] {
	return &Outbox[T]{limit: limit, ready: make(chan struct{}, 1), cancel: cancel}
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
	AgentQueue     = 8192
	FrameworkQueue = 8192
)

func (c *Outbox[T]) send(m T) bool {
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

// Ready fires (1-buffered) when something was queued: a framework's
// stream then Takes it.
func (c *Outbox[T]) Ready() <-chan struct{} { return c.ready }

// Take returns what is queued, oldest first, and empties the queue; the
// stream's sender calls it when ready fires.
func (c *Outbox[T]) Take() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.pending
	c.pending = nil
	return out
}

// StartDrain makes the outbox send itself with drain, called from one
// goroutine at a time with what is queued, oldest first; the first call
// comes now, even with nothing queued (a stream's first message can go
// there, ahead of the queue). A drain error stops the sends and ends the
// stream. The stream's owner calls stopDrain before the stream ends.
func (c *Outbox[T]) StartDrain(drain func([]T) error) {
	c.mu.Lock()
	c.drain = drain
	start := c.startLocked()
	c.mu.Unlock()
	if start {
		go c.drainLoop()
	}
}

// startLocked says whether send must start a drainer, and counts it.
func (c *Outbox[T]) startLocked() bool {
	if c.drain == nil || c.draining || c.stopped {
		return false
	}
	c.draining = true
	c.drainers.Add(1)
	return true
}

func (c *Outbox[T]) drainLoop() {
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

// CloseCause says why the outbox ended its stream, or nil if it did not.
func (c *Outbox[T]) CloseCause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closedBy
}

// StopDrain stops the sends and waits for a drain under way: nothing is
// sent once it returns.
func (c *Outbox[T]) StopDrain() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.drainers.Wait()
}

// ToAgent is a message for an agent: *RunTask, *KillTask, *AckStatus or
// *ResizeTask.
type ToAgent interface{ isToAgent() }

// RunTask starts a task on its agent.
type RunTask struct {
	Info                 TaskInfo
	FrameworkID, AgentID string
	Resources            resources.Resources
	// RunAsRoot: the run_as_root ACL allows the task's principal to run
	// it as root for its role (the agent checks the resolved uid).
	RunAsRoot bool
	// Lent: its revocable resources are capacity a demand's hold lends
	// (RunTask.lent), not the agent's oversubscription estimate.
	Lent bool
}

// KillTask kills FrameworkID's task TaskID (another framework's task of
// that ID is never touched).
type KillTask struct {
	TaskID, FrameworkID string
	// Preempted: the master takes the task's resources back; Message
	// names what needed them (pb.KillTask.preempted).
	Preempted bool
	Message   string
}

// AckStatus forwards a framework's acknowledgement of a status update of
// FrameworkID's task TaskID.
type AckStatus struct{ TaskID, FrameworkID, UUID string }

// ResizeTask changes FrameworkID's running task TaskID's resources to
// Resources.
type ResizeTask struct {
	TaskID, FrameworkID string
	Resources           resources.Resources
}

func (*RunTask) isToAgent()    {}
func (*KillTask) isToAgent()   {}
func (*AckStatus) isToAgent()  {}
func (*ResizeTask) isToAgent() {}

// ToFramework is an event for a framework: *Subscribed, *OffersMade,
// *OfferRescinded, *DemandEvent or *TaskStatus (an update).
type ToFramework interface{ isToFramework() }

// Subscribed confirms a subscription.
type Subscribed struct {
	FrameworkID string
	Heartbeat   time.Duration
}

// OffersMade are new offers, with their agents' hostnames.
type OffersMade struct {
	offers    []*offerEntry // never changed once made
	hostnames []string
}

// Offer is an offer as its framework sees it.
type Offer struct {
	ID, FrameworkID, AgentID, Hostname, Role string
	Resources                                resources.Resources
	// DemandID is the demand whose capacity it hands over; "" for DRF's.
	DemandID string
}

// Offers are the offers made, in the order made.
func (o *OffersMade) Offers() []Offer {
	out := make([]Offer, len(o.offers))
	for i, e := range o.offers {
		out[i] = Offer{ID: e.id, FrameworkID: e.fw, AgentID: e.agent, Hostname: o.hostnames[i], Role: e.role, Resources: e.res, DemandID: e.demand}
	}
	return out
}

// OfferRescinded withdraws an offer.
type OfferRescinded struct{ OfferID string }

func (*Subscribed) isToFramework()     {}
func (*OffersMade) isToFramework()     {}
func (*OfferRescinded) isToFramework() {}
func (*TaskStatus) isToFramework()     {}

// TaskStatus is a task status update as the master keeps and forwards it;
// never changed once recorded (a new one replaces it). The reason
// vocabulary is masterlinkpb's (reasons.go), shared with agents.
type TaskStatus struct {
	TaskID, AgentID, FrameworkID string
	State                        TaskState
	Reason, Message              string
	HasExitCode                  bool
	ExitCode                     int32
	UUID                         string
	TimestampUnixNano            int64
	Resources                    string // the task's resources, with a resource update's answer
}

// Registration is an agent's Register message: who it is, what it offers
// and the tasks it runs.
type Registration struct {
	AgentID, Hostname    string // AgentID "" the first time
	Resources, Revocable string // as the agent wrote them
	RevocableInUse       string // what revocable containers held (RevocableInUseSet: sent)
	RevocableInUseSet    bool
	Attributes           map[string]string
	Oversub              *AgentOversubState // nil: no estimator
	Score                float64            // performance score; 0: none
	Tasks                []TaskReport
	MoreTasks            bool // further pages of tasks follow (ReregisterTasks)
}

// TaskReport is a task an agent reports when it registers.
type TaskReport struct {
	Info        TaskInfo // Info.ID "": a report without a task, ignored
	FrameworkID string
	Resources   string
	State       TaskState
	// Acknowledged: terminal, and its framework acknowledged its end.
	Acknowledged bool
	// A terminal task's end, as the agent keeps it.
	Reason, Message string
	ExitCode        *int32
}

// FromAgent is a message from a registered agent: *TaskStatus or
// *AgentOversub (a heartbeat is nil: it only shows the agent is alive).
type FromAgent interface{ isFromAgent() }

// AgentOversub is an agent's new oversubscription status.
type AgentOversub struct {
	Revocable string // the revocable resources, as the agent wrote them
	InUse     string // what revocable containers held then (InUseSet: sent)
	InUseSet  bool
	State     *AgentOversubState
}

func (*TaskStatus) isFromAgent()   {}
func (*AgentOversub) isFromAgent() {}

// Subscription is a framework's Subscribe call.
type Subscription struct {
	Info            *FrameworkInfo // nil: none sent
	SuppressedRoles []string
}

// FrameworkInfo is what a framework says of itself when it subscribes.
type FrameworkInfo struct {
	ID, Name, Principal string // ID "": a new framework
	Roles               []string
	Revocable           bool
	Failover            time.Duration // <= 0: the master's default
}
