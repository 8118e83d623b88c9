package transport

import (
	"fmt"
	"time"

	"github.com/brimnode/brim/master"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// Conversions between the protobuf messages of masterlinkpb and the
// domain's types, in one place: the gRPC handlers convert requests on the
// way in, and what the domain sends through its outboxes on the way out.

// taskStateFromPB and taskStateToPB convert by number (see
// master.TaskState).
func taskStateFromPB(s pb.TaskState) master.TaskState { return master.TaskState(s) }
func taskStateToPB(s master.TaskState) pb.TaskState   { return pb.TaskState(s) }

// acceptRequestFromPB converts an ACCEPT call; an operation of a kind this
// master does not know becomes opUnknown (planAccept rejects it).
func acceptRequestFromPB(req *pb.AcceptRequest) master.AcceptRequest {
	out := master.AcceptRequest{FrameworkID: req.FrameworkId, OfferIDs: req.OfferIds, Refuse: refuseOf(req.Filters)}
	for _, op := range req.Operations {
		var o master.Operation
		switch x := op.GetOp().(type) {
		case *pb.Operation_Launch_:
			o.Kind = master.OpLaunch
			for _, ti := range x.Launch.GetTasks() {
				o.Tasks = append(o.Tasks, master.TaskSpec{Info: taskInfoFromPB(ti), Resources: ti.GetResources()})
			}
		case *pb.Operation_Reserve_:
			o.Kind, o.Resources = master.OpReserve, x.Reserve.GetResources()
		case *pb.Operation_Unreserve_:
			o.Kind, o.Resources = master.OpUnreserve, x.Unreserve.GetResources()
		}
		out.Operations = append(out.Operations, o)
	}
	return out
}

// refuseOf is the refusal filter of a DECLINE or ACCEPT: nil (the
// allocator's default) without filters or with a negative duration.
func refuseOf(fl *pb.Filters) *time.Duration {
	if fl == nil || fl.RefuseSeconds < 0 {
		return nil
	}
	d := time.Duration(fl.RefuseSeconds * float64(time.Second))
	return &d
}

// taskInfoFromPB is the part of a TaskInfo the master keeps as given (the
// agent, framework and resources are the task entry's).
func taskInfoFromPB(ti *pb.TaskInfo) master.TaskInfo {
	return master.TaskInfo{ID: ti.GetTaskId(), Name: ti.GetName(), Command: ti.GetCommand(), Env: ti.GetEnv(), Labels: ti.GetLabels(),
		User: ti.GetUser(), Userns: ti.GetUserns(), Image: ti.GetImage(), ImagePull: ti.GetImagePull(), ImageRW: ti.GetImageReadWrite()}
}

// taskInfoToPB is the TaskInfo of a task as the agent runs it.
func taskInfoToPB(r *master.RunTask) *pb.TaskInfo {
	return &pb.TaskInfo{TaskId: r.Info.ID, Name: r.Info.Name, AgentId: r.AgentID, FrameworkId: r.FrameworkID,
		Resources: r.Resources.String(), Command: r.Info.Command, Env: r.Info.Env, Labels: r.Info.Labels,
		User: r.Info.User, Userns: r.Info.Userns, Image: r.Info.Image, ImagePull: r.Info.ImagePull, ImageReadWrite: r.Info.ImageRW}
}

// agentMessageToPB converts a message for an agent.
func agentMessageToPB(msg master.ToAgent) *pb.MasterMessage {
	switch x := msg.(type) {
	case *master.RunTask:
		return &pb.MasterMessage{Msg: &pb.MasterMessage_Run{Run: &pb.RunTask{Task: taskInfoToPB(x), RunAsRoot: x.RunAsRoot, Lent: x.Lent}}}
	case *master.KillTask:
		return &pb.MasterMessage{Msg: &pb.MasterMessage_Kill{Kill: &pb.KillTask{TaskId: x.TaskID, FrameworkId: x.FrameworkID, Preempted: x.Preempted, Message: x.Message}}}
	case *master.AckStatus:
		return &pb.MasterMessage{Msg: &pb.MasterMessage_Ack{Ack: &pb.StatusAck{TaskId: x.TaskID, FrameworkId: x.FrameworkID, Uuid: x.UUID}}}
	case *master.ResizeTask:
		return &pb.MasterMessage{Msg: &pb.MasterMessage_Update{Update: &pb.UpdateTask{TaskId: x.TaskID, FrameworkId: x.FrameworkID, Resources: x.Resources.String()}}}
	case *master.OpenExec:
		return &pb.MasterMessage{Msg: &pb.MasterMessage_Exec{Exec: &pb.OpenExec{SessionId: x.Session, FrameworkId: x.FrameworkID, TaskId: x.TaskID}}}
	}
	panic(fmt.Sprintf("master: unknown message for an agent %T", msg))
}

// registeredMessage answers an agent's registration; the tasks to kill
// go with their frameworks (kill_tasks) and, for older agents, by ID.
func registeredMessage(agentID string, heartbeat time.Duration, kill []master.KillTask) *pb.MasterMessage {
	r := &pb.Registered{AgentId: agentID, HeartbeatIntervalNanos: int64(heartbeat)}
	for _, k := range kill {
		r.Kill = append(r.Kill, k.TaskID)
		r.KillTasks = append(r.KillTasks, &pb.KillTask{TaskId: k.TaskID, FrameworkId: k.FrameworkID})
	}
	return &pb.MasterMessage{Msg: &pb.MasterMessage_Registered{Registered: r}}
}

// frameworkEventToPB converts an event for a framework.
func frameworkEventToPB(ev master.ToFramework) *pb.Event {
	switch x := ev.(type) {
	case *master.Subscribed:
		return &pb.Event{Event: &pb.Event_Subscribed{Subscribed: &pb.Subscribed{FrameworkId: x.FrameworkID, HeartbeatIntervalNanos: int64(x.Heartbeat)}}}
	case *master.OffersMade:
		made := x.Offers()
		offers := make([]*pb.Offer, len(made))
		for i, o := range made {
			offers[i] = &pb.Offer{Id: o.ID, FrameworkId: o.FrameworkID, AgentId: o.AgentID, Hostname: o.Hostname, Role: o.Role,
				Resources: o.Resources.String(), DemandId: o.DemandID}
		}
		return &pb.Event{Event: &pb.Event_Offers{Offers: &pb.Offers{Offers: offers}}}
	case *master.DemandEvent:
		return &pb.Event{Event: &pb.Event_Demand{Demand: &pb.DemandEvent{DemandId: x.ID, From: x.From.String(), State: x.To.String(),
			Reason: string(x.Reason), Message: x.Message, AtUnixNano: x.At.UnixNano()}}}
	case *master.OfferRescinded:
		return &pb.Event{Event: &pb.Event_Rescind{Rescind: &pb.Rescind{OfferId: x.OfferID}}}
	case *master.TaskStatus:
		return &pb.Event{Event: &pb.Event_Update{Update: taskStatusToPB(x)}}
	}
	panic(fmt.Sprintf("master: unknown event for a framework %T", ev))
}

func heartbeatEvent() *pb.Event {
	return &pb.Event{Event: &pb.Event_Heartbeat{Heartbeat: &pb.Heartbeat{}}}
}

// taskStatusFromPB converts a status update from an agent.
func taskStatusFromPB(st *pb.TaskStatus) *master.TaskStatus {
	return &master.TaskStatus{TaskID: st.GetTaskId(), AgentID: st.GetAgentId(), FrameworkID: st.GetFrameworkId(), State: taskStateFromPB(st.GetState()),
		Reason: st.GetReason(), Message: st.GetMessage(), HasExitCode: st.GetHasExitCode(), ExitCode: st.GetExitCode(),
		UUID: st.GetUuid(), TimestampUnixNano: st.GetTimestampUnixNano(), Resources: st.GetResources()}
}

func taskStatusToPB(st *master.TaskStatus) *pb.TaskStatus {
	return &pb.TaskStatus{TaskId: st.TaskID, AgentId: st.AgentID, FrameworkId: st.FrameworkID, State: taskStateToPB(st.State),
		Reason: st.Reason, Message: st.Message, HasExitCode: st.HasExitCode, ExitCode: st.ExitCode,
		Uuid: st.UUID, TimestampUnixNano: st.TimestampUnixNano, Resources: st.Resources}
}

// oversubFromPB is an agent's oversubscription status as State shows it,
// without the estimate (the agent's revocable resources, filled in by
// oversubStateLocked).
func oversubFromPB(o *pb.Oversubscribed) *master.AgentOversubState {
	if o == nil {
		return nil
	}
	st := &master.AgentOversubState{Estimator: o.Estimator, QoS: o.Qos, Summary: o.Summary,
		Corrections: make([]master.CorrectionState, 0, len(o.Corrections))}
	for _, c := range o.Corrections {
		cs := master.CorrectionState{Type: c.Type, ContainerID: c.ContainerId, TaskID: c.TaskId, CPUQuotaMilli: c.CpuQuotaMilli,
			Reason: c.Reason, Signal: c.Signal, Victim: c.Victim, Value: c.Value, Baseline: c.Baseline, Threshold: c.Threshold,
			Active: c.Active}
		if c.AppliedUnixNano > 0 {
			cs.AppliedAt = time.Unix(0, c.AppliedUnixNano).UTC()
		}
		st.Corrections = append(st.Corrections, cs)
	}
	return st
}

// registrationFromPB converts an agent's Register message.
func registrationFromPB(reg *pb.Register) *master.Registration {
	out := &master.Registration{AgentID: reg.GetAgentId(), Hostname: reg.GetHostname(), Resources: reg.GetResources(),
		Revocable: reg.GetRevocable(), Attributes: reg.GetAttributes(), Oversub: oversubFromPB(reg.GetOversubscription()),
		RevocableInUse: reg.GetOversubscription().GetRevocableInUse(), RevocableInUseSet: reg.GetOversubscription().GetRevocableInUseSet(),
		Score: reg.GetPerformanceScore(), MoreTasks: reg.GetMoreTasks()}
	out.Tasks = taskReportsFromPB(out.Tasks, reg.GetTasks())
	return out
}

// taskReportsFromPB appends an agent's task snapshots (of a Register or
// of a ReregisterTasks page) to reps.
func taskReportsFromPB(reps []master.TaskReport, snaps []*pb.TaskSnapshot) []master.TaskReport {
	for _, snap := range snaps {
		ti := snap.GetTask()
		if ti == nil {
			continue
		}
		rep := master.TaskReport{Info: taskInfoFromPB(ti), FrameworkID: ti.GetFrameworkId(), Resources: ti.GetResources(),
			State: taskStateFromPB(snap.GetState()), Acknowledged: snap.GetAcknowledged(), Reason: snap.GetReason(), Message: snap.GetMessage()}
		if snap.GetHasExitCode() {
			code := snap.GetExitCode()
			rep.ExitCode = &code
		}
		reps = append(reps, rep)
	}
	return reps
}

// agentMessageFromPB converts a message from a registered agent; a
// heartbeat, a repeated Register or a message of an unknown kind is nil.
func agentMessageFromPB(msg *pb.AgentMessage) master.FromAgent {
	switch x := msg.GetMsg().(type) {
	case *pb.AgentMessage_Status:
		return taskStatusFromPB(x.Status)
	case *pb.AgentMessage_Oversubscribed:
		return &master.AgentOversub{Revocable: x.Oversubscribed.GetRevocable(), InUse: x.Oversubscribed.GetRevocableInUse(),
			InUseSet: x.Oversubscribed.GetRevocableInUseSet(), State: oversubFromPB(x.Oversubscribed)}
	}
	return nil
}

// subscriptionFromPB converts a Subscribe call.
func subscriptionFromPB(req *pb.SubscribeRequest) *master.Subscription {
	out := &master.Subscription{SuppressedRoles: req.GetSuppressedRoles()}
	if fi := req.GetFramework(); fi != nil {
		out.Info = &master.FrameworkInfo{ID: fi.GetId(), Name: fi.GetName(), Principal: fi.GetPrincipal(), Roles: fi.GetRoles(),
			Revocable: fi.GetRevocable(), Failover: time.Duration(fi.GetFailoverTimeoutNanos())}
	}
	return out
}
