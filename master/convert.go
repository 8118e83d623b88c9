package master

import (
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
)

// Conversions between the protobuf messages of masterlinkpb and the
// domain's types, in one place: the gRPC handlers convert requests on the
// way in, the domain builds what it sends through these functions.

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
	return taskInfo{id: ti.GetTaskId(), name: ti.GetName(), command: ti.GetCommand(), env: ti.GetEnv(), labels: ti.GetLabels()}
}

// taskInfoToPB is the TaskInfo of a task as the agent runs it.
func taskInfoToPB(t *taskEntry) *pb.TaskInfo {
	return &pb.TaskInfo{TaskId: t.info.id, Name: t.info.name, AgentId: t.agent, FrameworkId: t.fw,
		Resources: t.res.String(), Command: t.info.command, Env: t.info.env, Labels: t.info.labels}
}

// Messages to agents.

func runTaskMessage(t *taskEntry) *pb.MasterMessage {
	return &pb.MasterMessage{Msg: &pb.MasterMessage_Run{Run: &pb.RunTask{Task: taskInfoToPB(t)}}}
}

func killTaskMessage(taskID, frameworkID string) *pb.MasterMessage {
	return &pb.MasterMessage{Msg: &pb.MasterMessage_Kill{Kill: &pb.KillTask{TaskId: taskID, FrameworkId: frameworkID}}}
}

func ackMessage(taskID, uuid string) *pb.MasterMessage {
	return &pb.MasterMessage{Msg: &pb.MasterMessage_Ack{Ack: &pb.StatusAck{TaskId: taskID, Uuid: uuid}}}
}

func updateTaskMessage(t *taskEntry) *pb.MasterMessage {
	return &pb.MasterMessage{Msg: &pb.MasterMessage_Update{Update: &pb.UpdateTask{TaskId: t.info.id, Resources: t.pending.res.String()}}}
}

func registeredMessage(agentID string, heartbeat time.Duration, kill []string) *pb.MasterMessage {
	return &pb.MasterMessage{Msg: &pb.MasterMessage_Registered{Registered: &pb.Registered{
		AgentId: agentID, HeartbeatIntervalNanos: int64(heartbeat), Kill: kill,
	}}}
}

// Events to frameworks.

func offerToPB(o *offerEntry, hostname string) *pb.Offer {
	return &pb.Offer{Id: o.id, FrameworkId: o.fw, AgentId: o.agent, Hostname: hostname, Role: o.role, Resources: o.res.String()}
}

func offersEvent(offers []*pb.Offer) *pb.Event {
	return &pb.Event{Event: &pb.Event_Offers{Offers: &pb.Offers{Offers: offers}}}
}

func rescindEvent(offerID string) *pb.Event {
	return &pb.Event{Event: &pb.Event_Rescind{Rescind: &pb.Rescind{OfferId: offerID}}}
}

func updateEvent(st *pb.TaskStatus) *pb.Event {
	return &pb.Event{Event: &pb.Event_Update{Update: st}}
}

func subscribedEvent(frameworkID string, heartbeat time.Duration) *pb.Event {
	return &pb.Event{Event: &pb.Event_Subscribed{Subscribed: &pb.Subscribed{FrameworkId: frameworkID, HeartbeatIntervalNanos: int64(heartbeat)}}}
}

func heartbeatEvent() *pb.Event {
	return &pb.Event{Event: &pb.Event_Heartbeat{Heartbeat: &pb.Heartbeat{}}}
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
