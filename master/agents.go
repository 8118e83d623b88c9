package master

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/resources"
	"github.com/google/uuid"
)

// registerAgent adds or re-registers an agent authenticated as principal
// ("" without agent authentication) and reconciles its tasks. It returns
// the agent ID and the tasks the agent must kill, with their frameworks.
// A new agent (or a new principal) is written to the store before it
// returns, but outside the master's lock: with etcd each write is a
// network round trip and a raft commit, and under the lock 10,000 first
// registrations queued behind one another; outside it they proceed
// together.
func (m *Master) registerAgent(reg *Registration, principal string, c *Outbox[ToAgent]) (string, []KillTask, error) {
	return m.RegisterAgent(reg, principal, c, func() {})
}

// RegisterAgent is registerAgent calling registered once the
// registry has the agent, before the store's write: a registration's
// admission slot is not held while it waits on the store (held, 10,000
// first registrations took 5.4 – 7.4 s instead of 2.4 – 3.0 s: too few
// writes in flight to fill etcd's transactions).
func (m *Master) RegisterAgent(reg *Registration, principal string, c *Outbox[ToAgent], registered func()) (string, []KillTask, error) {
	var (
		id      string
		kill    []KillTask
		persist *PersistedAgent
		err     error
	)
	m.registrations.do(func() { id, kill, persist, err = m.registerAgentInRegistry(reg, principal, c) })
	registered()
	if err == nil && persist != nil && m.store != nil {
		if err := m.store.PutAgent(id, *persist); err != nil {
			m.log.Warn("persist agent", "agent", id, "err", err)
		}
	}
	return id, kill, err
}

// registerAgentInRegistry is registerAgent under the master's lock, in
// steps: the registration checked (parseRegistration, no lock), the
// agent admitted to the registry (admitAgentLocked), what it runs
// reconciled with what the master knows (reconcileTasksLocked), the
// agent added to the allocator. It returns what the store must record
// (nil: nothing new).
func (m *Master) registerAgentInRegistry(reg *Registration, principal string, c *Outbox[ToAgent]) (string, []KillTask, *PersistedAgent, error) {
	p, err := parseRegistration(reg)
	if err != nil {
		return "", nil, nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	principal, err = m.agentPrincipalLocked(reg.AgentID, principal)
	if err != nil {
		return "", nil, nil, err
	}
	ag := m.admitAgentLocked(reg, p, principal, c)
	kill := m.reconcileTasksLocked(ag, reg.Tasks)
	if err := m.addToAllocatorLocked(ag); err != nil {
		delete(m.agents, ag.id)
		return "", nil, nil, fmt.Errorf("register agent %s: %w", ag.id, fromAllocator(err))
	}
	var persist *PersistedAgent
	if known := (PersistedAgent{Hostname: ag.hostname, Principal: principal}); m.knownAgents[ag.id] != known {
		m.knownAgents[ag.id] = known
		persist = &known
	}
	m.log.Info("agent registered", "agent", ag.id, "hostname", ag.hostname, "principal", principal, "resources", p.total.String(), "tasks", len(ag.tasks))
	m.trigger()
	return ag.id, kill, persist, nil
}

// parsedRegistration is what a registration offers, parsed.
type parsedRegistration struct {
	total, revocable, revInUse resources.Resources
}

// parseRegistration checks an agent's registration: its resources, its
// reserved roles, its performance score. Errors wrap ErrInvalid.
func parseRegistration(reg *Registration) (parsedRegistration, error) {
	var p parsedRegistration
	var err error
	if p.total, err = resources.Parse(reg.Resources); err != nil {
		return p, fmt.Errorf("register agent: resources: %w: %w", ErrInvalid, err)
	}
	if p.revocable, err = resources.Parse(reg.Revocable); err != nil {
		return p, fmt.Errorf("register agent: revocable: %w: %w", ErrInvalid, err)
	}
	if p.revInUse, err = resources.Parse(reg.RevocableInUse); err != nil {
		return p, fmt.Errorf("register agent: revocable in use: %w: %w", ErrInvalid, err)
	}
	if err := validateRolesIn(p.total.Add(p.revocable)); err != nil {
		return p, fmt.Errorf("register agent: resources: %w", err)
	}
	if s := reg.Score; s < 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return p, fmt.Errorf("register agent: performance score %v: must be a positive number (0: none): %w", s, ErrInvalid)
	}
	return p, nil
}

// admitAgentLocked puts the registering agent in the registry with
// stream c: a new entry, or the known one whose older stream it
// replaces (its offers rescinded, out of the allocator until
// addToAllocatorLocked); an agent of the previous run is awaited no
// more.
func (m *Master) admitAgentLocked(reg *Registration, p parsedRegistration, principal string, c *Outbox[ToAgent]) *agentEntry {
	id := reg.AgentID
	if id == "" {
		id = uuid.NewString()
	}
	ag := m.agents[id]
	if ag == nil {
		ag = &agentEntry{id: id, tasks: map[string]*taskEntry{}, lost: map[string]string{}}
		m.agents[id] = ag
	} else {
		if ag.out != nil {
			ag.out.cancel() // a newer stream replaces the old one
		}
		m.dropAgentFromAllocatorLocked(ag)
	}
	ag.hostname, ag.principal, ag.total, ag.revocable, ag.attributes = reg.Hostname, principal, p.total, p.revocable, reg.Attributes
	ag.oversub, ag.score = reg.Oversub, reg.Score
	ag.revInUse, ag.revInUseSet = p.revInUse, reg.RevocableInUseSet
	ag.out, ag.lastSeen, ag.unreachable = c, time.Now(), false
	if m.awaited[id] {
		delete(m.awaited, id)
		if len(m.awaited) == 0 {
			m.allBack = time.Now()
			m.log.Info("every agent of the registry re-registered", "after", m.allBack.Sub(m.started).Round(time.Millisecond))
		}
	}
	return ag
}

// reconcileTasksLocked reconciles what the agent runs against what the
// master knows, report by report (reconcileReportLocked), then ends the
// tasks the master tracks on the agent that it did not report
// (loseUnreportedLocked). It returns the tasks the agent must kill.
func (m *Master) reconcileTasksLocked(ag *agentEntry, reps []TaskReport) []KillTask {
	var kill []KillTask
	seen := map[string]bool{}
	for _, rep := range reps {
		if rep.Info.ID == "" {
			continue
		}
		if k, ok := m.reconcileReportLocked(ag, rep, seen); ok {
			kill = append(kill, k)
		}
	}
	clear(ag.lost)
	m.loseUnreportedLocked(ag, seen)
	return kill
}

// reconcileReportLocked settles one task an agent reports: the tracked
// task's state follows it, a task the master does not know is adopted
// (the master restarted), history or killed. A task is its framework's:
// a report of another framework's task of an ID the master tracks never
// touches the tracked one. It returns the task to kill, if any, and
// marks in seen the tracked tasks the report is of.
func (m *Master) reconcileReportLocked(ag *agentEntry, rep TaskReport, seen map[string]bool) (KillTask, bool) {
	tid := rep.Info.ID
	kill := KillTask{TaskID: tid, FrameworkID: rep.FrameworkID}
	t := ag.tasks[tid]
	if t != nil && rep.FrameworkID != "" && rep.FrameworkID != t.fw {
		// Another framework's task of the same ID, not the one the
		// master tracks: history at most; still running, nobody accounts
		// for it (a live ID is one task): killed.
		if terminal(rep.State) && rep.Acknowledged {
			m.completeReportLocked(ag.id, rep)
		}
		return kill, !terminal(rep.State)
	}
	seen[tid] = true
	if t != nil {
		m.reportedTrackedLocked(ag, t, rep)
		return KillTask{}, false
	}
	if fw, ok := ag.lost[tid]; ok && (fw == rep.FrameworkID || rep.FrameworkID == "") {
		return kill, !terminal(rep.State)
	}
	if fw, ok := m.answeredLost[tid]; ok && fw == rep.FrameworkID {
		// Its framework was told LOST (its agent missed the
		// re-registration window): LOST stays final. The task is killed,
		// its updates acknowledged on arrival, unforwarded.
		if terminal(rep.State) {
			m.completeReportLocked(ag.id, rep)
		}
		return kill, !terminal(rep.State)
	}
	if terminal(rep.State) && (rep.Acknowledged || !m.frameworkKnownLocked(rep.FrameworkID)) {
		// Never resurrect an ended task whose end was acknowledged (its
		// ID would stay in use forever): it goes to the history. Nor one
		// of a framework that is gone: nobody will acknowledge it, and
		// its update is acknowledged on arrival.
		m.completeReportLocked(ag.id, rep)
		return KillTask{}, false
	}
	if _, elsewhere := m.tasks[tid]; elsewhere {
		return KillTask{}, false
	}
	return kill, !m.adoptTaskLocked(ag, rep)
}

// reportedTrackedLocked applies an agent's report of a task the master
// tracks on it: one whose acknowledged end is done with is forgotten;
// otherwise the agent's state wins when it ended or the launch was
// still staging, and an in-flight resource update is settled.
func (m *Master) reportedTrackedLocked(ag *agentEntry, t *taskEntry, rep TaskReport) {
	if terminal(rep.State) && rep.Acknowledged {
		// Its framework acknowledged its end already: done.
		t.state = rep.State
		m.forgetTaskLocked(t)
		return
	}
	if terminal(rep.State) || t.state == TaskStaging {
		t.state = rep.State
	}
	t.recovered = terminal(t.state)
	m.reregisteredResizeLocked(ag, t, rep.Resources)
}

// adoptTaskLocked tracks a task the agent reports and the master does
// not know (the master restarted): false when its resources do not
// parse (the caller kills it).
func (m *Master) adoptTaskLocked(ag *agentEntry, rep TaskReport) bool {
	res, err := resources.Parse(rep.Resources)
	if err != nil {
		return false
	}
	tid := rep.Info.ID
	t := &taskEntry{info: rep.Info, fw: rep.FrameworkID, agent: ag.id, res: res, state: rep.State, recovered: terminal(rep.State)}
	if roles := m.knownFWs[rep.FrameworkID].Roles; len(roles) == 1 {
		t.role = roles[0]
	}
	if f := m.frameworks[rep.FrameworkID]; f != nil {
		f.tasks[tid] = t
		if len(f.roles) == 1 {
			t.role = f.roles[0]
		}
	}
	m.tasks[tid] = t
	ag.tasks[tid] = t
	return true
}

// loseUnreportedLocked ends the agent's tracked tasks its registration
// did not report: a STAGING one may still be in flight (unseenStaging
// gives it a grace), any other live one is LOST.
func (m *Master) loseUnreportedLocked(ag *agentEntry, seen map[string]bool) {
	for tid, t := range ag.tasks {
		if seen[tid] {
			continue
		}
		if t.state == TaskStaging {
			if _, ok := m.unseenStaging[t]; !ok {
				m.unseenStaging[t] = time.Now()
			}
			continue
		}
		if !terminal(t.state) {
			t.recovered = true // not in the allocator's usage below
			m.setTaskStatusLocked(t, &TaskStatus{
				TaskID: tid, AgentID: ag.id, FrameworkID: t.fw, State: TaskLost,
				Reason: ReasonUnknownOnAgent, Message: "the agent re-registered without this task",
			})
			m.forgetTaskLocked(t)
		}
	}
}

// agentPrincipalLocked returns the principal to record for agent id
// registering as principal: principal itself, or without one (agent
// authentication off) the principal id registered with before, which an
// agent ID keeps. With agent authentication on, an ID known (live, or from
// the store) with another principal is refused; an ID known without one
// (registered before authentication was turned on) takes the new one.
func (m *Master) agentPrincipalLocked(id, principal string) (string, error) {
	owner := m.knownAgents[id].Principal
	if ag := m.agents[id]; ag != nil && ag.principal != "" {
		owner = ag.principal
	}
	if principal == "" {
		return owner, nil
	}
	if owner != "" && owner != principal {
		return "", fmt.Errorf("register agent: principal %q may not register agent %s, registered by principal %q: %w", principal, id, owner, ErrForbidden)
	}
	return principal, nil
}

// AdmitRegistration waits for a registration slot (or ctx's end) for an
// agent stream about to receive its registration (admit.go); the
// stream's handler calls the Ticket's Received once the registration is
// in and Release when RegisterAgent returned.
func (m *Master) AdmitRegistration(ctx context.Context) (*Ticket, error) {
	return m.admission.admit(ctx)
}

// HeartbeatInterval is how often agents send heartbeats, and frameworks
// get one.
func (m *Master) HeartbeatInterval() time.Duration { return m.opts.HeartbeatInterval }

// AllAgentsBack returns when the last agent of the registry the master
// started (or was elected) with re-registered; zero while some are
// awaited, or if it started with none.
func (m *Master) AllAgentsBack() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.allBack
}

// frameworkKnownLocked reports whether a framework is subscribed or
// persisted (it may re-subscribe).
func (m *Master) frameworkKnownLocked(id string) bool {
	if m.frameworks[id] != nil {
		return true
	}
	_, ok := m.knownFWs[id]
	return ok
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
	// The estimate leaves out what the revocable tasks hold; the pool adds
	// it back (revocablePoolLocked); the tasks are in used.
	info := allocator.AgentInfo{ID: ag.id, Total: ag.total, Revocable: revocablePoolLocked(ag, ag.revocable), Attributes: ag.attributes,
		Score: ag.score}
	if r := m.reservations[ag.id]; len(r) > 0 {
		info.Total = applyReservations(ag.total, r)
	}
	if err := m.alloc.AddAgent(info, used); err != nil {
		m.log.Warn("add agent with usage", "agent", ag.id, "err", err)
		if err := m.alloc.AddAgent(allocator.AgentInfo{ID: ag.id, Total: ag.total, Revocable: ag.revocable, Score: ag.score}, nil); err != nil {
			return err
		}
	}
	ag.inAllocator = true
	m.dem.SetAgent(ag.id, ag.total)
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

// AgentGone handles the end of an agent's stream. The agent stays
// registered until its heartbeats time out.
func (m *Master) AgentGone(id string, c *Outbox[ToAgent]) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ag := m.agents[id]
	if ag == nil || ag.out != c {
		return
	}
	ag.out = nil
	m.log.Info("agent disconnected", "agent", id)
	// No capacity in the demands' plan until it is back (a demand
	// placed there re-plans before its start: demandCycleLocked).
	m.dem.SetAgent(id, nil)
	// No offers for an agent that cannot receive tasks; its tasks keep
	// their resources until it comes back or times out.
	for _, o := range slices.Clone(ag.offers) {
		m.rescindLocked(o, nil)
	}
}

// AgentMessage handles one message from a registered agent (nil: one
// that only shows the agent is alive).
func (m *Master) AgentMessage(id string, c *Outbox[ToAgent], msg FromAgent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ag := m.agents[id]
	if ag == nil || ag.out != c {
		return
	}
	ag.lastSeen = time.Now()
	switch x := msg.(type) {
	case *TaskStatus:
		m.agentStatusLocked(ag, x)
	case *AgentOversub:
		rev, err1 := resources.Parse(x.Revocable)
		inUse, err2 := resources.Parse(x.InUse)
		if err := errors.Join(err1, err2); err != nil {
			m.log.Warn("bad oversubscribed resources", "agent", id, "err", err)
			return
		}
		ag.oversub = x.State
		if rev.Equal(ag.revocable) && inUse.Equal(ag.revInUse) && x.InUseSet == ag.revInUseSet {
			return // only the corrections or the explanation changed
		}
		ag.revocable, ag.revInUse, ag.revInUseSet = rev, inUse, x.InUseSet
		// rev is what is free now: the allocator's total adds back what
		// revocable containers held when rev was computed; offers beyond
		// rev are rescinded first.
		info := allocator.AgentInfo{ID: id, Total: ag.total, Revocable: m.revocableTotalLocked(ag, rev), Attributes: ag.attributes, Score: ag.score}
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
			for _, o := range ag.offers {
				if o.fw == r.FrameworkID && o.res.Contains(r.Resources) {
					m.withdrawOfferLocked(o) // the allocator took it back
					break
				}
			}
		}
		m.trigger()
	}
}

// agentStatusLocked records a status update from an agent and forwards it
// to the framework. An update is matched by framework and task: one of
// another framework's task of an ID the master tracks on that agent (a
// task of a framework that is gone, whose end the agent still retries)
// is not the tracked task's — before, the retried FINISHED of a removed
// framework's task ended the new framework's task of that ID, whose
// next update then had it killed. Updates of tasks the master does not
// track on that agent are acknowledged at once so the agent stops
// retrying, and such a task still alive is killed: nobody accounts for
// its resources or would ever end it (the task of a framework told it
// was LOST, a copy of a task that runs on another agent). An update
// without a framework (an older agent) is matched by the task ID.
func (m *Master) agentStatusLocked(ag *agentEntry, st *TaskStatus) {
	st.AgentID = ag.id
	t := ag.tasks[st.TaskID]
	if t != nil && st.FrameworkID != "" && st.FrameworkID != t.fw {
		m.log.Info("agent reports another framework's task of a tracked ID: not applied to it",
			"agent", ag.id, "task", st.TaskID, "framework", st.FrameworkID, "tracked_framework", t.fw, "state", st.State)
		t = nil
	}
	if t == nil {
		if !terminal(st.State) {
			m.log.Warn("agent reports a live task the master does not track: killing it",
				"agent", ag.id, "task", st.TaskID, "framework", st.FrameworkID, "state", st.State)
			ag.out.send(&KillTask{TaskID: st.TaskID, FrameworkID: st.FrameworkID})
		}
		if st.UUID != "" {
			ag.out.send(&AckStatus{TaskID: st.TaskID, FrameworkID: st.FrameworkID, UUID: st.UUID})
		}
		return
	}
	st.FrameworkID = t.fw
	if st.Reason == ReasonResourcesUpdated || st.Reason == ReasonResourcesUpdateFailed {
		m.resizeStatusLocked(ag, t, st)
	}
	m.setTaskStatusLocked(t, st)
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
