package demandplan

import (
	"fmt"
	"slices"
	"time"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/resources"
)

// Defaults of Options.
const (
	DefaultLead         = 30 * time.Second
	DefaultPickUp       = time.Minute
	DefaultReclaimAhead = 15 * time.Second
)

// Options configure a Planner.
type Options struct {
	// Lead: a demand starts ALLOCATING (its capacity is held from DRF)
	// this long before its planned start. Default DefaultLead.
	Lead time.Duration
	// LooseLead is Lead for loose starts (0: Lead).
	LooseLead time.Duration
	// PickUp: an ALLOCATED demand fails when its framework launches
	// nothing on it within this long. Default DefaultPickUp.
	PickUp time.Duration
	// Preempt: at a strict start whose booked capacity is still held by
	// others, reclaim it (ReclaimAhead before the start).
	Preempt bool
	// Lend: capacity held ahead of a start is offered as revocable
	// resources until ReclaimAhead before it.
	Lend bool
	// ReclaimAhead is how long before a start lent capacity is taken
	// back and tasks are preempted: at least the agents' kill grace, so
	// that what was killed has ended by the start. Default
	// DefaultReclaimAhead.
	ReclaimAhead time.Duration
	// Spread: a placement takes at most 1/Spread of an agent for one
	// demand where the plan has room that way (demand.Plan.SetSpread); 0:
	// best fit, whole agents.
	Spread int
	// NewID names the offers the planner makes; required.
	NewID func() string
}

// Cluster is what the planner needs to know of the cluster; the driver
// implements it (the master over its registry, the benchmark over its
// simulated agents). Its methods are called during the planner's calls.
type Cluster interface {
	// Ready reports whether tasks launched on the agent can start now:
	// it is connected, reachable and in the allocator.
	Ready(agent string) bool
	// Framework reports whether fw is known (registered, or kept by the
	// store: a framework not known was removed) and online (connected:
	// it can take offers now).
	Framework(fw string) (known, online bool)
	// Tasks returns the agent's live tasks whose resources the
	// allocator counts.
	Tasks(agent string) []Task
	// Offers returns the agent's outstanding offers.
	Offers(agent string) []Offer
}

// Task is a live task on an agent.
type Task struct {
	ID, Framework, Role string
	// Resources is what the allocator counts for it.
	Resources resources.Resources
	// Launched is when it was accepted (zero: unknown, e.g. adopted at
	// an agent's re-registration: the oldest).
	Launched time.Time
}

// Offer is an outstanding offer: one the driver made of DRF's
// allocation, or one the planner asks it to make (Effects.Offers),
// Demand then naming the demand whose capacity it hands over.
type Offer struct {
	ID, Framework, Agent, Role string
	Resources                  resources.Resources
	Demand                     string
}

// Kill asks the driver to kill a task.
type Kill struct {
	Task, Framework, Agent string
	// Preempted: killed to reclaim capacity for a demand (the task's
	// framework is told CONTAINER_PREEMPTED with Message); otherwise the
	// task's demand ended.
	Preempted bool
	Message   string
}

// Effects is what a call of the planner asks its driver to carry out, in
// this order: Changes (store each demand, send each transition to its
// framework), Store (demands changed without a transition), Rescind
// (withdraw these offers and give their resources back to the
// allocator), Offers (make them), Kill. Errs are what went wrong on the
// way, for the driver to log.
type Effects struct {
	Changes []demand.Change
	Store   []*demand.Demand
	Rescind []string
	Offers  []Offer
	Kill    []Kill
	Errs    []error
}

func (e *Effects) add(o Effects) {
	e.Changes = append(e.Changes, o.Changes...)
	e.Store = append(e.Store, o.Store...)
	e.Rescind = append(e.Rescind, o.Rescind...)
	e.Offers = append(e.Offers, o.Offers...)
	e.Kill = append(e.Kill, o.Kill...)
	e.Errs = append(e.Errs, o.Errs...)
}

// Empty reports whether there is nothing to carry out.
func (e *Effects) Empty() bool {
	return len(e.Changes)+len(e.Store)+len(e.Rescind)+len(e.Offers)+len(e.Kill) == 0
}

// drainHold is the hold that keeps capacity revocable tasks still use
// from DRF while they are being reclaimed (an agent's overdraft).
const drainHold = "\x00drain"

// Planner carries out demands on the allocator. Create it with New. Not
// safe for concurrent use.
type Planner struct {
	opts  Options
	book  *demand.Book
	alloc *allocator.Allocator
	cl    Cluster
	// offers are the planner's outstanding offers by ID.
	offers map[string]Offer
	// tasks are the demands' live tasks by ID.
	tasks map[string]taskRef
	// holds are the agents holding for each demand, holdsOn the demands
	// holding on each agent.
	holds, holdsOn map[string]map[string]bool
	// lent is what each agent lends now (allocator.Lend), and lentBy
	// the demands whose holds it lends there.
	lent   map[string]resources.Resources
	lentBy map[string][]string
	// victims are the tasks killed (and DRF offers rescinded) to reclaim
	// capacity, not ended yet: ID → what it frees and for whom.
	victims map[string]victim
	// drained are the agents with a drain hold.
	drained map[string]bool
	// reclaimFor are the agents whose lent capacity shrank and may be
	// overdrawn: agent → the demand that took it back ("-": none named).
	reclaimFor map[string]string
	// own caches demandsOwn within one call of the planner (DRFLoad).
	own map[string]resources.Resources
	// keep are the demands whose holds are to be handed over this cycle
	// (handsOver): not lent.
	keep map[string]bool
	// kept is keep as lend last saw it.
	kept map[string]bool
	// dirty are the agents whose lending lend recomputes: a hold there
	// changed, or a demand holding there began or stopped handing over.
	dirty map[string]bool
	// scan is where rebind's next scan of agents starts, and rebound
	// when it last looked at each loose demand.
	scan    int
	rebound map[string]time.Time
	// byAge caches youngest within one Cycle (nil outside one).
	byAge map[string][]Task
	// buf is scratch space for what a hold keeps (AppendHeld).
	buf resources.Resources
}

// taskRef is a demand's live task: its demand and agent.
type taskRef struct{ demand, agent string }

// victim is a task killed or an offer withdrawn to reclaim capacity.
type victim struct {
	agent, demand string
	res           resources.Resources
	revocable     bool
}

// New returns a planner over alloc, with an empty book; cl answers its
// questions about the cluster.
func New(opts Options, alloc *allocator.Allocator, cl Cluster) *Planner {
	if opts.Lead <= 0 {
		opts.Lead = DefaultLead
	}
	if opts.PickUp <= 0 {
		opts.PickUp = DefaultPickUp
	}
	if opts.ReclaimAhead <= 0 {
		opts.ReclaimAhead = DefaultReclaimAhead
	}
	p := &Planner{
		opts: opts, alloc: alloc, cl: cl,
		book:   demand.NewBook(demand.Config{Lead: opts.Lead, LooseLead: opts.LooseLead, PickUp: opts.PickUp}, demand.NewPlan()),
		offers: map[string]Offer{}, tasks: map[string]taskRef{}, holds: map[string]map[string]bool{}, holdsOn: map[string]map[string]bool{},
		lent: map[string]resources.Resources{}, lentBy: map[string][]string{},
		victims: map[string]victim{}, drained: map[string]bool{}, reclaimFor: map[string]string{}, keep: map[string]bool{},
		kept: map[string]bool{}, dirty: map[string]bool{}, rebound: map[string]time.Time{},
	}
	p.book.Plan().SetLoadFunc(p.DRFLoad)
	p.book.Plan().SetHeldFunc(alloc.HeldOn)
	p.book.Plan().SetFreeNowFunc(p.freeNow)
	p.book.Plan().SetFreeOnFunc(p.freeOn)
	p.book.Plan().SetSpread(opts.Spread)
	if opts.Preempt {
		p.book.Plan().SetFixedLoadFunc(p.fixedLoad)
	}
	return p
}

// Options returns the planner's options, defaults filled in.
func (p *Planner) Options() Options { return p.opts }

// Get returns demand id. Errors wrap demand.ErrNotFound.
func (p *Planner) Get(id string) (*demand.Demand, error) { return p.book.Get(id) }

// List returns every demand in submission order.
func (p *Planner) List() []*demand.Demand { return p.book.List() }

// Restore puts back the demands a store kept and links their live tasks.
// Holds are taken again from the next cycle on.
func (p *Planner) Restore(ds []*demand.Demand) error {
	if err := p.book.Restore(ds); err != nil {
		return err
	}
	for _, d := range ds {
		if !d.State.Final() {
			for _, id := range d.LiveTasks {
				p.tasks[id] = taskRef{demand: d.ID} // its agent: unknown until it ends
			}
		}
	}
	return nil
}

// SetAgent gives the plan an agent's capacity (its unreserved
// non-revocable scalars; nil: none, while it is disconnected).
func (p *Planner) SetAgent(id string, total resources.Resources) {
	p.book.Plan().SetAgent(id, total)
}

// AgentGone takes an agent's capacity out of the plan (it left) and
// places again, at now, the demands booked there that were not handed
// over (demand.Book.AgentGone); those that moved give back what they
// held on agents they no longer name.
func (p *Planner) AgentGone(agent string, now time.Time) {
	p.own = nil
	for _, id := range p.book.AgentGone(agent, now) {
		if d, err := p.book.Get(id); err == nil {
			p.releaseOutside(d)
		}
	}
}

// Lent is what the demands' holds lend on an agent now as revocable
// resources (nil: nothing).
func (p *Planner) Lent(agent string) resources.Resources { return p.lent[agent] }

// IsDemandOffer reports whether offer id hands over a demand's capacity.
func (p *Planner) IsDemandOffer(id string) bool { _, ok := p.offers[id]; return ok }

// Submit validates and admits demands (one document or a batch, all or
// nothing: demand.Book.Submit) at now. Errors wrap the demand package's
// sentinels.
func (p *Planner) Submit(now time.Time, specs []*demand.Spec) ([]*demand.Demand, Effects, error) {
	p.own = nil
	ds, changes, err := p.book.Submit(now, specs)
	if err != nil {
		return nil, Effects{}, err
	}
	return ds, p.carry(changes, now), nil
}

// Update replaces a demand's document (demand.Book.Update) at now; what
// it held goes back (it holds again from its new lead). Errors wrap the
// demand package's sentinels.
func (p *Planner) Update(now time.Time, s *demand.Spec) (*demand.Demand, Effects, error) {
	p.own = nil
	d, changes, err := p.book.Update(now, s)
	if err != nil {
		return nil, Effects{}, err
	}
	if len(changes) > 0 {
		p.releaseHolds(d)
	}
	return d, p.carry(changes, now), nil
}

// Forget drops demand id (demand.Book.Forget) with what it holds, its
// offers and its live tasks (the effects): a submission the master's
// registry could not record. Errors wrap demand.ErrNotFound.
func (p *Planner) Forget(id string) (Effects, error) {
	d, err := p.book.Get(id)
	if err != nil {
		return Effects{}, err
	}
	p.own = nil
	eff := p.releaseDemand(d)
	for _, tid := range eff.Kill {
		delete(p.tasks, tid.Task)
	}
	return eff, p.book.Forget(id)
}

// Cancel fails demand id (cancelled, msg): its holds go back, its offers
// are withdrawn and its tasks killed. Errors wrap demand.ErrNotFound, or
// demand.ErrInvalid when it already ended.
func (p *Planner) Cancel(id, msg string, now time.Time) (Effects, error) {
	changes, err := p.book.Cancel(id, msg, now)
	if err != nil {
		return Effects{}, err
	}
	return p.carry(changes, now), nil
}

// carry returns the effects of transitions: each is stored and reported;
// a final one releases the demand's holds, withdraws its offers and kills
// its live tasks.
func (p *Planner) carry(changes []demand.Change, now time.Time) Effects {
	eff := Effects{Changes: changes}
	for _, c := range changes {
		if c.To.Final() {
			eff.add(p.releaseDemand(c.Demand))
		}
	}
	return eff
}

// releaseDemand gives back what a demand holds, and asks for its offers
// to be withdrawn and its tasks killed (the driver skips those that
// ended; Agent is empty for a task restored from the store).
func (p *Planner) releaseDemand(d *demand.Demand) Effects {
	p.releaseHolds(d)
	delete(p.rebound, d.ID)
	var eff Effects
	for _, id := range sortedKeys(p.offers) {
		if p.offers[id].Demand == d.ID {
			delete(p.offers, id)
			eff.Rescind = append(eff.Rescind, id)
		}
	}
	for _, tid := range sortedKeys(p.tasks) {
		if t := p.tasks[tid]; t.demand == d.ID {
			eff.Kill = append(eff.Kill, Kill{Task: tid, Framework: d.Framework, Agent: t.agent, Message: fmt.Sprintf("demand %s ended: %s", d.ID, d.Reason)})
		}
	}
	return eff
}

// releaseHolds gives back everything d holds.
func (p *Planner) releaseHolds(d *demand.Demand) {
	for ag := range p.holds[d.ID] {
		p.alloc.Release(ag, d.ID)
		p.unmarkHeld(d.ID, ag)
	}
}

// releaseOutside gives back what d holds on agents its placement no
// longer names.
func (p *Planner) releaseOutside(d *demand.Demand) {
	for ag := range p.holds[d.ID] {
		if !slices.ContainsFunc(d.Placement, func(s demand.Slot) bool { return s.Agent == ag }) {
			p.alloc.Release(ag, d.ID)
			p.unmarkHeld(d.ID, ag)
		}
	}
}

// DRFLoad is what DRF frameworks have on an agent now (unreserved
// non-revocable, in offers and tasks, less the demands' own): the plan
// asks (demand.Plan.SetLoadFunc) while placing a start within the hold
// lead, or now, since DRF work running now may still run then.
func (p *Planner) DRFLoad(agent string) resources.Resources {
	if p.own == nil {
		p.own = p.demandsOwn()
	}
	load := p.alloc.Allocated(agent)
	if own := p.own[agent]; len(own) > 0 && load.Contains(own) {
		load = load.Subtract(own)
	}
	return load
}

// freeNow is where demand id has room for a copy of per now: agents with
// that much free, and its own holds' agents, where what it holds counts
// (demand.Plan.SetFreeNowFunc).
func (p *Planner) freeNow(id string, per resources.Resources) map[string]resources.Resources {
	out, err := p.alloc.FreeAgents(per)
	if err != nil {
		return map[string]resources.Resources{}
	}
	for ag := range p.holds[id] {
		if f := p.alloc.Free(ag).Add(p.alloc.Held(ag, id)); f.Contains(per) {
			out[ag] = f
		}
	}
	return out
}

// freeOn is what is free for demand id on agent now: unallocated, or
// held by id itself (demand.Plan.SetFreeOnFunc).
func (p *Planner) freeOn(id, agent string) resources.Resources {
	return p.alloc.Free(agent).Add(p.alloc.Held(agent, id))
}

// demandsOwn is what the demands' tasks and offers have per agent: a
// task holds its demand's per-task resources (a task restored from the
// store, whose agent the planner has not learned, counts as DRF's).
func (p *Planner) demandsOwn() map[string]resources.Resources {
	own := map[string]resources.Resources{}
	for _, t := range p.tasks {
		if t.agent == "" {
			continue
		}
		if d, err := p.book.Get(t.demand); err == nil {
			own[t.agent] = own[t.agent].Add(d.Spec().Resources)
		}
	}
	for _, o := range p.offers {
		own[o.Agent] = own[o.Agent].Add(o.Resources.NonRevocable().Unreserved())
	}
	return own
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
