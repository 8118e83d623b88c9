package master

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/brimnode/brim/master/allocator"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// agentLink serves pb.AgentLinkServer.
type agentLink struct {
	pb.UnimplementedAgentLinkServer
	m *Master
}

// Connect serves one agent stream: Register first, then heartbeats, status
// updates and oversubscription changes until the stream breaks.
func (s agentLink) Connect(stream pb.AgentLink_ConnectServer) error {
	m := s.m
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	reg := first.GetRegister()
	if reg == nil {
		return status.Error(codes.InvalidArgument, "first message must be a register")
	}
	principal, err := m.authenticateAgent(stream.Context(), reg)
	if err != nil {
		m.log.Warn("agent refused", "agent", reg.AgentId, "hostname", reg.Hostname, "err", err)
		return toStatus(err)
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	c := newConn[*pb.MasterMessage](cancel, agentQueue)
	ag, kill, err := m.registerAgent(reg, principal, c)
	if err != nil {
		return toStatus(err)
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
			m.agentMessage(ag, c, msg)
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
		case msg := <-c.ch:
			if err := stream.Send(msg); err != nil {
				return err
			}
		}
	}
}

// registerAgent adds or re-registers an agent authenticated as principal
// ("" without agent authentication) and reconciles its tasks. It returns
// the agent ID and the tasks the agent must kill.
func (m *Master) registerAgent(reg *pb.Register, principal string, c *conn[*pb.MasterMessage]) (string, []string, error) {
	total, err := resources.Parse(reg.Resources)
	if err != nil {
		return "", nil, fmt.Errorf("register agent: resources: %w: %w", ErrInvalid, err)
	}
	rev, err := resources.Parse(reg.Revocable)
	if err != nil {
		return "", nil, fmt.Errorf("register agent: revocable: %w: %w", ErrInvalid, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	principal, err = m.agentPrincipalLocked(reg.AgentId, principal)
	if err != nil {
		return "", nil, err
	}
	id := reg.AgentId
	if id == "" {
		id = uuid.NewString()
	}
	ag := m.agents[id]
	if ag == nil {
		ag = &agentEntry{id: id, tasks: map[string]*taskEntry{}, lost: map[string]bool{}}
		m.agents[id] = ag
	} else {
		if ag.conn != nil {
			ag.conn.cancel() // a newer stream replaces the old one
		}
		m.dropAgentFromAllocatorLocked(ag)
	}
	ag.hostname, ag.principal, ag.total, ag.revocable, ag.attributes = reg.Hostname, principal, total, rev, reg.Attributes
	ag.oversub = oversubFromPB(reg.Oversubscription)
	ag.conn, ag.lastSeen, ag.unreachable = c, time.Now(), false
	delete(m.awaited, id)

	// Reconcile: what the agent runs against what the master knows.
	var kill []string
	seen := map[string]bool{}
	for _, snap := range reg.Tasks {
		ti := snap.GetTask()
		if ti == nil || ti.TaskId == "" {
			continue
		}
		seen[ti.TaskId] = true
		if t := ag.tasks[ti.TaskId]; t != nil {
			if terminal(snap.State) || t.state == pb.TaskState_TASK_STAGING {
				t.state = snap.State
			}
			t.recovered = terminal(t.state)
			m.reregisteredResizeLocked(ag, t, ti.Resources)
			continue
		}
		if ag.lost[ti.TaskId] {
			if !terminal(snap.State) {
				kill = append(kill, ti.TaskId)
			}
			continue
		}
		if _, elsewhere := m.tasks[ti.TaskId]; elsewhere {
			continue
		}
		// A task the master does not know: the master restarted. Adopt it.
		res, err := resources.Parse(ti.Resources)
		if err != nil {
			kill = append(kill, ti.TaskId)
			continue
		}
		t := &taskEntry{info: taskInfoFromPB(ti), fw: ti.FrameworkId, agent: id, res: res, state: snap.State, recovered: terminal(snap.State)}
		if roles := m.knownFWs[ti.FrameworkId].Roles; len(roles) == 1 {
			t.role = roles[0]
		}
		if f := m.frameworks[ti.FrameworkId]; f != nil {
			f.tasks[ti.TaskId] = t
			if len(f.roles) == 1 {
				t.role = f.roles[0]
			}
		}
		m.tasks[ti.TaskId] = t
		ag.tasks[ti.TaskId] = t
	}
	clear(ag.lost)
	for tid, t := range ag.tasks {
		if !seen[tid] && !terminal(t.state) && t.state != pb.TaskState_TASK_STAGING {
			t.recovered = true // not in the allocator's usage below
			m.setTaskStatusLocked(t, &pb.TaskStatus{
				TaskId: tid, AgentId: id, FrameworkId: t.fw, State: pb.TaskState_TASK_LOST,
				Reason: ReasonUnknownOnAgent, Message: "the agent re-registered without this task",
			})
			m.forgetTaskLocked(t)
		}
	}
	if err := m.addToAllocatorLocked(ag); err != nil {
		delete(m.agents, id)
		return "", nil, fmt.Errorf("register agent %s: %w", id, fromAllocator(err))
	}
	if known := (PersistedAgent{Hostname: ag.hostname, Principal: principal}); m.knownAgents[id] != known {
		m.knownAgents[id] = known
		if m.store != nil {
			if err := m.store.PutAgent(id, known); err != nil {
				m.log.Warn("persist agent", "agent", id, "err", err)
			}
		}
	}
	m.log.Info("agent registered", "agent", id, "hostname", ag.hostname, "principal", principal, "resources", total.String(), "tasks", len(ag.tasks))
	m.trigger()
	return id, kill, nil
}

// addToAllocatorLocked adds the agent to the allocator with its tasks'
// usage (falling back to an agent without usage rather than losing it).
func (m *Master) addToAllocatorLocked(ag *agentEntry) error {
	used := map[string]resources.Resources{}
	for _, t := range ag.tasks {
		if !terminal(t.state) {
			used[t.fw] = used[t.fw].Add(t.held())
			t.recovered = false
		}
	}
	info := allocator.AgentInfo{ID: ag.id, Total: ag.total, Revocable: ag.revocable, Attributes: ag.attributes}
	if r := m.reservations[ag.id]; len(r) > 0 {
		info.Total = applyReservations(ag.total, r)
	}
	if err := m.alloc.AddAgent(info, used); err != nil {
		m.log.Warn("add agent with usage", "agent", ag.id, "err", err)
		if err := m.alloc.AddAgent(allocator.AgentInfo{ID: ag.id, Total: ag.total, Revocable: ag.revocable}, nil); err != nil {
			return err
		}
	}
	ag.inAllocator = true
	return nil
}

// applyReservations moves the reserved amounts out of the unreserved part
// of total.
func applyReservations(total, reserved resources.Resources) resources.Resources {
	plain := reserved.Unreserve()
	if !total.Contains(plain) {
		return total
	}
	return total.Subtract(plain).Add(reserved)
}

// agentGone handles the end of an agent's stream. The agent stays
// registered until its heartbeats time out.
func (m *Master) agentGone(id string, c *conn[*pb.MasterMessage]) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ag := m.agents[id]
	if ag == nil || ag.conn != c {
		return
	}
	ag.conn = nil
	m.log.Info("agent disconnected", "agent", id)
	// No offers for an agent that cannot receive tasks; its tasks keep
	// their resources until it comes back or times out.
	for _, o := range m.offers {
		if o.agent == id {
			m.rescindLocked(o, nil)
		}
	}
}

// agentMessage handles one message from a registered agent.
func (m *Master) agentMessage(id string, c *conn[*pb.MasterMessage], msg *pb.AgentMessage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ag := m.agents[id]
	if ag == nil || ag.conn != c {
		return
	}
	ag.lastSeen = time.Now()
	switch x := msg.Msg.(type) {
	case *pb.AgentMessage_Heartbeat:
	case *pb.AgentMessage_Status:
		m.agentStatusLocked(ag, x.Status)
	case *pb.AgentMessage_Oversubscribed:
		rev, err := resources.Parse(x.Oversubscribed.Revocable)
		if err != nil {
			m.log.Warn("bad oversubscribed resources", "agent", id, "err", err)
			return
		}
		ag.oversub = oversubFromPB(x.Oversubscribed)
		if rev.Equal(ag.revocable) {
			return // only the corrections or the explanation changed
		}
		ag.revocable = rev
		info := allocator.AgentInfo{ID: id, Total: ag.total, Revocable: rev, Attributes: ag.attributes}
		if r := m.reservations[id]; len(r) > 0 {
			info.Total = applyReservations(ag.total, r)
		}
		rescinded, err := m.alloc.UpdateAgent(info)
		if err != nil {
			m.log.Warn("update agent", "agent", id, "err", err)
			return
		}
		// Offers the shrunk revocable pool no longer covers are rescinded.
		for _, r := range rescinded {
			for _, o := range m.offers {
				if o.agent == id && o.fw == r.FrameworkID && o.res.Contains(r.Resources) {
					delete(m.offers, o.id)
					if f := m.frameworks[o.fw]; f != nil {
						delete(f.offers, o.id)
						f.conn.send(rescindEvent(o.id))
					}
					break
				}
			}
		}
		m.trigger()
	case *pb.AgentMessage_Register:
		// Only the first message registers.
	}
}

// agentStatusLocked records a status update from an agent and forwards it
// to the framework; updates of tasks the master no longer tracks are
// acknowledged at once so the agent stops retrying.
func (m *Master) agentStatusLocked(ag *agentEntry, st *pb.TaskStatus) {
	st.AgentId = ag.id
	t := ag.tasks[st.TaskId]
	if t == nil {
		if st.Uuid != "" {
			ag.conn.send(ackMessage(st.TaskId, st.Uuid))
		}
		return
	}
	st.FrameworkId = t.fw
	if st.Reason == pb.ReasonResourcesUpdated || st.Reason == pb.ReasonResourcesUpdateFailed {
		m.resizeStatusLocked(ag, t, st)
	}
	m.setTaskStatusLocked(t, st)
}

// AgentOversubState is an agent's oversubscription status in State: its
// estimator's latest forwarded estimate and the QoS corrections in force.
type AgentOversubState struct {
	Estimator string `json:"estimator,omitempty"`
	QoS       string `json:"qos,omitempty"`
	// Estimate is the revocable capacity the agent forwarded; Summary
	// explains how the estimator computed it.
	Estimate string `json:"estimate"`
	Summary  string `json:"summary,omitempty"`
	// Corrections are the corrections in force (throttles, freezes) and
	// the agent's recent kills.
	Corrections []CorrectionState `json:"corrections"`
}

// CorrectionState is one QoS correction in AgentOversubState.
type CorrectionState struct {
	Type        string `json:"type"`
	ContainerID string `json:"containerId"`
	TaskID      string `json:"taskId,omitempty"`
	// CPUQuotaMilli is a throttle's cpu limit in thousandths of a cpu.
	CPUQuotaMilli int64  `json:"cpuQuotaMilli,omitempty"`
	Reason        string `json:"reason,omitempty"`
	// Signal, Victim, Value, Baseline and Threshold are the trigger.
	Signal    string    `json:"signal"`
	Victim    string    `json:"victim,omitempty"`
	Value     float64   `json:"value"`
	Baseline  float64   `json:"baseline"`
	Threshold float64   `json:"threshold"`
	AppliedAt time.Time `json:"appliedAt,omitzero"`
	// Active: in force now; false for a recent kill.
	Active bool `json:"active"`
}

// oversubStateLocked renders the agent's oversubscription status; nil
// when the agent never sent one (no estimator).
func (ag *agentEntry) oversubStateLocked() *AgentOversubState {
	if ag.oversub == nil {
		return nil
	}
	st := *ag.oversub // its corrections are never changed, only replaced
	st.Estimate = ag.revocable.String()
	return &st
}
