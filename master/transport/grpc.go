package transport

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The gRPC transport: each handler authenticates, converts its request
// (convert.go), calls the domain and maps the error once (toStatus). The
// stream handlers own their streams and drain the domain's outboxes.

// RegisterGRPC registers the master's AgentLink and Scheduler services.
func (a *API) RegisterGRPC(s *grpc.Server) {
	pb.RegisterAgentLinkServer(s, agentLink{a: a})
	pb.RegisterSchedulerServer(s, schedulerAPI{a: a})
}

// agentLink serves pb.AgentLinkServer.
type agentLink struct {
	pb.UnimplementedAgentLinkServer
	a *API
}

// Connect serves one agent stream: Register first, then heartbeats, status
// updates and oversubscription changes until the stream breaks or the
// master ends it. On a server made with masterlink.ServerOptions the
// stream holds one goroutine, this one, receiving: the master ends the
// stream by canceling its context (masterlink.StreamCancel), which
// unblocks the Recv. Sends, rare for an agent, come from a goroutine that
// runs while the outbox has messages (startDrain). At 50,000 agents,
// goroutine stacks were most of the master's memory: two per agent, one
// receiving, one waiting to end the stream and sending.
func (s agentLink) Connect(stream pb.AgentLink_ConnectServer) error {
	end, ok := masterlink.StreamCancel(stream.Context())
	if !ok {
		return s.connectWaiting(stream)
	}
	var closed atomic.Bool // by the master
	c := master.NewOutbox[master.ToAgent](func() { closed.Store(true); end() }, master.AgentQueue)
	err := s.receive(stream, c)
	c.StopDrain() // no Send once Connect returns
	if closed.Load() {
		return status.Error(codes.Unavailable, "agent stream closed by the master")
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// connectWaiting is Connect on a server whose streams the handler cannot
// cancel: this goroutine waits for the end (returning ends the stream,
// which unblocks a Recv) and another one receives.
func (s agentLink) connectWaiting(stream pb.AgentLink_ConnectServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	c := master.NewOutbox[master.ToAgent](cancel, master.AgentQueue)
	errc := make(chan error, 1)
	go func() {
		errc <- s.receive(stream, c)
		cancel()
	}()
	<-ctx.Done()
	c.StopDrain() // no Send once Connect returns
	select {
	case err := <-errc:
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	default:
		return status.Error(codes.Unavailable, "agent stream closed by the master")
	}
}

// receive registers the agent of stream with outbox c, starts c's sends
// (the Registered message first) and hands the agent's messages to the
// master until the stream breaks; its error is the stream's status.
func (s agentLink) receive(stream pb.AgentLink_ConnectServer, c *master.Outbox[master.ToAgent]) error {
	m := s.a.m
	// The registration's deep part (the registry, the allocator) runs on
	// the master's registration workers (workers.go): a goroutine keeps
	// the stack it grew until garbage collections halve it, so the one
	// receiving for the stream's life stays small.
	t, err := m.AdmitRegistration(stream.Context())
	if err != nil {
		return err
	}
	ag, kill, err := s.register(stream, c, t)
	t.Release()
	if err != nil {
		return err
	}
	defer func() {
		if cause := c.CloseCause(); cause != nil {
			s.a.log.Warn("agent stream ended by the master", "agent", ag, "err", cause)
		}
		m.AgentGone(ag, c)
	}()
	registered := registeredMessage(ag, m.HeartbeatInterval(), kill)
	c.StartDrain(func(msgs []master.ToAgent) error {
		if registered != nil { // ahead of anything queued
			if err := stream.Send(registered); err != nil {
				return err
			}
			registered = nil
		}
		for _, msg := range msgs {
			if err := stream.Send(agentMessageToPB(msg)); err != nil {
				return err
			}
		}
		return nil
	})
	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		m.AgentMessage(ag, c, agentMessageFromPB(msg))
	}
}

// register receives the agent's registration admitted with ticket t,
// authenticates it and registers it with outbox c: it returns the agent
// ID and the tasks the agent must kill, or the stream's status.
func (s agentLink) register(stream pb.AgentLink_ConnectServer, c *master.Outbox[master.ToAgent], t *master.Ticket) (string, []master.KillTask, error) {
	a := s.a
	first, err := stream.Recv()
	if err != nil {
		return "", nil, err
	}
	if first.GetRegister() == nil {
		return "", nil, status.Error(codes.InvalidArgument, "first message must be a register")
	}
	reg := registrationFromPB(first.GetRegister())
	principal, err := a.authenticateAgent(stream.Context(), reg.AgentID)
	if err != nil {
		a.log.Warn("agent refused", "agent", reg.AgentID, "hostname", reg.Hostname, "err", err)
		return "", nil, a.grpcError(err)
	}
	if reg.MoreTasks {
		if err := receiveTaskPages(stream, reg); err != nil {
			a.log.Warn("agent registration incomplete", "agent", reg.AgentID, "hostname", reg.Hostname, "err", err)
			return "", nil, toStatus(err)
		}
	}
	t.Received()
	ag, kill, err := a.m.RegisterAgent(reg, principal, c, t.Release)
	if err != nil {
		return "", nil, a.grpcError(err)
	}
	return ag, kill, nil
}

// maxReregisterBytes bounds the task pages of one registration: past it
// the stream is refused rather than the master's memory spent on it.
const maxReregisterBytes = 1 << 30

// receiveTaskPages adds the ReregisterTasks pages that follow a Register
// with more_tasks to reg, up to the one marked last: the master
// reconciles the agent's tasks only once it knows them all. Errors wrap
// ErrInvalid (another message, too many pages) or are the stream's.
//
//	agent                          master
//	Register{tasks: page 1, more_tasks} ─▶
//	ReregisterTasks{page 2}           ─▶
//	ReregisterTasks{page n, last}     ─▶  reconcile
//	                                  ◀─ Registered
func receiveTaskPages(stream pb.AgentLink_ConnectServer, reg *master.Registration) error {
	total := 0
	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		page := msg.GetReregisterTasks()
		if page == nil {
			return fmt.Errorf("register: %w: got %T before the last page of tasks", master.ErrInvalid, msg.GetMsg())
		}
		if total += proto.Size(page); total > maxReregisterBytes {
			return fmt.Errorf("register: %w: task pages past %d bytes", master.ErrInvalid, maxReregisterBytes)
		}
		reg.Tasks = taskReportsFromPB(reg.Tasks, page.GetTasks())
		if page.GetLast() {
			return nil
		}
	}
}

// schedulerAPI serves pb.SchedulerServer.
type schedulerAPI struct {
	pb.UnimplementedSchedulerServer
	a *API
}

// Subscribe registers or fails over a framework and streams its events.
func (s schedulerAPI) Subscribe(req *pb.SubscribeRequest, stream pb.Scheduler_SubscribeServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	sub := subscriptionFromPB(req)
	if err := s.a.authorizeSubscribe(ctx, sub); err != nil {
		return s.a.grpcError(err)
	}
	m := s.a.m
	c := master.NewOutbox[master.ToFramework](cancel, master.FrameworkQueue)
	id, err := m.Subscribe(sub, c)
	if err != nil {
		return s.a.grpcError(err)
	}
	defer m.FrameworkGone(id, c)
	hb := time.NewTicker(m.HeartbeatInterval())
	defer hb.Stop()
	for {
		select {
		case <-ctx.Done():
			if stream.Context().Err() != nil {
				return nil
			}
			return status.Error(codes.Unavailable, "framework stream closed by the master")
		case <-c.Ready():
			for _, ev := range c.Take() {
				if err := stream.Send(frameworkEventToPB(ev)); err != nil {
					return err
				}
			}
		case <-hb.C:
			if err := stream.Send(heartbeatEvent()); err != nil {
				return err
			}
		}
	}
}

// call authenticates a call for framework id (the caller must be the
// principal that subscribed it), runs fn and maps its error.
func (s schedulerAPI) call(ctx context.Context, id string, fn func() error) (*pb.Empty, error) {
	_, _, err := s.a.authorizeCall(ctx, id)
	if err == nil {
		err = fn()
	}
	if err != nil {
		return nil, s.a.grpcError(err)
	}
	return &pb.Empty{}, nil
}

// Accept applies operations to offers of one agent (the domain's
// planAccept); RESERVE and UNRESERVE operations need the caller's ACLs,
// a task that runs as root its run_as_root ACL.
func (s schedulerAPI) Accept(ctx context.Context, req *pb.AcceptRequest) (*pb.Empty, error) {
	acc := acceptRequestFromPB(req)
	p, a, err := s.a.authorizeCall(ctx, acc.FrameworkID)
	if err == nil && a != nil {
		err = authorizeOperations(a, p, acc.Operations)
	}
	if err == nil {
		acc.MayRunAsRoot = mayRunAsRoot(a, p)
		err = s.a.m.Accept(acc)
	}
	if err != nil {
		return nil, s.a.grpcError(err)
	}
	return &pb.Empty{}, nil
}

// mayRunAsRoot is the run_as_root decision for principal p, the caller
// (the principal that subscribed the framework: authorizeCall): only a
// rule of a's ACLs naming it allows it, and nothing without an
// Authorizer.
func mayRunAsRoot(a Authorizer, p string) func(role string) error {
	return func(role string) error {
		if a == nil {
			return fmt.Errorf("the master has no ACLs (--credentials, --acls with a run_as_root rule): %w", master.ErrForbidden)
		}
		return a.Authorize(p, ActionRunAsRoot, role)
	}
}

// authorizeOperations checks the reserve and unreserve ACLs for the roles
// of RESERVE and UNRESERVE operations; a reservation must be made on
// behalf of the caller. Malformed operations are left to Accept.
func authorizeOperations(a Authorizer, principal string, ops []master.Operation) error {
	for i, op := range ops {
		var action string
		switch op.Kind {
		case master.OpReserve:
			action = ActionReserve
		case master.OpUnreserve:
			action = ActionUnreserve
		default:
			continue
		}
		res, err := resources.Parse(op.Resources)
		if err != nil {
			continue
		}
		for _, e := range res {
			if action == ActionReserve && e.Reservation != nil && e.Reservation.Principal != principal {
				return fmt.Errorf("operation %d: reserve %s: principal %q is not the caller %q: %w", i, e.String(), e.Reservation.Principal, principal, master.ErrForbidden)
			}
			if err := a.Authorize(principal, action, e.Role); err != nil {
				return fmt.Errorf("operation %d: %w", i, err)
			}
		}
	}
	return nil
}

// Decline gives offers back with an optional refusal filter.
func (s schedulerAPI) Decline(ctx context.Context, req *pb.DeclineRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error { return s.a.m.Decline(req.FrameworkId, req.OfferIds, refuseOf(req.Filters)) })
}

// SubmitDemand submits a demand for the framework (docs/demands.md);
// its role needs the caller's submit_demand ACL.
func (s schedulerAPI) SubmitDemand(ctx context.Context, req *pb.SubmitDemandRequest) (*pb.Empty, error) {
	p, a, err := s.a.authorizeCall(ctx, req.FrameworkId)
	var specs []*demand.Spec
	if err == nil {
		specs, err = ParseDemandDocuments([]byte(req.Document))
	}
	if err == nil {
		for _, sp := range specs {
			if sp.Framework != "" && sp.Framework != req.FrameworkId {
				err = fmt.Errorf("%w: FrameworkID: %q is not the caller %s", master.ErrInvalid, sp.Framework, req.FrameworkId)
			}
			sp.Framework = req.FrameworkId
		}
	}
	if err == nil {
		_, err = s.a.m.SubmitDemands(specs, func(role string) error {
			if a == nil {
				return nil
			}
			return a.Authorize(p, ActionSubmitDemand, role)
		})
	}
	if err != nil {
		return nil, s.a.grpcError(err)
	}
	return &pb.Empty{}, nil
}

// CancelDemand cancels one of the framework's demands.
func (s schedulerAPI) CancelDemand(ctx context.Context, req *pb.CancelDemandRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error {
		return s.a.m.CancelDemand(req.DemandId, func(d *demand.Demand) error {
			if d.Framework != req.FrameworkId {
				return fmt.Errorf("demand %s of another framework: %w", d.ID, master.ErrNotFound)
			}
			return nil
		})
	})
}

// Revive clears the framework's filters and unsuppresses its roles.
func (s schedulerAPI) Revive(ctx context.Context, req *pb.ReviveRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error { return s.a.m.Revive(req.FrameworkId, req.Roles) })
}

// Suppress stops offers to the framework's roles until Revive.
func (s schedulerAPI) Suppress(ctx context.Context, req *pb.SuppressRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error { return s.a.m.Suppress(req.FrameworkId, req.Roles) })
}

// Kill asks the task's agent to kill it.
func (s schedulerAPI) Kill(ctx context.Context, req *pb.KillRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error { return s.a.m.Kill(req.FrameworkId, req.TaskId) })
}

// Acknowledge forwards a framework's acknowledgement to the agent.
func (s schedulerAPI) Acknowledge(ctx context.Context, req *pb.AcknowledgeRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error {
		return s.a.m.Acknowledge(req.FrameworkId, req.AgentId, req.TaskId, req.Uuid)
	})
}

// Reconcile sends the latest known state of tasks.
func (s schedulerAPI) Reconcile(ctx context.Context, req *pb.ReconcileRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error { return s.a.m.Reconcile(req.FrameworkId, req.TaskIds) })
}

// UpdateTask changes a running task's resources (Master.UpdateTask).
func (s schedulerAPI) UpdateTask(ctx context.Context, req *pb.UpdateTaskRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error {
		return s.a.m.UpdateTask(req.FrameworkId, req.TaskId, req.Resources, req.OfferIds)
	})
}
