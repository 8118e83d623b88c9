package master

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/master/api"
	"github.com/brimnode/brim/resources"
)

// State returns a snapshot of the master's state.
func (m *Master) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	// Every list is [] in JSON, never null, when empty (clients index
	// them without a nil check).
	st := State{StartedAt: m.started, Quota: map[string]QuotaState{}, Weights: map[string]float64{},
		Agents: []AgentState{}, Frameworks: []FrameworkState{}, Tasks: []api.TaskState{}, Offers: []OfferState{},
		Roles: []RoleState{}, Shares: []FrameworkShareState{}, Demands: []DemandState{},
		CompletedTasks: make([]api.TaskState, 0, len(m.completed.tasks)), CompletedFrameworks: make([]FrameworkState, 0, len(m.completed.frameworks))}
	for _, ag := range m.agents {
		st.Agents = append(st.Agents, AgentState{ID: ag.id, Hostname: ag.hostname, Principal: ag.principal, Resources: ag.total.String(), Revocable: ag.revocable.String(),
			RevocableInUse: ag.revInUse.String(), Reserved: m.reservations[ag.id].String(), Connected: ag.out != nil, Unreachable: ag.unreachable, Tasks: len(ag.tasks),
			PerformanceScore: ag.score, Oversubscription: ag.oversubStateLocked()})
	}
	sort.Slice(st.Agents, func(i, j int) bool { return st.Agents[i].ID < st.Agents[j].ID })
	for _, f := range m.frameworks {
		st.Frameworks = append(st.Frameworks, FrameworkState{ID: f.id, Name: f.name, Principal: f.principal, Roles: nonNil(f.roles), Connected: f.out != nil, Tasks: len(f.tasks), Offers: len(f.offers)})
	}
	sort.Slice(st.Frameworks, func(i, j int) bool { return st.Frameworks[i].ID < st.Frameworks[j].ID })
	for _, t := range m.tasks {
		st.Tasks = append(st.Tasks, taskStateOf(t))
	}
	st.CompletedTasks = append(st.CompletedTasks, m.completed.tasks...)
	for _, f := range m.completed.frameworks {
		f.Roles = nonNil(f.Roles)
		st.CompletedFrameworks = append(st.CompletedFrameworks, f)
	}
	sort.Slice(st.Tasks, func(i, j int) bool { return st.Tasks[i].ID < st.Tasks[j].ID })
	for _, o := range m.offers {
		st.Offers = append(st.Offers, OfferState{ID: o.id, FrameworkID: o.fw, AgentID: o.agent, Role: o.role, Resources: o.res.String()})
	}
	sort.Slice(st.Offers, func(i, j int) bool { return st.Offers[i].ID < st.Offers[j].ID })
	for _, r := range m.alloc.Shares() {
		st.Roles = append(st.Roles, RoleState{Role: r.Role, Weight: r.Weight, Share: r.Share, Allocated: r.Allocated.String()})
	}
	for _, s := range m.alloc.FrameworkShares() {
		st.Shares = append(st.Shares, FrameworkShareState{FrameworkID: s.FrameworkID, Role: s.Role, Share: s.Share, Allocated: s.Allocated.String()})
	}
	for r, q := range m.quota {
		st.Quota[r] = QuotaState{Guarantee: q.Guarantee.String(), Limit: q.Limit.String()}
	}
	for r, w := range m.weights {
		st.Weights[r] = w
	}
	p50, p99 := m.cyclePercentilesLocked()
	st.Cycles = map[string]float64{"count": float64(m.cycles.count), "offers": float64(m.cycles.offers),
		"launches": float64(m.cycles.launches), "p50Ms": p50.Seconds() * 1000, "p99Ms": p99.Seconds() * 1000}
	for _, d := range m.dem.List() {
		st.Demands = append(st.Demands, DemandState{ID: d.ID, State: d.State.String(), Framework: d.Framework, Role: d.Role,
			Reason: string(d.Reason), Message: d.Message, Start: d.Start, End: d.End})
	}
	return st
}

// nonNil is s, or an empty slice for nil (JSON [] rather than null).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Reserve dynamically reserves resources of an agent for the roles named
// in res ("cpus(ads):1;mem(ads):512"), on behalf of principal
// ("anonymous" when empty). Offers of the agent are rescinded when they
// hold what is asked. All or nothing: when one role's part cannot be
// reserved, or the store cannot record the result, nothing is reserved.
// Errors wrap ErrInvalid, ErrForbidden (a reservation on behalf of
// another principal), ErrNotFound (unknown agent) or ErrInsufficient; a
// store error wraps none.
func (m *Master) Reserve(agentID, principal string, res resources.Resources) error {
	if principal == "" {
		principal = Anonymous
	}
	byRole, err := reservationRequest(res, principal, false)
	if err != nil {
		return err
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	ag := m.agents[agentID]
	if ag == nil || !ag.inAllocator {
		return fmt.Errorf("reserve on agent %q: %w", agentID, ErrNotFound)
	}
	var done []string // roles reserved in the allocator, undone on failure
	undo := func() {
		if !m.inAllocatorLocked(agentID) {
			return
		}
		for _, role := range done {
			if err := m.alloc.Unreserve(agentID, byRole[role]); err != nil {
				m.log.Error("undo reservation", "agent", agentID, "resources", byRole[role].String(), "err", err)
			}
		}
	}
	next := m.reservations[agentID]
	for _, role := range sortedRoles(byRole) {
		plain := byRole[role].Unreserve()
		err := m.alloc.Reserve(agentID, role, principal, plain)
		if errors.Is(err, allocator.ErrInsufficient) {
			m.rescindAgentOffersLocked(agentID)
			err = m.alloc.Reserve(agentID, role, principal, plain)
		}
		if err != nil {
			undo()
			return fromAllocator(err) // the allocator's error names the resources and the agent
		}
		done = append(done, role)
		next = next.Add(byRole[role])
	}
	if err := m.storeReservationsLocked(ag, next); err != nil {
		undo()
		return err
	}
	m.reservations[agentID] = next
	m.trigger()
	return nil
}

// Unreserve releases dynamic reservations made by Reserve; all or nothing,
// as Reserve. Errors wrap ErrInvalid, ErrNotFound or ErrInsufficient (not
// reserved, or in use); a store error wraps none.
func (m *Master) Unreserve(agentID, principal string, res resources.Resources) error {
	if principal == "" {
		principal = Anonymous
	}
	byRole, err := reservationRequest(res, principal, true)
	if err != nil {
		return err
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	ag := m.agents[agentID]
	if ag == nil || !ag.inAllocator {
		return fmt.Errorf("unreserve on agent %q: %w", agentID, ErrNotFound)
	}
	next := m.reservations[agentID]
	for _, role := range sortedRoles(byRole) {
		if r := byRole[role]; !next.Contains(r) {
			return fmt.Errorf("unreserve %s on %s: not reserved: %w", r, agentID, ErrInsufficient)
		}
		next = next.Subtract(byRole[role])
	}
	var done []string
	undo := func() {
		if !m.inAllocatorLocked(agentID) {
			return
		}
		for _, role := range done {
			for _, e := range byRole[role] {
				one := resources.Resources{e}
				if err := m.alloc.Reserve(agentID, e.Role, e.Reservation.Principal, one.Unreserve()); err != nil {
					m.log.Error("undo unreservation", "agent", agentID, "resources", one.String(), "err", err)
				}
			}
		}
	}
	for _, role := range sortedRoles(byRole) {
		r := byRole[role]
		err := m.alloc.Unreserve(agentID, r)
		if errors.Is(err, allocator.ErrInsufficient) {
			m.rescindAgentOffersLocked(agentID)
			err = m.alloc.Unreserve(agentID, r)
		}
		if err != nil {
			undo()
			return fromAllocator(err) // the allocator's error names the resources and the agent
		}
		done = append(done, role)
	}
	if err := m.storeReservationsLocked(ag, next); err != nil {
		undo()
		return err
	}
	m.reservations[agentID] = next
	m.trigger()
	return nil
}

// Anonymous is the principal of operator requests without authentication.
const Anonymous = "anonymous"

func (m *Master) rescindAgentOffersLocked(agentID string) {
	if ag := m.agents[agentID]; ag != nil {
		for _, o := range slices.Clone(ag.offers) {
			m.rescindLocked(o, nil)
		}
	}
}

// storeReservationsLocked records an operator's change of ag's
// reservations (res, already made in the allocator) in the store, with
// m.mu released while the store's writer writes it (writes.go) and held
// again when it returns: the agent's offers are rescinded first and it
// gets none meanwhile (ag.reserving), so that no ACCEPT changes its
// reservations under the write. The caller holds m.opMu.
func (m *Master) storeReservationsLocked(ag *agentEntry, res resources.Resources) error {
	if m.store == nil {
		return nil
	}
	m.rescindAgentOffersLocked(ag.id)
	ag.reserving = true
	id := ag.id
	// The master's record changes with the allocator's, before the lock
	// is released: an agent that re-registers during the write is added
	// back to the allocator with the new reservations (it was added with
	// the old ones, which the master then no longer had).
	prev := m.reservations[id]
	m.reservations[id] = res
	done := m.writes.put(write{put: func(s Store) error { return s.PutReservations(id, res) }})
	m.mu.Unlock()
	err := <-done
	m.mu.Lock()
	ag.reserving = false
	if err != nil {
		m.reservations[id] = prev
		return fmt.Errorf("persist reservations of %s: %w", ag.id, err)
	}
	return nil
}

// inAllocatorLocked reports whether agent id is in the allocator now (an
// undo after a failed reservation write skips one that left it during
// the write: it is added back with the master's reservations).
func (m *Master) inAllocatorLocked(id string) bool {
	ag := m.agents[id]
	return ag != nil && ag.inAllocator
}

// putReservationsLocked queues an agent's reservations for the store
// (write-behind: a failure is logged).
func (m *Master) putReservationsLocked(agentID string, res resources.Resources) {
	if m.store == nil {
		return
	}
	m.writes.enqueue(write{what: "persist reservations", args: []any{"agent", agentID},
		put: func(s Store) error { return s.PutReservations(agentID, res) }})
}

// reservationRequest checks a /reserve or /unreserve body and groups it by
// role, in reserved form (principal attached).
func reservationRequest(res resources.Resources, principal string, unreserve bool) (map[string]resources.Resources, error) {
	if res.IsEmpty() {
		return nil, fmt.Errorf("no resources: %w", ErrInvalid)
	}
	out := map[string]resources.Resources{}
	for _, e := range res {
		if e.Revocable {
			return nil, fmt.Errorf("%s: %w: %w", e.String(), ErrInvalid, resources.ErrRevocableReservation)
		}
		if e.Role == resources.Unreserved || e.Role == "" {
			return nil, fmt.Errorf("%s: name a role, e.g. cpus(ads):1: %w", e.String(), ErrInvalid)
		}
		if err := ValidateRole(e.Role); err != nil {
			return nil, err // it names the role (the resource could be 100 KB of it)
		}
		if e.Type != resources.Scalar {
			return nil, fmt.Errorf("%s: only scalars can be reserved: %w", e.String(), ErrInvalid)
		}
		p := principal
		if e.Reservation != nil {
			if unreserve {
				p = e.Reservation.Principal
			} else if e.Reservation.Principal != principal {
				return nil, fmt.Errorf("%s: principal %q is not the caller %q: %w", e.String(), e.Reservation.Principal, principal, ErrForbidden)
			}
		}
		plain := resources.Resources{e}.Unreserve()
		plain[0].Role, plain[0].Reservation = resources.Unreserved, nil
		r, err := plain.Reserve(e.Role, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", e.String(), ErrInvalid, err)
		}
		out[e.Role] = out[e.Role].Add(r)
	}
	return out, nil
}

// SetQuota sets (an empty Quota clears) a role's quota: validated, then
// written to the store, then applied, so that a quota in force is one a
// restart keeps. Errors wrap ErrInvalid (role, quota); a store error wraps
// none and changes nothing.
func (m *Master) SetQuota(role string, q allocator.Quota) error {
	if err := ValidateRole(role); err != nil {
		return fmt.Errorf("set quota: %w", err)
	}
	if err := validateQuota(q); err != nil {
		return fmt.Errorf("set quota of %s: %w", role, err)
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if m.store != nil { // outside m.mu: see opMu
		if err := <-m.writes.put(write{put: func(s Store) error { return s.PutQuota(role, q) }}); err != nil {
			return fmt.Errorf("persist quota of %s: %w", role, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.alloc.SetQuota(role, q); err != nil {
		// validateQuota leaves only the allocator's own limits (its number
		// of scalar kinds): put the store back as it was.
		if m.store != nil {
			prev := m.quota[role] // opMu held: nothing else changes it
			done := m.writes.put(write{put: func(s Store) error { return s.PutQuota(role, prev) }})
			m.mu.Unlock()
			if perr := <-done; perr != nil {
				m.log.Error("restore persisted quota", "role", role, "err", perr)
			}
			m.mu.Lock()
		}
		return fmt.Errorf("set quota of %s: %w", role, fromAllocator(err))
	}
	if q.Guarantee.IsEmpty() && q.Limit.IsEmpty() {
		delete(m.quota, role)
	} else {
		m.quota[role] = q
	}
	m.trigger()
	return nil
}

// validateQuota checks a quota's resources: unreserved, non-revocable,
// non-negative scalars, each guarantee at most its limit. Errors wrap
// ErrInvalid.
func validateQuota(q allocator.Quota) error {
	for _, part := range []struct {
		what string
		res  resources.Resources
	}{{"guarantee", q.Guarantee}, {"limit", q.Limit}} {
		for _, e := range part.res {
			if e.Type != resources.Scalar || e.Revocable || (e.Role != "" && e.Role != resources.Unreserved) || e.Scalar < 0 {
				return fmt.Errorf("%s %s: must be an unreserved non-revocable scalar: %w", part.what, e.String(), ErrInvalid)
			}
		}
	}
	for _, e := range q.Guarantee {
		if limited := q.Limit.Filter(func(l resources.Resource) bool { return l.Name == e.Name }); !limited.IsEmpty() &&
			q.Guarantee.Scalar(e.Name) > q.Limit.Scalar(e.Name) {
			return fmt.Errorf("guarantee of %s above its limit: %w", e.Name, ErrInvalid)
		}
	}
	return nil
}

// SetWeight sets a role's weight; see SetWeights.
func (m *Master) SetWeight(role string, w float64) error {
	return m.SetWeights(map[string]float64{role: w})
}

// SetWeights sets roles' weights (none: nothing), all or none: every role and weight is
// validated, then all are written to the store in one transaction, then
// applied. Errors wrap ErrInvalid (a role, or a weight not positive and
// finite); a store error wraps none and changes nothing.
func (m *Master) SetWeights(weights map[string]float64) error {
	roles := slices.Sorted(maps.Keys(weights))
	for _, role := range roles {
		if err := ValidateRole(role); err != nil {
			return fmt.Errorf("set weight: %w", err)
		}
		if err := api.CheckWeight(weights[role]); err != nil {
			return fmt.Errorf("set weight of %s: %w: %w", role, err, ErrInvalid)
		}
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if m.store != nil { // outside m.mu: see opMu
		if err := <-m.writes.put(write{put: func(s Store) error { return s.PutWeights(weights) }}); err != nil {
			return fmt.Errorf("persist weights: %w", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, role := range roles {
		// Cannot fail: the role and the weight passed the allocator's checks above.
		if err := m.alloc.SetWeight(role, weights[role]); err != nil {
			return fmt.Errorf("set weight of %s: %w", role, fromAllocator(err))
		}
		m.weights[role] = weights[role]
	}
	m.trigger()
	return nil
}
