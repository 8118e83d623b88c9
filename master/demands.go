package master

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/resources"
	"github.com/google/uuid"
)

// Defaults of DemandOptions.
const (
	DefaultDemandLead   = 30 * time.Second
	DefaultDemandPickUp = time.Minute
)

// DemandOptions configure the master's time-aware demands
// (docs/demands.md).
type DemandOptions struct {
	// Lead: a demand starts ALLOCATING (its capacity is held from DRF)
	// this long before its planned start.
	Lead time.Duration
	// LooseLead is Lead for loose starts (0: Lead). Shorter, a loose
	// demand leaves DRF the capacity until closer to its start; short at
	// its start, it moves to agents with room beside DRF's load now.
	LooseLead time.Duration
	// PickUp: an ALLOCATED demand fails when its framework launches
	// nothing on it within this long; its resources are released.
	PickUp time.Duration
	// Clock tells the demands the time; nil: the system clock.
	Clock func() time.Time
}

// ActionSubmitDemand lets a principal submit and cancel demands for a role.
const ActionSubmitDemand = "submit_demand"

// demands is the master's part for demands: the book (state machines
// and plan) and the links between demands, offers and tasks. Guarded by
// Master.mu.
type demands struct {
	book   *demand.Book
	clock  func() time.Time
	offers map[string]string          // offer ID → demand ID
	tasks  map[string]string          // task ID → demand ID
	holds  map[string]map[string]bool // demand ID → agents holding for it
	// own is what demands' tasks and offers have per agent (unreserved
	// non-revocable): DRF's load on an agent is its allocation less this
	// (drfLoadLocked). Dropped before every Submit and Tick, built on the
	// first load asked after (only placements within the lead ask).
	own map[string]resources.Resources
}

func newDemands(o DemandOptions) *demands {
	if o.Lead <= 0 {
		o.Lead = DefaultDemandLead
	}
	if o.PickUp <= 0 {
		o.PickUp = DefaultDemandPickUp
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return &demands{
		book:  demand.NewBook(demand.Config{Lead: o.Lead, LooseLead: o.LooseLead, PickUp: o.PickUp}, demand.NewPlan()),
		clock: o.Clock, offers: map[string]string{}, tasks: map[string]string{},
		holds: map[string]map[string]bool{},
	}
}

// demandEvent is a transition of one of a framework's demands.
type demandEvent struct {
	id string
	demand.Transition
}

func (*demandEvent) isToFramework() {}

// restoreDemandsLocked puts back the demands a store kept.
func (m *Master) restoreDemandsLocked(ds []*demand.Demand) error {
	if err := m.dem.book.Restore(ds); err != nil {
		return err
	}
	for _, d := range ds {
		if !d.State.Final() {
			for _, id := range d.LiveTasks {
				m.dem.tasks[id] = d.ID
			}
		}
	}
	return nil
}

// SubmitDemands validates and submits demands (one document or a batch)
// for principal: each names a known framework and one of its roles (the
// first by default), which principal may submit_demand for. Nothing is
// stored when any is invalid. Errors wrap ErrInvalid (naming the demand
// and field), ErrNotFound (framework), ErrForbidden or ErrConflict (an
// ID in use).
func (m *Master) SubmitDemands(specs []*demand.Spec, authorize func(role string) error) ([]demand.Demand, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range specs {
		if s.Framework == "" {
			return nil, fmt.Errorf("%w: demand %s: FrameworkID: missing", ErrInvalid, s.Time.DemandID)
		}
		roles, ok := m.frameworkRolesLocked(s.Framework)
		if !ok {
			return nil, fmt.Errorf("demand %s: FrameworkID: %q: framework %w", s.Time.DemandID, s.Framework, ErrNotFound)
		}
		if s.Role == "" {
			s.Role = roles[0]
		} else if err := ValidateRole(s.Role); err != nil {
			return nil, fmt.Errorf("demand %s: Role: %w", s.Time.DemandID, err)
		} else if !slices.Contains(roles, s.Role) {
			return nil, fmt.Errorf("%w: demand %s: Role: %q is not a role of framework %s (%v)", ErrInvalid, s.Time.DemandID, s.Role, s.Framework, roles)
		}
		if authorize != nil {
			if err := authorize(s.Role); err != nil {
				return nil, err
			}
		}
	}
	m.dem.own = nil // rebuilt if a placement asks for DRF's load
	ds, changes, err := m.dem.book.Submit(m.dem.clock(), specs)
	if err != nil {
		return nil, demandError(err)
	}
	for _, d := range ds {
		m.persistDemandLocked(d)
	}
	m.applyDemandChangesLocked(changes)
	m.trigger()
	out := make([]demand.Demand, len(ds))
	for i, d := range ds {
		out[i] = snapshotDemand(d) // the live ones change under m.mu
	}
	return out, nil
}

// snapshotDemand copies d, its slices included, for use outside m.mu.
func snapshotDemand(d *demand.Demand) demand.Demand {
	c := *d
	c.History = slices.Clone(d.History)
	c.Placement = slices.Clone(d.Placement)
	return c
}

// drfLoadLocked is what DRF frameworks have on an agent now
// (unreserved non-revocable, in offers and tasks, less the demands' own):
// the plan asks (demand.Plan.SetLoadFunc) while placing a strict demand
// that starts within the hold lead, since DRF work running now may still
// run at its start. Called with m.mu held (placement happens under it).
func (m *Master) drfLoadLocked(agent string) resources.Resources {
	if m.dem.own == nil {
		m.dem.own = m.demandOwnLocked()
	}
	load := m.alloc.Allocated(agent)
	if u := m.dem.own[agent]; len(u) > 0 && load.Contains(u) {
		load = load.Subtract(u)
	}
	return load
}

// demandOwnLocked is what the demands' tasks and offers have per agent.
func (m *Master) demandOwnLocked() map[string]resources.Resources {
	own := map[string]resources.Resources{}
	for tid := range m.dem.tasks {
		if t := m.tasks[tid]; t != nil && !terminal(t.state) && !t.recovered {
			own[t.agent] = own[t.agent].Add(t.held().NonRevocable().Unreserved())
		}
	}
	for oid := range m.dem.offers {
		if o := m.offers[oid]; o != nil {
			own[o.agent] = own[o.agent].Add(o.res.NonRevocable().Unreserved())
		}
	}
	return own
}

func (m *Master) frameworkRolesLocked(id string) ([]string, bool) {
	if f := m.frameworks[id]; f != nil {
		return f.roles, true
	}
	if f, ok := m.knownFWs[id]; ok {
		return f.Roles, true
	}
	return nil, false
}

// demandError maps the demand package's sentinels onto the master's.
func demandError(err error) error {
	switch {
	case errors.Is(err, demand.ErrInvalid):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	case errors.Is(err, demand.ErrExist):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	case errors.Is(err, demand.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// CancelDemand fails demand id (cancelled): its capacity is released and
// its tasks killed. authorize, if not nil, is asked about the demand's
// role. Errors wrap ErrNotFound, ErrInvalid (already ended) or the
// authorizer's.
func (m *Master) CancelDemand(id string, authorize func(d *demand.Demand) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dem.book.Get(id)
	if err != nil {
		return demandError(err)
	}
	if authorize != nil {
		if err := authorize(d); err != nil {
			return err
		}
	}
	changes, err := m.dem.book.Cancel(id, "cancelled by request", m.dem.clock())
	if err != nil {
		return demandError(err)
	}
	m.applyDemandChangesLocked(changes)
	return nil
}

// Demands returns copies of every demand, in submission order.
func (m *Master) Demands() []demand.Demand {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []demand.Demand
	for _, d := range m.dem.book.List() {
		out = append(out, snapshotDemand(d))
	}
	return out
}

// Demand returns a copy of demand id. Errors wrap ErrNotFound.
func (m *Master) Demand(id string) (demand.Demand, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dem.book.Get(id)
	if err != nil {
		return demand.Demand{}, demandError(err)
	}
	return snapshotDemand(d), nil
}

func (m *Master) persistDemandLocked(d *demand.Demand) {
	if m.store == nil {
		return
	}
	if err := m.store.PutDemand(d); err != nil {
		m.log.Warn("persist demand", "demand", d.ID, "err", err)
	}
}

// applyDemandChangesLocked carries out transitions: stored, sent to the
// framework; a final one releases the demand's holds and offers, and one
// that ends it early kills its tasks.
func (m *Master) applyDemandChangesLocked(changes []demand.Change) {
	seen := map[*demand.Demand]bool{}
	for _, c := range changes {
		d := c.Demand
		m.log.Info("demand", "demand", d.ID, "from", c.From, "to", c.To, "reason", c.Reason, "message", c.Message)
		if f := m.frameworks[d.Framework]; f != nil {
			f.out.send(&demandEvent{id: d.ID, Transition: c.Transition})
		}
		if c.To.Final() {
			m.releaseDemandLocked(d)
		}
		if !seen[d] {
			seen[d] = true
			defer m.persistDemandLocked(d) // once, after all of its changes
		}
	}
}

// releaseHoldsLocked gives back what a demand holds.
func (m *Master) releaseHoldsLocked(d *demand.Demand) {
	for ag := range m.dem.holds[d.ID] {
		m.alloc.Release(ag, d.ID)
	}
	delete(m.dem.holds, d.ID)
}

// yieldLooseHoldsLocked releases the holds of loose demands on an agent
// (a strict start takes precedence; the loose ones hold again when
// capacity frees) and reports whether there were any.
func (m *Master) yieldLooseHoldsLocked(agent string) bool {
	any := false
	for id, ags := range m.dem.holds {
		d, err := m.dem.book.Get(id)
		if err != nil || d.Timing().StartStrict || !ags[agent] {
			continue
		}
		m.alloc.Release(agent, id)
		delete(ags, agent)
		any = true
	}
	return any
}

// releaseHoldsOutsideLocked gives back what a demand holds on agents its
// placement no longer names.
func (m *Master) releaseHoldsOutsideLocked(d *demand.Demand) {
	for ag := range m.dem.holds[d.ID] {
		if !slices.ContainsFunc(d.Placement, func(s demand.Slot) bool { return s.Agent == ag }) {
			m.alloc.Release(ag, d.ID)
			delete(m.dem.holds[d.ID], ag)
		}
	}
}

// releaseDemandLocked gives back what a demand holds, rescinds its
// offers and kills its live tasks.
func (m *Master) releaseDemandLocked(d *demand.Demand) {
	m.releaseHoldsLocked(d)
	for oid, id := range m.dem.offers {
		if id == d.ID {
			delete(m.dem.offers, oid)
			if o := m.offers[oid]; o != nil {
				m.rescindLocked(o, nil)
			}
		}
	}
	for tid, id := range m.dem.tasks {
		if id != d.ID {
			continue
		}
		if t := m.tasks[tid]; t != nil && !terminal(t.state) {
			if ag := m.agents[t.agent]; ag != nil {
				ag.out.send(&killTask{taskID: tid, framework: t.fw})
			}
		}
	}
	m.trigger()
}

// demandCycleLocked runs before every DRF cycle: demands step on the
// clock; those ALLOCATING or handed over but not whole hold what frees
// on their agents (so DRF never sees it); at or after their start every
// cycle is an allocation opportunity, and what is held is offered to the
// demand's framework, tagged with the demand's ID.
func (m *Master) demandCycleLocked() {
	now := m.dem.clock()
	m.dem.own = nil // rebuilt if a placement asks for DRF's load
	m.applyDemandChangesLocked(m.dem.book.Tick(now))
	for _, d := range m.dem.book.ByUrgency() {
		if _, known := m.frameworkRolesLocked(d.Framework); !known {
			// Its framework was removed (failover timeout, teardown):
			// nobody is left to take the capacity.
			changes, _ := m.dem.book.Cancel(d.ID, "framework "+d.Framework+" removed", now)
			m.applyDemandChangesLocked(changes)
			continue
		}
		if d.State != demand.Allocating && d.State != demand.Allocated && d.State != demand.Monitoring {
			continue
		}
		spec := d.Spec()
		if d.Handed >= spec.Tasks {
			m.releaseHoldsLocked(d) // what is left is less than a task
			continue
		}
		if m.dem.book.Postpone(d.ID, now) || m.dem.book.Replan(d.ID, now) {
			m.releaseHoldsOutsideLocked(d)
		}
		held := m.holdForDemandLocked(d)
		if now.Before(d.Start) {
			continue
		}
		f := m.frameworks[d.Framework]
		if f == nil || f.out == nil {
			continue // not there to take it: no opportunity
		}
		units := 0
		for _, u := range held {
			units += u
		}
		changes, _ := m.dem.book.Held(d.ID, d.Handed+units, now)
		m.applyDemandChangesLocked(changes)
		if d.State == demand.Allocated || d.State == demand.Monitoring {
			m.grantDemandLocked(d, f, held)
		} else if d.Relaxed {
			// Delay scheduling: its ^N opportunities passed; the plan
			// places it again, now, wherever it has room.
			if moved, _ := m.dem.book.Replace(d.ID, now); moved {
				m.releaseHoldsOutsideLocked(d)
			}
		}
	}
	// Loose demands moved or yielded above may have freed capacity a
	// strict start still lacks: it gets it before DRF does.
	for _, d := range m.dem.book.ByUrgency() {
		if !d.Timing().StartStrict {
			break
		}
		if d.State == demand.Allocating {
			m.holdForDemandLocked(d)
		}
	}
}

// holdForDemandLocked tops up d's holds on its agents (any agent once
// relaxed) and returns how many tasks' worth each agent holds.
func (m *Master) holdForDemandLocked(d *demand.Demand) map[string]int {
	spec := d.Spec()
	need := spec.Tasks - d.Handed
	out := map[string]int{}
	for _, s := range d.Placement {
		if need <= 0 {
			break
		}
		ag := m.agents[s.Agent]
		if ag == nil || !ag.inAllocator || ag.out == nil {
			// Held on an agent that cannot take tasks, the capacity
			// could not be handed over (its offer would be rescinded, or
			// its launch refused): it counts once the agent is back.
			continue
		}
		// What was handed over on this agent already counts against its
		// slot: holding the slot's Tasks again would take capacity the
		// plan booked there for other demands.
		want := min(s.Unhanded(), need)
		if want == 0 {
			continue
		}
		have := unitsIn(m.alloc.Held(s.Agent, d.ID), spec.Resources)
		if have < want {
			got, err := m.alloc.Hold(s.Agent, d.ID, shortfall(spec.Resources, want, m.alloc.Held(s.Agent, d.ID)))
			if err != nil {
				m.log.Warn("hold for demand", "demand", d.ID, "agent", s.Agent, "err", err)
			}
			if len(got) > 0 {
				if m.dem.holds[d.ID] == nil {
					m.dem.holds[d.ID] = map[string]bool{}
				}
				m.dem.holds[d.ID][s.Agent] = true
			}
			have = unitsIn(m.alloc.Held(s.Agent, d.ID), spec.Resources)
			if have < want && d.Timing().StartStrict && m.yieldLooseHoldsLocked(s.Agent) {
				_, _ = m.alloc.Hold(s.Agent, d.ID, shortfall(spec.Resources, want, m.alloc.Held(s.Agent, d.ID)))
				have = unitsIn(m.alloc.Held(s.Agent, d.ID), spec.Resources)
			}
		}
		if have = min(have, want); have > 0 {
			out[s.Agent] = have
			need -= have
		}
	}
	return out
}

// grantDemandLocked offers the held units to the demand's framework, at
// most what it still lacks.
func (m *Master) grantDemandLocked(d *demand.Demand, f *frameworkEntry, held map[string]int) {
	spec := d.Spec()
	made := &offersMade{}
	agents := make([]string, 0, len(held))
	for a := range held {
		agents = append(agents, a)
	}
	sort.Strings(agents)
	for _, a := range agents {
		o, err := m.alloc.Grant(a, d.ID, f.id, d.Role, scale(spec.Resources, held[a]))
		if err != nil {
			m.log.Warn("grant demand", "demand", d.ID, "agent", a, "err", err)
			continue
		}
		d.Hand(a, held[a])
		e := &offerEntry{id: uuid.NewString(), fw: f.id, agent: a, role: o.Role, res: o.Resources, created: time.Now(), demand: d.ID}
		m.addOfferLocked(e, f, m.agents[a])
		m.dem.offers[e.id] = d.ID
		made.offers = append(made.offers, e)
		made.hostnames = append(made.hostnames, m.agents[a].hostname)
	}
	if len(made.offers) > 0 {
		f.out.send(made)
	}
}

// demandOfferGoneLocked handles a demand offer that went unused
// (declined, rescinded, withdrawn with its agent). When its agent left
// and the demand is handed over whole (a gang, a strict start), that part
// of the hand-over cannot complete: the demand fails (hand-over failed),
// which kills its launched tasks and releases its bookings — before, a
// gang ran 1 of 2 tasks and stayed MONITORING with its booking for ever.
// Otherwise the offer goes back to the demand's hold.
func (m *Master) demandOfferGoneLocked(o *offerEntry) {
	id, ok := m.dem.offers[o.id]
	if !ok {
		return
	}
	d, err := m.dem.book.Get(id)
	if err == nil && !d.State.Final() && d.WholeHandOver() && !m.agentTakesTasksLocked(o.agent) {
		delete(m.dem.offers, o.id)
		msg := fmt.Sprintf("agent %s left before the tasks of its offer were launched; %d of %d tasks launched",
			o.agent, d.Launched, d.Spec().Tasks)
		changes, _ := m.dem.book.HandOverLost(id, msg, m.dem.clock())
		m.applyDemandChangesLocked(changes)
		return
	}
	m.demandOfferBackLocked(o)
}

// agentTakesTasksLocked reports whether an agent is connected and
// reachable: a launch sent to it can start.
func (m *Master) agentTakesTasksLocked(id string) bool {
	ag := m.agents[id]
	return ag != nil && ag.out != nil && !ag.unreachable
}

// demandOfferBackLocked returns a declined or rescinded demand offer to
// the demand's hold while the demand still wants it.
func (m *Master) demandOfferBackLocked(o *offerEntry) {
	id, ok := m.dem.offers[o.id]
	if !ok {
		return
	}
	delete(m.dem.offers, o.id)
	d, err := m.dem.book.Get(id)
	if err != nil || d.State.Final() {
		return
	}
	if got, err := m.alloc.Hold(o.agent, id, o.res); err == nil && len(got) > 0 {
		n := unitsIn(got, d.Spec().Resources)
		d.Handed = max(0, d.Handed-n)
		d.Hand(o.agent, -n)
		if m.dem.holds[id] == nil {
			m.dem.holds[id] = map[string]bool{}
		}
		m.dem.holds[id][o.agent] = true
	}
}

// demandLaunchedLocked links tasks launched on demand offers to their
// demand and reports the claim.
func (m *Master) demandLaunchedLocked(offerIDs []string, p acceptPlan) {
	id := ""
	for _, oid := range offerIDs {
		if d, ok := m.dem.offers[oid]; ok {
			id = d
			delete(m.dem.offers, oid)
		}
	}
	if id == "" {
		return
	}
	d, err := m.dem.book.Get(id)
	if err != nil || len(p.launches) == 0 {
		return
	}
	for _, l := range p.launches {
		m.dem.tasks[l.info.id] = id
		d.LiveTasks = append(d.LiveTasks, l.info.id)
	}
	d.Launched += len(p.launches)
	changes, _ := m.dem.book.Claim(id, m.dem.clock())
	if len(changes) == 0 {
		m.persistDemandLocked(d) // its live tasks changed
	}
	m.applyDemandChangesLocked(changes)
}

// demandTaskEndedLocked counts a demand's ended task; when the last one
// ends and every task was handed over, the demand ends.
func (m *Master) demandTaskEndedLocked(t *taskEntry, ok bool) {
	id, found := m.dem.tasks[t.info.id]
	if !found {
		return
	}
	d, err := m.dem.book.Get(id)
	if err != nil || d.Framework != t.fw {
		return // not its task: another framework's of that ID
	}
	delete(m.dem.tasks, t.info.id)
	d.LiveTasks = slices.DeleteFunc(d.LiveTasks, func(x string) bool { return x == t.info.id })
	if !ok {
		d.Failures++
	}
	done := len(d.LiveTasks) == 0 && d.Handed >= d.Spec().Tasks
	for _, did := range m.dem.offers {
		if did == id {
			done = false // an offer of it is still out
		}
	}
	if !done {
		m.persistDemandLocked(d)
		return
	}
	m.demandEndedLocked(d)
}

// demandEndedLocked ends demand d once every task launched on it ended:
// FINISHED when they all finished, FAILED when some did not, or when a
// gang ran fewer tasks than it has (a gang runs whole). The message
// counts what was launched: a gang that launched 1 of 2 tasks ended
// "all 2 tasks finished".
func (m *Master) demandEndedLocked(d *demand.Demand) {
	tasks, launched := d.Spec().Tasks, d.Launched
	if launched == 0 {
		launched = tasks // stored before launches were counted: as before
	}
	var msg string
	switch {
	case d.Failures > 0:
		msg = fmt.Sprintf("%d of %d tasks launched did not finish", d.Failures, launched)
	case launched >= tasks:
		msg = fmt.Sprintf("all %d tasks finished", tasks)
	default:
		msg = fmt.Sprintf("%d of %d tasks launched, all finished", launched, tasks)
	}
	if d.Spec().Gang && launched < tasks && d.Failures == 0 {
		msg = fmt.Sprintf("the gang ran %d of its %d tasks: %s", launched, tasks, msg)
		changes, _ := m.dem.book.HandOverLost(d.ID, msg, m.dem.clock())
		m.applyDemandChangesLocked(changes)
		return
	}
	changes, _ := m.dem.book.Ended(d.ID, d.Failures == 0, msg, m.dem.clock())
	m.applyDemandChangesLocked(changes)
}

// unitsIn is how many copies of per fit in r.
func unitsIn(r, per resources.Resources) int {
	n := -1
	for _, p := range per {
		if p.Type != resources.Scalar || p.Scalar <= 0 {
			continue
		}
		k := int(r.Scalar(p.Name) / p.Scalar)
		if n < 0 || k < n {
			n = k
		}
	}
	return max(n, 0)
}

// shortfall is what n copies of per need beyond held, per scalar (a
// partial hold of one scalar is not taken again).
func shortfall(per resources.Resources, n int, held resources.Resources) resources.Resources {
	out := make(resources.Resources, 0, len(per))
	for _, p := range per {
		p.Scalar = max(0, p.Scalar*resources.Value(n)-held.Scalar(p.Name))
		out = append(out, p)
	}
	return out
}

// scale is n copies of per.
func scale(per resources.Resources, n int) resources.Resources {
	out := make(resources.Resources, 0, len(per))
	for _, p := range per {
		p.Scalar *= resources.Value(n)
		out = append(out, p)
	}
	return out
}
