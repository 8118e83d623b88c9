package master

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/resources"
	"github.com/google/uuid"
)

// FrameworkPrincipal returns the principal that subscribed framework id
// ("" without framework authentication) and whether it is subscribed:
// the transport lets only that principal act for it.
func (m *Master) FrameworkPrincipal(id string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.frameworks[id]
	if f == nil {
		return "", false
	}
	return f.principal, true
}

// SubscriberRoles returns the roles a subscription of fi by principal
// gets, for the transport to check the register ACL for each: a
// failover keeps the framework's roles; a new framework gets fi's, or
// DefaultRole. Errors wrap ErrForbidden: a failover, or a re-subscription
// after a master restart, by another principal than the one that
// subscribed the framework (the persisted principal decides).
func (m *Master) SubscriberRoles(fi *FrameworkInfo, principal string) ([]string, error) {
	roles := fi.Roles
	if len(roles) == 0 {
		roles = []string{DefaultRole}
	}
	if fi.ID == "" {
		return roles, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.frameworks[fi.ID]; f != nil {
		if f.principal != principal {
			return nil, fmt.Errorf("subscribe: principal %q may not fail over framework %s, subscribed by principal %q: %w", principal, fi.ID, f.principal, ErrForbidden)
		}
		return f.roles, nil
	}
	if known, ok := m.knownFWs[fi.ID]; ok && known.Principal != "" && known.Principal != principal {
		return nil, fmt.Errorf("subscribe: principal %q may not re-subscribe framework %s, subscribed by principal %q: %w", principal, fi.ID, known.Principal, ErrForbidden)
	}
	return roles, nil
}

// Subscribe registers or fails over a framework. A framework that is not
// subscribed (new, or known from the store) has its record written
// first, outside the master's lock (storeSubscription), then joins; a
// failover keeps the record it has. Errors wrap ErrInvalid, ErrNotLeader
// or ErrClosed (the record could not be written: this master no longer
// serves), or are the allocator's.
func (m *Master) Subscribe(req *Subscription, c *Outbox[ToFramework]) (string, error) {
	fi := req.Info
	if fi == nil {
		return "", fmt.Errorf("subscribe: no framework info: %w", ErrInvalid)
	}
	roles := fi.Roles
	if len(roles) == 0 {
		roles = []string{DefaultRole}
	}
	for _, r := range roles {
		if err := ValidateRole(r); err != nil {
			return "", fmt.Errorf("subscribe: %w", err)
		}
	}
	id := fi.ID
	if id == "" {
		id = uuid.NewString()
	} else if err := m.notRemoved(id); err != nil {
		return "", err
	}
	stored, known, err := m.storeSubscription(id, roles, fi.Principal)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.applySubscribeLocked(id, roles, req, c, stored, known); err != nil {
		return "", err
	}
	return id, nil
}

// notRemoved refuses a Subscribe with the ID of a framework the master
// removed (ErrFrameworkRemoved) — as long as its history remembers it
// (MaxCompletedFrameworks; a master's start or failover forgets it, as
// Mesos's does). Before, the old ID was subscribed as a new framework.
func (m *Master) notRemoved(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.frameworks[id] == nil && m.completed.hasFramework(id) {
		return fmt.Errorf("subscribe %s: its failover timeout passed and its tasks were killed; subscribe without its ID: %w", id, ErrFrameworkRemoved)
	}
	return nil
}

// storeSubscription writes the record of framework id, not subscribed,
// before it subscribes, and waits for it without the master's lock. It
// reports whether it wrote the record and whether the store knew the
// framework before. A write refused because this master no longer leads
// (or has stopped) is returned. A framework the store does not know is
// refused (ErrUnavailable) when its record cannot be written: the next
// leader would not know it, and would take the ends of the tasks it
// launched meanwhile for those of a framework that is gone (acknowledged
// unforwarded, then LOST to its reconciliation: chaos seed 20261129,
// a Subscribe during an etcd quorum loss). A known one keeps its record,
// and the failed rewrite is logged.
func (m *Master) storeSubscription(id string, roles []string, principal string) (stored, known bool, err error) {
	m.mu.Lock()
	_, subscribed := m.frameworks[id]
	prev, known := m.knownFWs[id]
	m.mu.Unlock()
	if subscribed || m.store == nil {
		return false, known, nil
	}
	rec := PersistedFramework{Roles: roles, Principal: principal, Lost: prev.Lost}
	err = <-m.writes.put(write{what: "persist framework", args: []any{"framework", id},
		put: func(s Store) error { return s.PutFramework(id, rec) }})
	switch {
	case errors.Is(err, ErrNotLeader), errors.Is(err, ErrClosed):
		return false, known, fmt.Errorf("subscribe %s: %w", id, err)
	case err != nil && !known:
		m.mu.Lock()
		m.deleteFrameworkRecordLocked(id) // in case the write landed after all
		m.mu.Unlock()
		return false, false, fmt.Errorf("subscribe %s: its record could not be written, try again: %w: %w", id, ErrUnavailable, err)
	case err != nil:
		m.log.Warn("persist framework", "framework", id, "err", err)
	}
	return true, known, nil
}

// applySubscribeLocked subscribes framework id with outbox c: a failover
// when it is subscribed (the new stream replaces the old one,
// outstanding offers go back, the tasks stay), else it joins the
// allocator with the tasks agents reported for it. stored: its record
// was written (storeSubscription); known: the store knew it before.
func (m *Master) applySubscribeLocked(id string, roles []string, req *Subscription, c *Outbox[ToFramework], stored, known bool) error {
	fi := req.Info
	failover := fi.Failover
	if failover <= 0 {
		failover = m.opts.FailoverTimeout
	}
	f := m.frameworks[id]
	if f != nil {
		if f.out != nil {
			f.out.cancel()
		}
		for _, o := range f.offers {
			m.rescindLocked(o, nil)
		}
		f.out, f.name, f.failover, f.revocable, f.principal = c, fi.Name, failover, fi.Revocable, fi.Principal
		m.alloc.Revive(id)
		m.log.Info("framework failed over", "framework", id, "name", fi.Name)
	} else {
		f = &frameworkEntry{id: id, name: fi.Name, principal: fi.Principal, roles: roles, revocable: fi.Revocable,
			failover: failover, out: c, tasks: map[string]*taskEntry{}, offers: map[string]*offerEntry{}}
		for _, t := range m.tasks {
			if t.fw == id {
				f.tasks[t.info.ID] = t
				if t.role == "" && len(roles) == 1 {
					t.role = roles[0]
				}
			}
		}
		// Usage is held by the allocator since the agents re-registered.
		if err := m.alloc.AddFramework(allocator.FrameworkInfo{
			ID: id, Roles: roles, Capabilities: allocator.Capabilities{Revocable: fi.Revocable},
			SuppressedRoles: req.SuppressedRoles,
		}, nil); err != nil {
			if stored && !known {
				m.deleteFrameworkRecordLocked(id) // written for nothing
			}
			return fmt.Errorf("subscribe %s: %w", id, fromAllocator(err))
		}
		m.frameworks[id] = f
		m.knownFWs[id] = PersistedFramework{Roles: roles, Principal: fi.Principal, Lost: m.knownFWs[id].Lost}
		if !stored {
			m.persistFrameworkLocked(id) // it failed over, then left, while the store wrote
		}
		m.log.Info("framework subscribed", "framework", id, "name", fi.Name, "roles", roles)
	}
	c.send(&Subscribed{FrameworkID: id, Heartbeat: m.opts.HeartbeatInterval})
	// Updates the framework may have missed: the latest status of every
	// task (the agent also retries unacknowledged ones).
	for _, t := range f.tasks {
		if t.status != nil {
			c.send(t.status)
		}
	}
	m.trigger()
	return nil
}

// FrameworkGone handles the end of a framework's stream: its offers go
// back and it gets no new ones until it re-subscribes or times out.
func (m *Master) FrameworkGone(id string, c *Outbox[ToFramework]) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.frameworks[id]
	if f == nil || f.out != c {
		return
	}
	f.out = nil
	f.disconnectedAt = time.Now()
	for _, o := range f.offers {
		m.rescindLocked(o, nil)
	}
	m.alloc.Suppress(id)
	m.log.Info("framework disconnected", "framework", id, "failover_timeout", f.failover)
}

func (m *Master) framework(id string) (*frameworkEntry, error) {
	f := m.frameworks[id]
	if f == nil {
		return nil, fmt.Errorf("framework %q: %w", id, ErrNotFound)
	}
	return f, nil
}

func roleIn(r string, roles []string) bool {
	for _, x := range roles {
		if x == r {
			return true
		}
	}
	return false
}

func sortedRoles(m map[string]resources.Resources) []string {
	return slices.Sorted(maps.Keys(m))
}

// withFramework runs fn with the master locked and framework id looked
// up; errors wrap ErrNotFound for an unknown framework, ErrNotLeader
// once the leadership may have ended (Options.Tenure), or are fn's.
func (m *Master) withFramework(id string, fn func(f *frameworkEntry) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.held() {
		// Thawed after its term ended: a LOST it answered now would be a
		// verdict of a master that no longer leads (health.go).
		return fmt.Errorf("framework %s: %w: the leadership may have ended while this master was stopped", id, ErrNotLeader)
	}
	f, err := m.framework(id)
	if err != nil {
		return err
	}
	return fn(f)
}

// Decline gives offers back with an optional refusal filter.
func (m *Master) Decline(fw string, offerIDs []string, refuse *time.Duration) error {
	return m.withFramework(fw, func(f *frameworkEntry) error {
		seen := make(map[string]bool, len(offerIDs))
		for _, oid := range offerIDs {
			if seen[oid] {
				return fmt.Errorf("decline offer %q: %w: named twice", oid, ErrInvalid)
			}
			seen[oid] = true
			if f.offers[oid] == nil {
				return fmt.Errorf("decline offer %q: %w", oid, ErrStaleOffer)
			}
		}
		for _, oid := range offerIDs {
			o := f.offers[oid]
			m.metrics.declined++
			m.dropOfferLocked(o)
			if err := m.alloc.RecoverRole(f.id, o.role, o.agent, o.res, refuse); err != nil {
				m.log.Warn("recover declined offer", "offer", oid, "err", err)
			}
			m.demandOfferGoneLocked(o)
		}
		return nil
	})
}

// Revive clears the framework's filters and unsuppresses its roles.
func (m *Master) Revive(fw string, roles []string) error {
	return m.withFramework(fw, func(*frameworkEntry) error {
		m.alloc.Revive(fw, roles...)
		m.trigger()
		return nil
	})
}

// Suppress stops offers to the framework's roles until Revive.
func (m *Master) Suppress(fw string, roles []string) error {
	return m.withFramework(fw, func(*frameworkEntry) error {
		m.alloc.Suppress(fw, roles...)
		return nil
	})
}

// Kill asks the task's agent to Kill it. An unknown task gets a LOST
// update, as in Mesos.
func (m *Master) Kill(fw, taskID string) error {
	return m.withFramework(fw, func(f *frameworkEntry) error {
		t := f.tasks[taskID]
		if t == nil && len(m.awaited) > 0 {
			return fmt.Errorf("kill %s: unknown until the agents of the previous run re-register: %w", taskID, ErrClosed)
		}
		if t == nil {
			m.answerLostLocked(f.id, taskID)
			lost := &TaskStatus{
				TaskID: taskID, FrameworkID: f.id, State: TaskLost,
				Reason: ReasonReconciliation, Message: "unknown task", TimestampUnixNano: time.Now().UnixNano(),
			}
			m.persistFrameworkThenLocked(f.id, func() { m.toFrameworkLocked(f.id, lost) })
			return nil
		}
		ag := m.agents[t.agent]
		if ag == nil || ag.out == nil {
			return fmt.Errorf("kill %s: agent %s is disconnected: %w", taskID, t.agent, ErrClosed)
		}
		ag.out.send(&KillTask{TaskID: t.info.ID, FrameworkID: f.id})
		return nil
	})
}

// Acknowledge forwards a framework's acknowledgement to the agent and
// forgets a task whose terminal update is acknowledged.
func (m *Master) Acknowledge(fw, agentID, taskID, uuid string) error {
	return m.withFramework(fw, func(f *frameworkEntry) error {
		if uuid == "" {
			return fmt.Errorf("acknowledge %s: empty uuid: %w", taskID, ErrInvalid)
		}
		t := f.tasks[taskID]
		if t != nil {
			agentID = t.agent
		}
		if ag := m.agents[agentID]; ag != nil {
			ag.out.send(&AckStatus{TaskID: taskID, FrameworkID: f.id, UUID: uuid})
		}
		if t != nil && terminal(t.state) && t.status != nil && t.status.UUID == uuid {
			m.forgetTaskLocked(t)
		}
		return nil
	})
}

// Reconcile sends the latest known state of the named tasks (all when
// none is named); unknown tasks are reported LOST, except after a master
// restart while agents of the previous run have not re-registered (their
// re-registration reports the tasks).
func (m *Master) Reconcile(fw string, taskIDs []string) error {
	return m.withFramework(fw, func(f *frameworkEntry) error {
		ids := taskIDs
		if len(ids) == 0 {
			for id := range f.tasks {
				ids = append(ids, id)
			}
		}
		answers := make([]ToFramework, 0, len(ids))
		lost := false
		for _, id := range ids {
			st := &TaskStatus{TaskID: id, FrameworkID: f.id, Reason: ReasonReconciliation, TimestampUnixNano: time.Now().UnixNano()}
			if t := f.tasks[id]; t != nil {
				st.AgentID, st.State = t.agent, t.state
				if t.status != nil {
					st.HasExitCode, st.ExitCode, st.Message = t.status.HasExitCode, t.status.ExitCode, t.status.Message
				}
			} else {
				if len(m.awaited) > 0 {
					// It may be on an agent that has not re-registered
					// yet: answered when the window closes.
					m.deferReconcileLocked(f.id, id)
					continue
				}
				st.State, st.Message = TaskLost, "unknown task"
				m.answerLostLocked(f.id, id)
				lost = true
			}
			answers = append(answers, st)
		}
		send := func() { m.toFrameworkLocked(f.id, answers...) }
		if lost {
			m.persistFrameworkThenLocked(f.id, send) // before the framework hears LOST
			return nil
		}
		send()
		return nil
	})
}

// answerLostLocked records that the framework fw is being told that the
// task taskID, which the master does not know, is LOST: a task of that
// ID an agent reports later is killed, not adopted (agents.go). The
// record joins the framework's persisted ones at the next
// persistFrameworkLocked, which the caller runs before it sends the
// answer, so that a restart or a failover keeps it.
func (m *Master) answerLostLocked(fw, taskID string) {
	m.answeredLost[taskID] = fw
	k, ok := m.knownFWs[fw]
	if !ok {
		return
	}
	lost := slices.DeleteFunc(slices.Clone(k.Lost), func(id string) bool { return id == taskID })
	lost = append(lost, taskID)
	if n := len(lost) - maxAnsweredLost; n > 0 {
		lost = lost[n:]
	}
	k.Lost = lost
	m.knownFWs[fw] = k
}

// forgetLostLocked drops a LOST answer: a new task of that ID was
// launched. The caller persists the framework.
func (m *Master) forgetLostLocked(fw, taskID string) bool {
	if _, ok := m.answeredLost[taskID]; !ok {
		return false
	}
	delete(m.answeredLost, taskID)
	if k, ok := m.knownFWs[fw]; ok {
		k.Lost = slices.DeleteFunc(slices.Clone(k.Lost), func(id string) bool { return id == taskID })
		m.knownFWs[fw] = k
	}
	return true
}

// persistFrameworkLocked queues the framework's record (roles,
// principal, LOST answers) for the store (writes.go); a failed write is
// logged, and the record's next change writes it again.
func (m *Master) persistFrameworkLocked(fw string) { m.persistFrameworkThenLocked(fw, nil) }

// persistFrameworkThenLocked queues the framework's record and, once the
// store returned, runs then under the master's lock (at once without a
// store or a record): what the framework must not hear before its record
// keeps it. A failed write is logged and then runs all the same, as
// before the write left the lock.
func (m *Master) persistFrameworkThenLocked(fw string, then func()) {
	k, ok := m.knownFWs[fw]
	if !ok || m.store == nil {
		if then != nil {
			then()
		}
		return
	}
	w := write{what: "persist framework", args: []any{"framework", fw}, put: func(s Store) error { return s.PutFramework(fw, k) }}
	if then != nil {
		w.done = func(err error) {
			if err != nil {
				m.log.Warn("persist framework", "framework", fw, "err", err)
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			then()
		}
	}
	m.writes.enqueue(w)
}

// deleteFrameworkRecordLocked queues the removal of framework fw's
// record; a failed write is logged.
func (m *Master) deleteFrameworkRecordLocked(fw string) {
	if m.store == nil {
		return
	}
	m.writes.enqueue(write{what: "persist framework removal", args: []any{"framework", fw},
		put: func(s Store) error { return s.DeleteFramework(fw) }})
}

// toFrameworkLocked sends events to framework id's stream while it is
// subscribed (after a store write it may be gone, or failed over: its
// new stream gets them).
func (m *Master) toFrameworkLocked(id string, evs ...ToFramework) {
	f := m.frameworks[id]
	if f == nil {
		return
	}
	for _, ev := range evs {
		f.out.send(ev)
	}
}
