package master

import (
	"fmt"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// Conversions between the protobuf messages of masterlinkpb and the
// domain's types, in one place: the gRPC handlers convert requests on the
// way in, the domain builds what it sends through these functions.

// Task status reasons the master sets itself: names of the proto's
// TaskReason (masterlinkpb/reasons.go), the one definition.
var (
	ReasonAgentUnreachable = pb.ReasonAgentUnreachable
	ReasonAgentRemoved     = pb.ReasonAgentRemoved
	ReasonUnknownOnAgent   = pb.ReasonTaskUnknownOnAgent
	ReasonFrameworkRemoved = pb.ReasonFrameworkRemoved
	ReasonReconciliation   = pb.ReasonReconciliation
	ReasonInvalidTask      = pb.ReasonInvalidTask
	reasonTaskUnauthorized = pb.ReasonTaskUnauthorized
	// reasonPreempted: the master preempted the task (demands.go).
	reasonPreempted = pb.ReasonContainerPreempted

	// The agent's answers to a resource update (update.go).
	reasonResourcesUpdated      = pb.ReasonResourcesUpdated
	reasonResourcesUpdateFailed = pb.ReasonResourcesUpdateFailed
)

// taskStateFromPB and taskStateToPB convert by number (see taskState).
func taskStateFromPB(s pb.TaskState) taskState { return taskState(s) }
func taskStateToPB(s taskState) pb.TaskState   { return pb.TaskState(s) }

// acceptRequestFromPB converts an ACCEPT call; an operation of a kind this
// master does not know becomes opUnknown (planAccept rejects it).
func acceptRequestFromPB(req *pb.AcceptRequest) acceptRequest {
	out := acceptRequest{frameworkID: req.FrameworkId, offerIDs: req.OfferIds, refuse: refuseOf(req.Filters)}
	for _, op := range req.Operations {
		var o operation
		switch x := op.GetOp().(type) {
		case *pb.Operation_Launch_:
			o.kind = opLaunch
			for _, ti := range x.Launch.GetTasks() {
				o.tasks = append(o.tasks, taskSpec{info: taskInfoFromPB(ti), resources: ti.GetResources()})
			}
		case *pb.Operation_Reserve_:
			o.kind, o.resources = opReserve, x.Reserve.GetResources()
		case *pb.Operation_Unreserve_:
			o.kind, o.resources = opUnreserve, x.Unreserve.GetResources()
		}
		out.ops = append(out.ops, o)
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
func taskInfoFromPB(ti *pb.TaskInfo) taskInfo {
	return taskInfo{id: ti.GetTaskId(), name: ti.GetName(), command: ti.GetCommand(), env: ti.GetEnv(), labels: ti.GetLabels(),
		user: ti.GetUser(), userns: ti.GetUserns(), image: ti.GetImage(), imagePull: ti.GetImagePull(), imageRW: ti.GetImageReadWrite()}
}

// taskInfoToPB is the TaskInfo of a task as the agent runs it.
func taskInfoToPB(r *runTask) *pb.TaskInfo {
	return &pb.TaskInfo{TaskId: r.info.id, Name: r.info.name, AgentId: r.agent, FrameworkId: r.framework,
		Resources: r.res.String(), Command: r.info.command, Env: r.info.env, Labels: r.info.labels,
		User: r.info.user, Userns: r.info.userns, Image: r.info.image, ImagePull: r.info.imagePull, ImageReadWrite: r.info.imageRW}
}

// agentMessageToPB converts a message for an agent.
func agentMessageToPB(msg toAgent) *pb.MasterMessage {
	switch x := msg.(type) {
	case *runTask:
		return &pb.MasterMessage{Msg: &pb.MasterMessage_Run{Run: &pb.RunTask{Task: taskInfoToPB(x), RunAsRoot: x.runAsRoot, Lent: x.lent}}}
	case *killTask:
		return &pb.MasterMessage{Msg: &pb.MasterMessage_Kill{Kill: &pb.KillTask{TaskId: x.taskID, FrameworkId: x.framework, Preempted: x.preempted, Message: x.message}}}
	case *ackStatus:
		return &pb.MasterMessage{Msg: &pb.MasterMessage_Ack{Ack: &pb.StatusAck{TaskId: x.taskID, FrameworkId: x.framework, Uuid: x.uuid}}}
	case *resizeTask:
		return &pb.MasterMessage{Msg: &pb.MasterMessage_Update{Update: &pb.UpdateTask{TaskId: x.taskID, FrameworkId: x.framework, Resources: x.res.String()}}}
	}
	panic(fmt.Sprintf("master: unknown message for an agent %T", msg))
}

// registeredMessage answers an agent's registration; the tasks to kill
// go with their frameworks (kill_tasks) and, for older agents, by ID.
func registeredMessage(agentID string, heartbeat time.Duration, kill []killTask) *pb.MasterMessage {
	r := &pb.Registered{AgentId: agentID, HeartbeatIntervalNanos: int64(heartbeat)}
	for _, k := range kill {
		r.Kill = append(r.Kill, k.taskID)
		r.KillTasks = append(r.KillTasks, &pb.KillTask{TaskId: k.taskID, FrameworkId: k.framework})
	}
	return &pb.MasterMessage{Msg: &pb.MasterMessage_Registered{Registered: r}}
}

// frameworkEventToPB converts an event for a framework.
func frameworkEventToPB(ev toFramework) *pb.Event {
	switch x := ev.(type) {
	case *subscribed:
		return &pb.Event{Event: &pb.Event_Subscribed{Subscribed: &pb.Subscribed{FrameworkId: x.framework, HeartbeatIntervalNanos: int64(x.heartbeat)}}}
	case *offersMade:
		offers := make([]*pb.Offer, len(x.offers))
		for i, o := range x.offers {
			offers[i] = &pb.Offer{Id: o.id, FrameworkId: o.fw, AgentId: o.agent, Hostname: x.hostnames[i], Role: o.role, Resources: o.res.String(), DemandId: o.demand}
		}
		return &pb.Event{Event: &pb.Event_Offers{Offers: &pb.Offers{Offers: offers}}}
	case *demandEvent:
		return &pb.Event{Event: &pb.Event_Demand{Demand: &pb.DemandEvent{DemandId: x.id, From: x.From.String(), State: x.To.String(),
			Reason: string(x.Reason), Message: x.Message, AtUnixNano: x.At.UnixNano()}}}
	case *offerRescinded:
		return &pb.Event{Event: &pb.Event_Rescind{Rescind: &pb.Rescind{OfferId: x.offerID}}}
	case *taskStatus:
		return &pb.Event{Event: &pb.Event_Update{Update: taskStatusToPB(x)}}
	}
	panic(fmt.Sprintf("master: unknown event for a framework %T", ev))
}

func heartbeatEvent() *pb.Event {
	return &pb.Event{Event: &pb.Event_Heartbeat{Heartbeat: &pb.Heartbeat{}}}
}

// taskStatusFromPB converts a status update from an agent.
func taskStatusFromPB(st *pb.TaskStatus) *taskStatus {
	return &taskStatus{taskID: st.GetTaskId(), agentID: st.GetAgentId(), frameworkID: st.GetFrameworkId(), state: taskStateFromPB(st.GetState()),
		reason: st.GetReason(), message: st.GetMessage(), hasExitCode: st.GetHasExitCode(), exitCode: st.GetExitCode(),
		uuid: st.GetUuid(), timestampUnixNano: st.GetTimestampUnixNano(), resources: st.GetResources()}
}

func taskStatusToPB(st *taskStatus) *pb.TaskStatus {
	return &pb.TaskStatus{TaskId: st.taskID, AgentId: st.agentID, FrameworkId: st.frameworkID, State: taskStateToPB(st.state),
		Reason: st.reason, Message: st.message, HasExitCode: st.hasExitCode, ExitCode: st.exitCode,
		Uuid: st.uuid, TimestampUnixNano: st.timestampUnixNano, Resources: st.resources}
}

// oversubFromPB is an agent's oversubscription status as State shows it,
// without the estimate (the agent's revocable resources, filled in by
// oversubStateLocked).
func oversubFromPB(o *pb.Oversubscribed) *AgentOversubState {
	if o == nil {
		return nil
	}
	st := &AgentOversubState{Estimator: o.Estimator, QoS: o.Qos, Summary: o.Summary,
		Corrections: make([]CorrectionState, 0, len(o.Corrections))}
	for _, c := range o.Corrections {
		cs := CorrectionState{Type: c.Type, ContainerID: c.ContainerId, TaskID: c.TaskId, CPUQuotaMilli: c.CpuQuotaMilli,
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
func registrationFromPB(reg *pb.Register) *registration {
	out := &registration{agentID: reg.GetAgentId(), hostname: reg.GetHostname(), resources: reg.GetResources(),
		revocable: reg.GetRevocable(), attributes: reg.GetAttributes(), oversub: oversubFromPB(reg.GetOversubscription()),
		revInUse: reg.GetOversubscription().GetRevocableInUse(), revInUseSet: reg.GetOversubscription().GetRevocableInUseSet(),
		score: reg.GetPerformanceScore(), moreTasks: reg.GetMoreTasks()}
	out.tasks = taskReportsFromPB(out.tasks, reg.GetTasks())
	return out
}

// taskReportsFromPB appends an agent's task snapshots (of a Register or
// of a ReregisterTasks page) to reps.
func taskReportsFromPB(reps []taskReport, snaps []*pb.TaskSnapshot) []taskReport {
	for _, snap := range snaps {
		ti := snap.GetTask()
		if ti == nil {
			continue
		}
		rep := taskReport{info: taskInfoFromPB(ti), framework: ti.GetFrameworkId(), resources: ti.GetResources(),
			state: taskStateFromPB(snap.GetState()), acknowledged: snap.GetAcknowledged(), reason: snap.GetReason(), message: snap.GetMessage()}
		if snap.GetHasExitCode() {
			code := snap.GetExitCode()
			rep.exitCode = &code
		}
		reps = append(reps, rep)
	}
	return reps
}

// agentMessageFromPB converts a message from a registered agent; a
// heartbeat, a repeated Register or a message of an unknown kind is nil.
func agentMessageFromPB(msg *pb.AgentMessage) fromAgent {
	switch x := msg.GetMsg().(type) {
	case *pb.AgentMessage_Status:
		return taskStatusFromPB(x.Status)
	case *pb.AgentMessage_Oversubscribed:
		return &agentOversub{revocable: x.Oversubscribed.GetRevocable(), inUse: x.Oversubscribed.GetRevocableInUse(),
			inUseSet: x.Oversubscribed.GetRevocableInUseSet(), state: oversubFromPB(x.Oversubscribed)}
	}
	return nil
}

// subscriptionFromPB converts a Subscribe call.
func subscriptionFromPB(req *pb.SubscribeRequest) *subscription {
	out := &subscription{suppressedRoles: req.GetSuppressedRoles()}
	if fi := req.GetFramework(); fi != nil {
		out.info = &frameworkInfo{id: fi.GetId(), name: fi.GetName(), principal: fi.GetPrincipal(), roles: fi.GetRoles(),
			revocable: fi.GetRevocable(), failover: time.Duration(fi.GetFailoverTimeoutNanos())}
	}
	return out
}
