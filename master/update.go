package master

import (
	"fmt"
	"time"

	"github.com/brimnode/brim/resources"
)

// resize is a task's resource update sent to its agent and not yet
// answered. The growth is held for the task in the allocator from the
// moment the offers are used; the shrink is given back only when the
// agent confirms it (a memory limit below the container's usage cannot be
// applied, so the agent may refuse a shrink too).
type resize struct {
	res      resources.Resources // the task's new total
	grow     resources.Resources // want - current, taken from the offers
	growRole string              // the offers' role the growth came from
	shrink   resources.Resources // current - want, returned on confirmation
}

// held is what the allocator accounts to the task: its resources and, while
// an update is in flight, the growth taken for it.
func (t *taskEntry) held() resources.Resources {
	if t.pending == nil {
		return t.res
	}
	return t.res.Add(t.pending.grow)
}

// UpdateTask asks the task's agent to resize a RUNNING or STARTING task
// (id, of framework frameworkID) to resourcesText, which must name the
// same resources (names, roles, reservations, revocability) as the task's
// current ones. Growth must be
// in the named offers, all of the framework and of the task's agent (and
// of the task's role); the offers are used up and what the growth does
// not take goes back to the allocator, as after an ACCEPT. The master's
// view of the task changes when the agent confirms (a status update with
// reason RESOURCES_UPDATED): then a shrink goes back to the allocator; a
// RESOURCES_UPDATE_FAILED answer gives the growth back. A rejected update
// changes nothing. Errors wrap ErrNotFound (framework, task), ErrConflict
// (task not running, an update in flight), ErrClosed (agent
// disconnected), ErrInvalid (bad resources, an offer of another agent or
// role), ErrStaleOffer or ErrInsufficient (growth not in the offers).
func (m *Master) UpdateTask(frameworkID, id, resourcesText string, offerIDs []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, err := m.framework(frameworkID)
	if err != nil {
		return err
	}
	t := f.tasks[id]
	if t == nil {
		if m.tasks[id] != nil {
			return fmt.Errorf("update task %q: not a task of framework %s: %w", id, f.id, ErrNotFound)
		}
		return fmt.Errorf("update task %q: unknown task: %w", id, ErrNotFound)
	}
	if t.state != TaskRunning && t.state != TaskStarting {
		return fmt.Errorf("update task %s: task is %s, not RUNNING or STARTING: %w", id, t.state, ErrConflict)
	}
	if t.pending != nil {
		return fmt.Errorf("update task %s: the update to %s is not answered yet: %w", id, t.pending.res, ErrConflict)
	}
	ag := m.agents[t.agent]
	if ag == nil || ag.out == nil || !ag.inAllocator {
		return fmt.Errorf("update task %s: agent %s is disconnected: %w", id, t.agent, ErrClosed)
	}
	want, err := resources.Parse(resourcesText)
	if err != nil {
		return fmt.Errorf("update task %s: %w: %w", id, ErrInvalid, err)
	}
	if err := resources.ValidateTask(want); err != nil {
		return fmt.Errorf("update task %s: %w: %w", id, ErrInvalid, err)
	}
	if err := sameKinds(t.res, want); err != nil {
		return fmt.Errorf("update task %s: %w: %w", id, err, ErrInvalid)
	}
	if want.Equal(t.res) {
		return fmt.Errorf("update task %s: resources unchanged (%s): %w", id, want, ErrInvalid)
	}
	grow, shrink := want.Subtract(t.res), t.res.Subtract(want)

	// Validate the offers before anything changes.
	var offers []*offerEntry
	byRole := map[string]resources.Resources{}
	for _, oid := range offerIDs {
		o := f.offers[oid]
		if o == nil {
			return fmt.Errorf("update task %s: offer %q: %w", id, oid, ErrStaleOffer)
		}
		for _, p := range offers {
			if p == o {
				return fmt.Errorf("update task %s: offer %q named twice: %w", id, oid, ErrStaleOffer)
			}
		}
		if o.agent != t.agent {
			return fmt.Errorf("update task %s: offer %s is of agent %s, the task runs on agent %s: %w", id, oid, o.agent, t.agent, ErrInvalid)
		}
		if t.role != "" && o.role != t.role {
			return fmt.Errorf("update task %s: offer %s is for role %s, the task runs in role %s: %w", id, oid, o.role, t.role, ErrInvalid)
		}
		offers = append(offers, o)
		byRole[o.role] = byRole[o.role].Add(o.res)
	}
	growRole := t.role
	if !grow.IsEmpty() {
		found := false
		for _, r := range sortedRoles(byRole) {
			if byRole[r].Contains(grow) {
				byRole[r], growRole, found = byRole[r].Subtract(grow), r, true
				break
			}
		}
		if !found {
			var offered resources.Resources
			for _, r := range byRole {
				offered = offered.Add(r)
			}
			return fmt.Errorf("update task %s: growth %s is not in the offers (%s): %w", id, grow, offered, ErrInsufficient)
		}
	}

	// Apply: the offers are used up, what the growth leaves goes back.
	zero := time.Duration(0)
	for _, o := range offers {
		m.dropOfferLocked(o)
	}
	for role, res := range byRole {
		if res.IsEmpty() {
			continue
		}
		if err := m.alloc.RecoverRole(f.id, role, t.agent, res, &zero); err != nil {
			m.log.Warn("recover unused offer", "framework", f.id, "err", err)
		}
	}
	t.pending = &resize{res: want, grow: grow, growRole: growRole, shrink: shrink}
	m.sendResizeLocked(ag, t)
	m.log.Info("task update sent", "task", id, "agent", t.agent, "from", t.res.String(), "to", want.String())
	m.trigger()
	return nil
}

func (m *Master) sendResizeLocked(ag *agentEntry, t *taskEntry) {
	ag.out.send(&ResizeTask{TaskID: t.info.ID, FrameworkID: t.fw, Resources: t.pending.res})
}

// kindKey identifies a resource's kind: everything but its amount.
type kindKey struct {
	name, role, principal string
	typ                   resources.Type
	dynamic, revocable    bool
}

func kindOf(e resources.Resource) kindKey {
	k := kindKey{name: e.Name, role: e.Role, typ: e.Type, revocable: e.Revocable}
	if k.role == "" {
		k.role = resources.Unreserved
	}
	if e.Reservation != nil {
		k.dynamic, k.principal = true, e.Reservation.Principal
	}
	return k
}

// sameKinds checks that want names exactly the kinds of resources cur has:
// an update changes amounts, never a name's role, reservation or
// revocability, and adds or drops no resource.
func sameKinds(cur, want resources.Resources) error {
	have := map[kindKey]bool{}
	for _, e := range cur {
		if e.Type != resources.Scalar || e.Scalar > 0 {
			have[kindOf(e)] = true
		}
	}
	for _, e := range want {
		if !have[kindOf(e)] {
			return fmt.Errorf("%s: the task has no %s of this role, reservation and revocability (it has %s)", e.String(), e.Name, cur)
		}
	}
	wanted := map[kindKey]bool{}
	for _, e := range want {
		if e.Type != resources.Scalar || e.Scalar > 0 {
			wanted[kindOf(e)] = true
		}
	}
	for _, e := range cur {
		if k := kindOf(e); have[k] && !wanted[k] {
			return fmt.Errorf("%s: an update may not drop a resource of the task", e.String())
		}
	}
	return nil
}

// resizeStatusLocked applies an agent's answer to a resource update (a
// status with reason RESOURCES_UPDATED or RESOURCES_UPDATE_FAILED) before
// the status goes to the framework. Retries of an answer already applied
// are ignored.
func (m *Master) resizeStatusLocked(ag *agentEntry, t *taskEntry, st *TaskStatus) {
	if st.UUID != "" {
		if st.UUID == t.resizeUUID {
			return
		}
		t.resizeUUID = st.UUID
	}
	p := t.pending
	zero := time.Duration(0)
	switch st.Reason {
	case ReasonResourcesUpdated:
		res, err := resources.Parse(st.Resources)
		if err != nil || res.IsEmpty() {
			m.log.Warn("resource update confirmation without valid resources", "task", t.info.ID, "resources", st.Resources, "err", err)
			return
		}
		switch {
		case p != nil && res.Equal(p.res):
			t.pending = nil
			t.setResources(res)
			if !p.shrink.IsEmpty() && ag.inAllocator {
				if err := m.alloc.RecoverRole(t.fw, t.role, t.agent, p.shrink, &zero); err != nil {
					m.log.Warn("recover shrunk task resources", "task", t.info.ID, "err", err)
				}
				m.trigger()
			}
			m.log.Info("task resources updated", "task", t.info.ID, "resources", res.String())
		case res.Equal(t.res):
			// Already known (the agent re-registered with it).
		default:
			// The agent applied an update this master did not send (one
			// from before a restart): the agent's report wins, and the
			// agent's usage is rebuilt from its tasks.
			m.log.Warn("task resized to unexpected resources; resyncing the agent's allocation",
				"task", t.info.ID, "resources", res.String(), "expected", t.res.String())
			t.setResources(res)
			m.resyncAgentLocked(ag)
		}
	case ReasonResourcesUpdateFailed:
		if p == nil {
			return
		}
		t.pending = nil
		if !p.grow.IsEmpty() && ag.inAllocator {
			if err := m.alloc.RecoverRole(t.fw, p.growRole, t.agent, p.grow, &zero); err != nil {
				m.log.Warn("recover growth of a failed update", "task", t.info.ID, "err", err)
			}
			m.trigger()
		}
		m.log.Warn("task resource update failed", "task", t.info.ID, "message", st.Message)
	}
}

func (t *taskEntry) setResources(res resources.Resources) {
	t.res = res
}

// reregisteredResizeLocked settles a task's in-flight update when its
// agent re-registers, from the resources the agent reports: applied
// (the shrink is returned with the agent's rebuilt usage), or sent again
// on the new stream (applying an update twice is harmless).
func (m *Master) reregisteredResizeLocked(ag *agentEntry, t *taskEntry, reported string) {
	p := t.pending
	if p == nil {
		return
	}
	if terminal(t.state) {
		t.pending = nil // nothing to resize; the growth goes back with the agent's usage
		return
	}
	if res, err := resources.Parse(reported); err == nil && res.Equal(p.res) {
		t.pending = nil
		t.setResources(res)
		return
	}
	m.sendResizeLocked(ag, t)
}

// resyncAgentLocked rebuilds the agent's allocation from its tasks.
func (m *Master) resyncAgentLocked(ag *agentEntry) {
	if !ag.inAllocator {
		return
	}
	m.dropAgentFromAllocatorLocked(ag)
	if err := m.addToAllocatorLocked(ag); err != nil {
		m.log.Error("re-add agent to the allocator", "agent", ag.id, "err", err)
	}
	m.trigger()
}
