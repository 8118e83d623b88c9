package master

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master/demandplan"
	"github.com/brimnode/brim/resources"
	"github.com/google/uuid"
)

// Defaults of DemandOptions.
const (
	DefaultDemandLead         = demandplan.DefaultLead
	DefaultDemandPickUp       = demandplan.DefaultPickUp
	DefaultDemandReclaimAhead = demandplan.DefaultReclaimAhead
	// DefaultDemandSpread is brim master's --demand-spread: a quarter of
	// an agent per demand where the plan has room (docs/demands.md: a
	// slot that must be freed for a start in a heavy-tailed cluster).
	DefaultDemandSpread = 4
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
	// NoPreempt: a strict start whose booked capacity others still hold
	// fails rather than reclaiming it (demandplan.Options.Preempt).
	NoPreempt bool
	// NoLend: capacity held ahead of a start idles rather than being
	// lent as revocable until then (demandplan.Options.Lend).
	NoLend bool
	// ReclaimAhead: lent capacity is taken back, and tasks preempted,
	// this long before a start; at least the agents' kill grace.
	ReclaimAhead time.Duration
	// Spread: a demand takes at most 1/Spread of an agent where the plan
	// has room that way (0: best fit, whole agents).
	Spread int
	// Clock tells the demands the time; nil: the system clock.
	Clock func() time.Time
}

// demands is the master's part for demands: the planner (book, plan and
// the glue with the allocator, shared with the benchmark) and its clock.
// Guarded by Master.mu.
type demands struct {
	*demandplan.Planner
	clock func() time.Time
}

func newDemands(m *Master, o DemandOptions) *demands {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return &demands{clock: o.Clock, Planner: demandplan.New(demandplan.Options{
		Lead: o.Lead, LooseLead: o.LooseLead, PickUp: o.PickUp,
		Preempt: !o.NoPreempt, Lend: !o.NoLend, ReclaimAhead: o.ReclaimAhead, Spread: o.Spread,
		NewID: uuid.NewString,
	}, m.alloc, demandCluster{m})}
}

// DemandEvent is a transition of one of a framework's demands.
type DemandEvent struct {
	ID string
	demand.Transition
}

func (*DemandEvent) isToFramework() {}

// demandCluster answers the planner's questions from the registry
// (called under Master.mu, during the planner's calls).
type demandCluster struct{ m *Master }

var _ demandplan.Cluster = demandCluster{}

func (c demandCluster) Ready(agent string) bool {
	ag := c.m.agents[agent]
	return ag != nil && ag.inAllocator && ag.out != nil && !ag.unreachable
}

func (c demandCluster) Framework(fw string) (known, online bool) {
	if f := c.m.frameworks[fw]; f != nil {
		return true, f.out != nil
	}
	_, known = c.m.knownFWs[fw]
	return known, false
}

func (c demandCluster) Tasks(agent string) []demandplan.Task {
	ag := c.m.agents[agent]
	if ag == nil {
		return nil
	}
	out := make([]demandplan.Task, 0, len(ag.tasks))
	for _, t := range ag.tasks {
		if !terminal(t.state) && !t.recovered {
			out = append(out, demandplan.Task{ID: t.info.ID, Framework: t.fw, Role: t.role, Resources: t.held(), Launched: t.launched})
		}
	}
	return out
}

func (c demandCluster) Offers(agent string) []demandplan.Offer {
	ag := c.m.agents[agent]
	if ag == nil {
		return nil
	}
	out := make([]demandplan.Offer, 0, len(ag.offers))
	for _, o := range ag.offers {
		out = append(out, demandplan.Offer{ID: o.id, Framework: o.fw, Agent: o.agent, Role: o.role, Resources: o.res, Demand: o.demand})
	}
	return out
}

// restoreDemandsLocked puts back the demands a store kept.
func (m *Master) restoreDemandsLocked(ds []*demand.Demand) error {
	return m.dem.Restore(ds)
}

// SubmitDemands validates and submits demands (one document or a batch)
// for principal: each names a known framework and one of its roles (the
// first by default), which principal may submit_demand for. Nothing is
// stored when any is invalid. A document submitted again as it stands
// returns the stored demand. It answers once the registry recorded the
// new demands (without the master's lock): those it could not record
// are forgotten, as if never submitted, and the error wraps
// ErrUnavailable (the client submits them again). Other errors wrap
// ErrInvalid (naming the demand and field), ErrNotFound (framework),
// ErrForbidden or ErrConflict (an ID in use by another document).
func (m *Master) SubmitDemands(specs []*demand.Spec, authorize func(role string) error) ([]demand.Demand, error) {
	out, recorded, err := m.submitDemands(specs, authorize)
	if err != nil {
		return nil, err
	}
	// Accepted only once recorded: a demand answered 200 that the next
	// leader does not know would be lost without a word (an etcd
	// without quorum times the write out after the answer went).
	var failed []string
	var cause error
	for _, d := range out {
		if ch := recorded[d.ID]; ch != nil {
			if err := <-ch; err != nil {
				failed, cause = append(failed, d.ID), err
			}
		}
	}
	if len(failed) == 0 {
		return out, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(recorded)) {
		d, err := m.dem.Get(id)
		if err != nil {
			continue
		}
		from, fw := d.State, d.Framework
		eff, err := m.dem.Forget(id)
		if err != nil {
			continue
		}
		m.applyDemandEffectsLocked(eff)
		// Its framework heard it admitted: now its end.
		if f := m.frameworks[fw]; f != nil {
			f.out.send(&DemandEvent{ID: id, Transition: demand.Transition{At: m.dem.clock(), From: from, To: demand.Failed,
				Reason: demand.ReasonCancelled, Message: "the registry could not record its submission: submit it again"}})
		}
	}
	return nil, fmt.Errorf("demands %s: the registry could not record them, nothing was submitted; submit again: %w: %w",
		strings.Join(failed, ", "), ErrUnavailable, cause)
}

// submitDemands admits specs under the master's lock and returns the
// demands and, for each new one, the outcome of its record's write.
func (m *Master) submitDemands(specs []*demand.Spec, authorize func(role string) error) ([]demand.Demand, map[string]<-chan error, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range specs {
		if err := m.checkDemandSpecLocked(s, authorize); err != nil {
			return nil, nil, err
		}
	}
	ds, eff, err := m.dem.Submit(m.dem.clock(), specs)
	if err != nil {
		return nil, nil, demandError(err)
	}
	written := m.applyDemandEffectsLocked(eff)
	recorded := map[string]<-chan error{}
	for _, c := range eff.Changes {
		if c.From == demand.New && written[c.Demand.ID] != nil {
			recorded[c.Demand.ID] = written[c.Demand.ID] // admitted now: new
		}
	}
	m.trigger()
	out := make([]demand.Demand, len(ds))
	for i, d := range ds {
		out[i] = snapshotDemand(d) // the live ones change under m.mu
	}
	return out, recorded, nil
}

// UpdateDemand replaces the document of demand id (PUT /demands/ID): the
// spec's DemandID must be id (or empty), its framework the demand's (or
// empty), and principal may submit_demand for the demand's role and the
// new one. The demand is planned again by the rules of a submission
// (docs/demands.md); the same document again changes nothing. Errors wrap
// ErrNotFound (demand, framework), ErrInvalid, ErrForbidden or
// ErrConflict (handed over already, or a strict start the plan cannot
// hold in its new window: the demand stays as it was).
func (m *Master) UpdateDemand(id string, s *demand.Spec, authorize func(role string) error) (demand.Demand, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dem.Get(id)
	if err != nil {
		return demand.Demand{}, demandError(err)
	}
	if s.Time.DemandID != id {
		return demand.Demand{}, fmt.Errorf("%w: DemandID: %q: the path names demand %s", ErrInvalid, s.Time.DemandID, id)
	}
	if s.Framework == "" {
		s.Framework = d.Framework
	}
	if s.Framework != d.Framework {
		return demand.Demand{}, fmt.Errorf("%w: demand %s: FrameworkID: %q: the demand belongs to framework %s", ErrInvalid, id, s.Framework, d.Framework)
	}
	if s.Role == "" {
		s.Role = d.Role
	}
	if authorize != nil && s.Role != d.Role {
		if err := authorize(d.Role); err != nil {
			return demand.Demand{}, err
		}
	}
	if err := m.checkDemandSpecLocked(s, authorize); err != nil {
		return demand.Demand{}, err
	}
	d, eff, err := m.dem.Update(m.dem.clock(), s)
	if err != nil {
		return demand.Demand{}, demandError(err)
	}
	m.applyDemandEffectsLocked(eff)
	m.trigger()
	return snapshotDemand(d), nil
}

// checkDemandSpecLocked checks that a spec names a known framework and
// one of its roles (its first by default, filled in) that authorize lets
// the caller submit demands for.
func (m *Master) checkDemandSpecLocked(s *demand.Spec, authorize func(role string) error) error {
	if s.Framework == "" {
		return fmt.Errorf("%w: demand %s: FrameworkID: missing", ErrInvalid, s.Time.DemandID)
	}
	roles, ok := m.frameworkRolesLocked(s.Framework)
	if !ok {
		return fmt.Errorf("demand %s: FrameworkID: %q: framework %w", s.Time.DemandID, s.Framework, ErrNotFound)
	}
	if s.Role == "" {
		s.Role = roles[0]
	} else if err := ValidateRole(s.Role); err != nil {
		return fmt.Errorf("demand %s: Role: %w", s.Time.DemandID, err)
	} else if !slices.Contains(roles, s.Role) {
		return fmt.Errorf("%w: demand %s: Role: %q is not a role of framework %s (%v)", ErrInvalid, s.Time.DemandID, s.Role, s.Framework, roles)
	}
	if authorize != nil {
		return authorize(s.Role)
	}
	return nil
}

// snapshotDemand copies d, its slices included, for use outside m.mu.
func snapshotDemand(d *demand.Demand) demand.Demand {
	c := *d
	c.History = slices.Clone(d.History)
	c.Placement = slices.Clone(d.Placement)
	c.LiveTasks = slices.Clone(d.LiveTasks)
	return c
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
	case errors.Is(err, demand.ErrExist), errors.Is(err, demand.ErrHandedOver), errors.Is(err, demand.ErrNoFit):
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
	d, err := m.dem.Get(id)
	if err != nil {
		return demandError(err)
	}
	if authorize != nil {
		if err := authorize(d); err != nil {
			return err
		}
	}
	eff, err := m.dem.Cancel(id, "cancelled by request", m.dem.clock())
	if err != nil {
		return demandError(err)
	}
	m.applyDemandEffectsLocked(eff)
	return nil
}

// Demands returns copies of every demand, in submission order.
func (m *Master) Demands() []demand.Demand {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []demand.Demand
	for _, d := range m.dem.List() {
		out = append(out, snapshotDemand(d))
	}
	return out
}

// Demand returns a copy of demand id. Errors wrap ErrNotFound.
func (m *Master) Demand(id string) (demand.Demand, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dem.Get(id)
	if err != nil {
		return demand.Demand{}, demandError(err)
	}
	return snapshotDemand(d), nil
}

// persistDemandLocked queues d's record and returns the write's outcome
// (nil without a store); a failure is logged.
func (m *Master) persistDemandLocked(d *demand.Demand) <-chan error {
	if m.store == nil {
		return nil
	}
	// Written behind the change (writes.go): a copy, as the demand
	// changes under m.mu meanwhile.
	c := snapshotDemand(d)
	out := make(chan error, 1)
	m.writes.enqueue(write{what: "persist demand", args: []any{"demand", d.ID}, put: func(s Store) error { return s.PutDemand(&c) },
		done: func(err error) {
			if err != nil {
				m.log.Warn("persist demand", "demand", c.ID, "err", err)
			}
			out <- err
		}})
	return out
}

// applyDemandEffectsLocked carries out what the planner asked: each
// changed demand stored once, each transition sent to its framework,
// offers withdrawn, demand offers made, tasks killed. It returns the
// outcome of each demand's record write, by demand ID.
func (m *Master) applyDemandEffectsLocked(eff demandplan.Effects) map[string]<-chan error {
	for _, err := range eff.Errs {
		m.log.Warn("demands", "err", err)
	}
	stored := map[string]<-chan error{}
	store := func(d *demand.Demand) {
		if _, ok := stored[d.ID]; !ok {
			stored[d.ID] = m.persistDemandLocked(d)
		}
	}
	for _, c := range eff.Changes {
		d := c.Demand
		m.log.Info("demand", "demand", d.ID, "from", c.From, "to", c.To, "reason", c.Reason, "message", c.Message)
		if f := m.frameworks[d.Framework]; f != nil {
			f.out.send(&DemandEvent{ID: d.ID, Transition: c.Transition})
		}
	}
	// Stored after all of their changes: the record holds the last state.
	for _, c := range eff.Changes {
		store(c.Demand)
	}
	for _, d := range eff.Store {
		store(d)
	}
	for _, id := range eff.Rescind {
		if o := m.offers[id]; o != nil {
			m.rescindLocked(o, nil)
		}
	}
	m.makeDemandOffersLocked(eff.Offers)
	for _, k := range eff.Kill {
		m.killForDemandsLocked(k)
	}
	if len(eff.Rescind)+len(eff.Kill) > 0 {
		m.trigger()
	}
	return stored
}

// makeDemandOffersLocked makes the offers that hand demands' capacity
// over to their frameworks.
func (m *Master) makeDemandOffersLocked(offers []demandplan.Offer) {
	made := map[string]*OffersMade{}
	var order []string
	for _, o := range offers {
		f, ag := m.frameworks[o.Framework], m.agents[o.Agent]
		if f == nil || ag == nil {
			continue // the planner checked both this cycle
		}
		e := &offerEntry{id: o.ID, fw: f.id, agent: o.Agent, role: o.Role, res: o.Resources, created: time.Now(), demand: o.Demand}
		m.addOfferLocked(e, f, ag)
		if made[f.id] == nil {
			made[f.id] = &OffersMade{}
			order = append(order, f.id)
		}
		made[f.id].offers = append(made[f.id].offers, e)
		made[f.id].hostnames = append(made[f.id].hostnames, ag.hostname)
	}
	for _, id := range order {
		if f := m.frameworks[id]; f != nil && f.out != nil {
			f.out.send(made[id])
		}
	}
}

// lentLaunchLocked reports whether a task's revocable resources are
// capacity a demand's hold lends on its agent (RunTask.lent: the agent
// admits it against its own free resources) rather than the agent's
// oversubscription estimate: it has revocable resources, the planner
// lends there, and the estimate does not cover them.
func (m *Master) lentLaunchLocked(ag *agentEntry, res resources.Resources) bool {
	rev := res.Revocable()
	if rev.IsEmpty() || m.dem.Lent(ag.id).IsEmpty() {
		return false
	}
	for _, r := range rev {
		if r.Type == resources.Scalar && ag.revocable.Scalar(r.Name) < r.Scalar {
			return true
		}
	}
	return false
}

// killForDemandsLocked kills a task the planner asked for: one of an
// ended demand, or one preempted for another's capacity (marked, so that
// its framework is told CONTAINER_PREEMPTED whatever the agent reports).
func (m *Master) killForDemandsLocked(k demandplan.Kill) {
	t := m.tasks[k.Task]
	if t == nil || t.fw != k.Framework || terminal(t.state) {
		return
	}
	ag := m.agents[t.agent]
	if ag == nil || ag.out == nil {
		return
	}
	if k.Preempted {
		t.preempted = k.Message
		m.log.Info("task preempted", "task", t.info.ID, "framework", t.fw, "agent", t.agent, "message", k.Message)
	}
	ag.out.send(&KillTask{TaskID: t.info.ID, FrameworkID: t.fw, Preempted: k.Preempted, Message: k.Message})
}

// demandCycleLocked runs before every DRF cycle: the planner's cycle,
// its effects, then its top-up (what they freed goes to strict starts
// before DRF; lending and reclaiming).
func (m *Master) demandCycleLocked() {
	now := m.dem.clock()
	m.applyDemandEffectsLocked(m.dem.Cycle(now))
	m.applyDemandEffectsLocked(m.dem.TopUp(now))
}

// demandOfferGoneLocked tells the planner an offer went unused
// (declined, rescinded, withdrawn with its agent).
func (m *Master) demandOfferGoneLocked(o *offerEntry) {
	if !m.dem.IsDemandOffer(o.id) {
		return
	}
	m.applyDemandEffectsLocked(m.dem.OfferGone(o.id, demandCluster{m}.Ready(o.agent), m.dem.clock()))
}

// demandLaunchedLocked links tasks launched on demand offers to their
// demand.
func (m *Master) demandLaunchedLocked(offerIDs []string, p acceptPlan) {
	ids := make([]string, 0, len(p.launches))
	for _, l := range p.launches {
		ids = append(ids, l.info.ID)
	}
	m.applyDemandEffectsLocked(m.dem.Launched(offerIDs, ids, m.dem.clock()))
}

// demandTaskEndedLocked tells the planner a task ended.
func (m *Master) demandTaskEndedLocked(t *taskEntry, ok bool) {
	m.applyDemandEffectsLocked(m.dem.TaskEnded(t.info.ID, t.fw, ok, m.dem.clock()))
}
