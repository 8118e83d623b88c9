package master

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/brimnode/brim/demand"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The gRPC transport: each handler authenticates, converts its request
// (convert.go), calls the domain and maps the error once (toStatus). The
// stream handlers own their streams and drain the domain's outboxes.

// RegisterGRPC registers the master's AgentLink and Scheduler services.
func (m *Master) RegisterGRPC(s *grpc.Server) {
	pb.RegisterAgentLinkServer(s, agentLink{m: m})
	pb.RegisterSchedulerServer(s, schedulerAPI{m: m})
}

// agentLink serves pb.AgentLinkServer.
type agentLink struct {
	pb.UnimplementedAgentLinkServer
	m *Master
}

// Connect serves one agent stream: Register first, then heartbeats, status
// updates and oversubscription changes until the stream breaks. Its
// receiving goroutine ends with the stream, when Connect returns.
func (s agentLink) Connect(stream pb.AgentLink_ConnectServer) error {
	m := s.m
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if first.GetRegister() == nil {
		return status.Error(codes.InvalidArgument, "first message must be a register")
	}
	reg := registrationFromPB(first.GetRegister())
	principal, err := m.authenticateAgent(stream.Context(), reg.agentID)
	if err != nil {
		m.log.Warn("agent refused", "agent", reg.agentID, "hostname", reg.hostname, "err", err)
		return m.grpcError(err)
	}
	if reg.moreTasks {
		if err := receiveTaskPages(stream, reg); err != nil {
			m.log.Warn("agent registration incomplete", "agent", reg.agentID, "hostname", reg.hostname, "err", err)
			return toStatus(err)
		}
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	c := newOutbox[toAgent](cancel, agentQueue)
	ag, kill, err := m.registerAgent(reg, principal, c)
	if err != nil {
		return m.grpcError(err)
	}
	if err := stream.Send(registeredMessage(ag, m.opts.HeartbeatInterval, kill)); err != nil {
		m.agentGone(ag, c)
		return err
	}
	defer m.agentGone(ag, c)
	errc := make(chan error, 1)
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				errc <- err
				cancel()
				return
			}
			m.agentMessage(ag, c, agentMessageFromPB(msg))
		}
	}()
	for {
		select {
		case <-ctx.Done():
			select {
			case err := <-errc:
				if errors.Is(err, context.Canceled) {
					return nil
				}
				return err
			default:
				return status.Error(codes.Unavailable, "agent stream closed by the master")
			}
		case <-c.ready:
			for _, msg := range c.take() {
				if err := stream.Send(agentMessageToPB(msg)); err != nil {
					return err
				}
			}
		}
	}
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
func receiveTaskPages(stream pb.AgentLink_ConnectServer, reg *registration) error {
	total := 0
	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		page := msg.GetReregisterTasks()
		if page == nil {
			return fmt.Errorf("register: %w: got %T before the last page of tasks", ErrInvalid, msg.GetMsg())
		}
		if total += proto.Size(page); total > maxReregisterBytes {
			return fmt.Errorf("register: %w: task pages past %d bytes", ErrInvalid, maxReregisterBytes)
		}
		reg.tasks = taskReportsFromPB(reg.tasks, page.GetTasks())
		if page.GetLast() {
			return nil
		}
	}
}

// schedulerAPI serves pb.SchedulerServer.
type schedulerAPI struct {
	pb.UnimplementedSchedulerServer
	m *Master
}

// Subscribe registers or fails over a framework and streams its events.
func (s schedulerAPI) Subscribe(req *pb.SubscribeRequest, stream pb.Scheduler_SubscribeServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	sub := subscriptionFromPB(req)
	if err := s.m.authorizeSubscribe(ctx, sub); err != nil {
		return s.m.grpcError(err)
	}
	c := newOutbox[toFramework](cancel, frameworkQueue)
	id, err := s.m.subscribe(sub, c)
	if err != nil {
		return s.m.grpcError(err)
	}
	defer s.m.frameworkGone(id, c)
	hb := time.NewTicker(s.m.opts.HeartbeatInterval)
	defer hb.Stop()
	for {
		select {
		case <-ctx.Done():
			if stream.Context().Err() != nil {
				return nil
			}
			return status.Error(codes.Unavailable, "framework stream closed by the master")
		case <-c.ready:
			for _, ev := range c.take() {
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
	_, _, err := s.m.authorizeCall(ctx, id)
	if err == nil {
		err = fn()
	}
	if err != nil {
		return nil, s.m.grpcError(err)
	}
	return &pb.Empty{}, nil
}

// Accept applies operations to offers of one agent (planAccept); RESERVE
// and UNRESERVE operations need the caller's ACLs.
func (s schedulerAPI) Accept(ctx context.Context, req *pb.AcceptRequest) (*pb.Empty, error) {
	acc := acceptRequestFromPB(req)
	p, a, err := s.m.authorizeCall(ctx, acc.frameworkID)
	if err == nil && a != nil {
		err = authorizeOperations(a, p, acc.ops)
	}
	if err == nil {
		err = s.m.accept(acc)
	}
	if err != nil {
		return nil, s.m.grpcError(err)
	}
	return &pb.Empty{}, nil
}

// Decline gives offers back with an optional refusal filter.
func (s schedulerAPI) Decline(ctx context.Context, req *pb.DeclineRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error { return s.m.decline(req.FrameworkId, req.OfferIds, refuseOf(req.Filters)) })
}

// SubmitDemand submits a demand for the framework (docs/demands.md);
// its role needs the caller's submit_demand ACL.
func (s schedulerAPI) SubmitDemand(ctx context.Context, req *pb.SubmitDemandRequest) (*pb.Empty, error) {
	p, a, err := s.m.authorizeCall(ctx, req.FrameworkId)
	var specs []*demand.Spec
	if err == nil {
		specs, err = ParseDemandDocuments([]byte(req.Document))
	}
	if err == nil {
		for _, sp := range specs {
			if sp.Framework != "" && sp.Framework != req.FrameworkId {
				err = fmt.Errorf("%w: FrameworkID: %q is not the caller %s", ErrInvalid, sp.Framework, req.FrameworkId)
			}
			sp.Framework = req.FrameworkId
		}
	}
	if err == nil {
		_, err = s.m.SubmitDemands(specs, func(role string) error {
			if a == nil {
				return nil
			}
			return a.Authorize(p, ActionSubmitDemand, role)
		})
	}
	if err != nil {
		return nil, s.m.grpcError(err)
	}
	return &pb.Empty{}, nil
}

// CancelDemand cancels one of the framework's demands.
func (s schedulerAPI) CancelDemand(ctx context.Context, req *pb.CancelDemandRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error {
		return s.m.CancelDemand(req.DemandId, func(d *demand.Demand) error {
			if d.Framework != req.FrameworkId {
				return fmt.Errorf("demand %s of another framework: %w", d.ID, ErrNotFound)
			}
			return nil
		})
	})
}

// Revive clears the framework's filters and unsuppresses its roles.
func (s schedulerAPI) Revive(ctx context.Context, req *pb.ReviveRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error { return s.m.revive(req.FrameworkId, req.Roles) })
}

// Suppress stops offers to the framework's roles until Revive.
func (s schedulerAPI) Suppress(ctx context.Context, req *pb.SuppressRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error { return s.m.suppress(req.FrameworkId, req.Roles) })
}

// Kill asks the task's agent to kill it.
func (s schedulerAPI) Kill(ctx context.Context, req *pb.KillRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error { return s.m.kill(req.FrameworkId, req.TaskId) })
}

// Acknowledge forwards a framework's acknowledgement to the agent.
func (s schedulerAPI) Acknowledge(ctx context.Context, req *pb.AcknowledgeRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error {
		return s.m.acknowledge(req.FrameworkId, req.AgentId, req.TaskId, req.Uuid)
	})
}

// Reconcile sends the latest known state of tasks.
func (s schedulerAPI) Reconcile(ctx context.Context, req *pb.ReconcileRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error { return s.m.reconcile(req.FrameworkId, req.TaskIds) })
}

// UpdateTask changes a running task's resources (Master.UpdateTask).
func (s schedulerAPI) UpdateTask(ctx context.Context, req *pb.UpdateTaskRequest) (*pb.Empty, error) {
	return s.call(ctx, req.FrameworkId, func() error {
		return s.m.UpdateTask(req.FrameworkId, req.TaskId, req.Resources, req.OfferIds)
	})
}
