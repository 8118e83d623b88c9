package master

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/resources"
	"github.com/google/uuid"
)

// Defaults of Options (Mesos's figures where Mesos has one).
const (
	DefaultAllocationInterval  = time.Second
	DefaultHeartbeatInterval   = 15 * time.Second
	DefaultMaxMissedHeartbeats = 5
	DefaultFailoverTimeout     = time.Minute
	// DefaultRole is the role of a framework that names none ("*" is
	// reserved for unreserved resources).
	DefaultRole = "default"
)

// Options configure a Master. The zero value is valid.
type Options struct {
	// Allocator configures the DRF allocator.
	Allocator allocator.Options
	// AllocationInterval is the period of the allocation cycle; events
	// (new agent, framework, recovered resources) also start one.
	AllocationInterval time.Duration
	// HeartbeatInterval is how often agents send heartbeats;
	// MaxMissedHeartbeats missed in a row make an agent unreachable.
	HeartbeatInterval   time.Duration
	MaxMissedHeartbeats int
	// OfferTimeout rescinds offers not used in time; 0 never does.
	OfferTimeout time.Duration
	// FailoverTimeout is how long a disconnected framework keeps its tasks
	// when it asked for none itself.
	FailoverTimeout time.Duration
	// ReregistrationTimeout is how long a master that starts (or is
	// elected) with a registry waits for the agents of the previous run
	// before tasks it does not know are LOST to reconciliation (Mesos's
	// agent_reregister_timeout); 0: HeartbeatInterval ×
	// MaxMissedHeartbeats.
	ReregistrationTimeout time.Duration
	// RegisterTimeout is how long an agent stream, once admitted, holds
	// its registration slot before its registration (Register and task
	// pages) arrived (admit.go); 0: DefaultRegisterTimeout.
	RegisterTimeout time.Duration
	// RegistrationSlots bounds the agents' registrations received and
	// processed at once (admit.go); 0: 8 per CPU (GOMAXPROCS).
	RegistrationSlots int
	// Store persists what must survive a restart; nil keeps nothing.
	Store Store
	// MaxCompletedTasks and MaxCompletedFrameworks bound the history of
	// tasks and frameworks that left the master (State's completedTasks,
	// completedFrameworks); 0: the defaults, negative: none kept.
	MaxCompletedTasks      int
	MaxCompletedFrameworks int
	// Demands configures time-aware demands (docs/demands.md).
	Demands DemandOptions
	// Tenure, when set, is the leadership a highly available master
	// acts under (its term): once Held reports false the master
	// declares nothing on its own — no agent unreachable, no task LOST,
	// no framework gone — and refuses frameworks' calls (ErrNotLeader)
	// until its term ends (health.go). Nil: one master, always held.
	Tenure Tenure
	// Log receives the master's logs; nil discards them.
	Log *slog.Logger
}

// Store persists the master's durable state: master/boltstore's Store,
// master/etcdstore's Term (fenced by its leadership). Its records are
// encoded once, for both, by master/record. The master never calls it
// under its lock (writes.go); calls come from one goroutine at a time but
// for PutAgent, which registrations call concurrently.
type Store interface {
	Load() (*Persisted, error)
	PutAgent(id string, a PersistedAgent) error
	PutFramework(id string, f PersistedFramework) error
	DeleteFramework(id string) error
	PutReservations(agentID string, res resources.Resources) error
	PutQuota(role string, q allocator.Quota) error
	// PutWeights records roles' weights in one write: all or none.
	PutWeights(weights map[string]float64) error
	// PutDemand records a demand: its spec, state, history and plan.
	PutDemand(d *demand.Demand) error
}

// Persisted is what a Store holds.
type Persisted struct {
	Agents       map[string]PersistedAgent
	Frameworks   map[string]PersistedFramework
	Reservations map[string]resources.Resources
	Quota        map[string]allocator.Quota
	Weights      map[string]float64
	Demands      []*demand.Demand
}

// PersistedFramework is a framework as a Store keeps it: its roles and
// the principal that subscribed it ("" without framework authentication),
// which alone may re-subscribe it after a master restart.
type PersistedFramework struct {
	Roles     []string `json:"roles"`
	Principal string   `json:"principal,omitempty"`
	// Lost are the task IDs the master answered LOST to this framework
	// without knowing them (reconciliation, kill), oldest first, at most
	// maxAnsweredLost: LOST is final, so a task of one of these IDs that
	// an agent reports later — after a restart or failover too — is
	// killed, not adopted.
	Lost []string `json:"lost,omitempty"`
}

// maxAnsweredLost bounds PersistedFramework.Lost; the oldest answers go
// first (a framework that reconciles thousands of unknown IDs keeps the
// newest).
const maxAnsweredLost = 1000

// PersistedAgent is an agent as a Store keeps it: its hostname and the
// principal it registered with ("" without agent authentication), which
// alone may register its ID again after a master restart.
type PersistedAgent struct {
	Hostname  string `json:"hostname"`
	Principal string `json:"principal,omitempty"`
}

var taskIDRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// Master is the master's domain. Create it with New, run its loops with
// Run; master/transport serves it (transport.New). Safe for concurrent
// use.
type Master struct {
	opts Options
	log  *slog.Logger
	// admission admits agents' registrations (admit.go), registrations
	// runs them (workers.go).
	admission     *admission
	registrations *workers
	alloc         *allocator.Allocator
	store         Store

	kick chan struct{} // starts an allocation cycle

	// opMu orders the operator's changes (reservations, quota, weights):
	// each is written to the store, then applied, one at a time — the
	// store's write outside mu, so that an etcd that stops answering
	// never holds the master (its state, its offers, its status updates)
	// behind it (operator.go).
	opMu sync.Mutex

	mu           sync.Mutex
	agents       map[string]*agentEntry
	frameworks   map[string]*frameworkEntry
	tasks        map[string]*taskEntry
	offers       map[string]*offerEntry
	reservations map[string]resources.Resources // agent → dynamic reservations
	quota        map[string]allocator.Quota
	weights      map[string]float64
	knownFWs     map[string]PersistedFramework // persisted frameworks
	knownAgents  map[string]PersistedAgent     // persisted agents
	// awaited are agents of the previous run not yet re-registered: until
	// they are back (or the agent timeout passes) unknown tasks may be
	// theirs, so reconciliation does not call them LOST.
	awaited map[string]bool
	allBack time.Time // when the last awaited agent came back (AllAgentsBack)
	// deferred are tasks frameworks asked to reconcile while agents
	// were awaited (framework → task IDs): answered LOST when the
	// re-registration window closes if still unknown (reregister.go).
	deferred map[string]map[string]bool
	// unseenStaging are STAGING tasks an agent re-registered without,
	// since when: their launch may still be in flight (the agent reports
	// it with its next status), else it was lost with the old stream.
	// Past stagingGrace they go LOST (checkTimeouts).
	unseenStaging map[*taskEntry]time.Time
	// answeredLost are the tasks the master told their framework were
	// LOST without knowing them (reconciliation, kill): task ID → framework
	// ID. LOST is final: one that turns up later is killed, not adopted.
	answeredLost map[string]string
	completed    *completed // history of tasks and frameworks gone
	started      time.Time
	// awaitUntil is when the re-registration window closes (started +
	// reregistrationWindow, moved on by the time the master could not
	// listen: health.go).
	awaitUntil time.Time
	// lastCheck is when the health checks last ran (hearLocked).
	lastCheck time.Time
	cycles    cycleStats

	metrics *counters // figures as plain values (metrics.go)
	dem     *demands  // time-aware demands (demands.go)
	// writes is the store's one writer (writes.go): no store call is
	// made under mu. Unused without a store.
	writes *writes
}

type cycleStats struct {
	count    int
	last     time.Duration
	durs     []time.Duration // ring of recent cycle durations
	next     int
	offers   int
	launches int
}

type agentEntry struct {
	id, hostname string
	principal    string // authenticated principal; "" without agent authentication
	total        resources.Resources
	revocable    resources.Resources
	// revInUse is what the agent's revocable containers held when it
	// computed revocable (revInUseSet: it said so; older agents do not).
	revInUse    resources.Resources
	revInUseSet bool
	oversub     *AgentOversubState // the agent's last oversubscription status, without the estimate; nil: none sent
	attributes  map[string]string
	score       float64          // performance score for meDRF; 0: none reported
	out         *Outbox[ToAgent] // nil: disconnected
	// lastSeen is when the agent was last heard, moved on by the time
	// the master could not listen since (health.go).
	lastSeen time.Time
	// graceFrom is when the agent was last given a grace of the
	// re-registration window (health.go): after a stall of the master,
	// or with every agent silent at once. Zero: never.
	graceFrom   time.Time
	unreachable bool
	inAllocator bool
	// tasks are the agent's tasks by ID (one live task per ID in the
	// master: accept.go); each is its framework's, and a message about a
	// task of the same ID of another framework never touches it.
	tasks map[string]*taskEntry
	lost  map[string]string // tasks declared LOST while unreachable: ID → framework
	// offers are the agent's outstanding offers (addOfferLocked): a few
	// at a time, so a slice. Rescinding an agent's offers once scanned
	// every offer of the master, per agent: O(agents × offers) when
	// thousands of agents dropped at once.
	offers []*offerEntry
	// reserving: an operator's reservation change of the agent is being
	// written to the store; the agent gets no offer meanwhile (Reserve).
	reserving bool
}

type frameworkEntry struct {
	id, name, principal string
	roles               []string
	revocable           bool
	failover            time.Duration
	out                 *Outbox[ToFramework] // nil: disconnected
	disconnectedAt      time.Time
	tasks               map[string]*taskEntry
	offers              map[string]*offerEntry
}

// TaskInfo is a task as its framework described it; its agent,
// framework and resources are the taskEntry's.
type TaskInfo struct {
	ID, Name     string
	Command, Env []string
	Labels       map[string]string
	User         string // "" : the agent's default user
	Userns       bool
	// Image, ImagePull, ImageRW: the task runs on an image (TaskInfo's
	// image, image_pull, image_read_write), passed to the agent as given.
	Image, ImagePull string
	ImageRW          bool
}

type taskEntry struct {
	info      TaskInfo
	fw, agent string
	role      string
	res       resources.Resources
	// launched is when it was accepted (zero: adopted from an agent's
	// re-registration); preempted, the message when the master killed it
	// to reclaim its resources (its framework is told
	// CONTAINER_PREEMPTED).
	launched  time.Time
	preempted string
	state     TaskState
	status    *TaskStatus // latest
	recovered bool        // resources given back to the allocator
	pending   *resize     // resource update sent to the agent, unanswered
	// resizeUUID is the UUID of the last resource update answer applied
	// (the agent retries an answer until it is acknowledged).
	resizeUUID string
}

type offerEntry struct {
	id, fw, agent, role string
	res                 resources.Resources
	created             time.Time
	demand              string // the demand whose capacity it hands over; "" for DRF's
}

// New returns a master; with a Store it loads the persisted state
// (reservations, quota and weights are applied as agents register).
func New(opts Options) (*Master, error) {
	if opts.AllocationInterval <= 0 {
		opts.AllocationInterval = DefaultAllocationInterval
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.MaxMissedHeartbeats <= 0 {
		opts.MaxMissedHeartbeats = DefaultMaxMissedHeartbeats
	}
	if opts.FailoverTimeout <= 0 {
		opts.FailoverTimeout = DefaultFailoverTimeout
	}
	if opts.MaxCompletedTasks == 0 {
		opts.MaxCompletedTasks = DefaultMaxCompletedTasks
	}
	if opts.RegisterTimeout <= 0 {
		opts.RegisterTimeout = DefaultRegisterTimeout
	}
	if opts.MaxCompletedFrameworks == 0 {
		opts.MaxCompletedFrameworks = DefaultMaxCompletedFrameworks
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a, err := allocator.New(opts.Allocator)
	if err != nil {
		return nil, fmt.Errorf("create allocator: %w", err)
	}
	m := &Master{
		opts:          opts,
		log:           log.With("component", "master"),
		admission:     newAdmission(opts.RegistrationSlots, opts.RegisterTimeout),
		registrations: newRegistrationWorkers(),
		alloc:         a,
		store:         opts.Store,
		kick:          make(chan struct{}, 1),
		agents:        map[string]*agentEntry{},
		frameworks:    map[string]*frameworkEntry{},
		tasks:         map[string]*taskEntry{},
		offers:        map[string]*offerEntry{},
		reservations:  map[string]resources.Resources{},
		quota:         map[string]allocator.Quota{},
		weights:       map[string]float64{},
		knownFWs:      map[string]PersistedFramework{},
		knownAgents:   map[string]PersistedAgent{},
		awaited:       map[string]bool{},
		unseenStaging: map[*taskEntry]time.Time{},
		answeredLost:  map[string]string{},
		deferred:      map[string]map[string]bool{},
		completed:     newCompleted(opts.MaxCompletedTasks, opts.MaxCompletedFrameworks),
		started:       time.Now(),
	}
	m.awaitUntil = m.started.Add(m.reregistrationWindow())
	m.dem = newDemands(m, opts.Demands)
	m.metrics = newCounters()
	if m.store != nil {
		m.store = timedStore{Store: m.store, observe: m.metrics.observeStoreWrite}
	}
	m.writes = newWrites(m.store, m.log)
	if m.store != nil {
		p, err := m.store.Load()
		if err != nil {
			return nil, fmt.Errorf("load master state: %w", err)
		}
		m.knownAgents = maps.Clone(p.Agents) // 50,000 inserted one by one: 0.1 s of an election
		if m.knownAgents == nil {
			m.knownAgents = map[string]PersistedAgent{}
		}
		m.awaited = make(map[string]bool, len(p.Agents))
		for id := range p.Agents {
			m.awaited[id] = true
		}
		for id, f := range p.Frameworks {
			m.knownFWs[id] = f
			for _, tid := range f.Lost {
				m.answeredLost[tid] = id
			}
		}
		for id, r := range p.Reservations {
			m.reservations[id] = m.validReservationsLocked(id, r)
		}
		for role, q := range p.Quota {
			if err := ValidateRole(role); err != nil {
				m.log.Warn("stored quota ignored: its role is not valid", "err", err)
				continue
			}
			if err := m.alloc.SetQuota(role, q); err != nil {
				return nil, fmt.Errorf("restore quota of %s: %w", role, err)
			}
			m.quota[role] = q
		}
		for role, w := range p.Weights {
			if err := ValidateRole(role); err != nil {
				m.log.Warn("stored weight ignored: its role is not valid", "err", err)
				continue
			}
			if err := m.alloc.SetWeight(role, w); err != nil {
				return nil, fmt.Errorf("restore weight of %s: %w", role, err)
			}
			m.weights[role] = w
		}
		if err := m.restoreDemandsLocked(p.Demands); err != nil {
			return nil, fmt.Errorf("restore demands: %w", err)
		}
	}
	return m, nil
}

// validReservationsLocked is an agent's stored reservations less those
// of roles ValidateRole refuses (kept by a master without the role name
// limit): logged and left out, so that no capacity stays reserved for a
// role nobody can subscribe with. The agent's next reservation change
// writes the record without them.
func (m *Master) validReservationsLocked(agent string, r resources.Resources) resources.Resources {
	var out resources.Resources
	for role, res := range r.ByRole() {
		if err := ValidateRole(role); err != nil {
			m.log.Warn("stored reservation ignored: its role is not valid", "agent", agent, "resources", res.Unreserve().String(), "err", err)
			continue
		}
		out = out.Add(res)
	}
	return out
}

// Run drives the allocation cycle, agent health checks, offer timeouts and
// framework failover timeouts until ctx is cancelled; then it ends the
// streams and waits for the store writes queued (writes.go), after which
// no write goes out.
func (m *Master) Run(ctx context.Context) error {
	alloc := time.NewTicker(m.opts.AllocationInterval)
	defer alloc.Stop()
	check := time.NewTicker(m.checkEvery())
	defer check.Stop()
	// Event-triggered cycles are spaced by at least a tenth of the
	// interval, so that a burst of events makes one cycle, not hundreds.
	minGap := m.opts.AllocationInterval / 10
	var last time.Time
	var deferred <-chan time.Time
	cycle := func() {
		m.allocate()
		last = time.Now()
		deferred = nil
	}
	for {
		select {
		case <-ctx.Done():
			m.mu.Lock()
			for _, ag := range m.agents {
				if ag.out != nil {
					ag.out.cancel()
				}
			}
			for _, f := range m.frameworks {
				if f.out != nil {
					f.out.cancel()
				}
			}
			m.mu.Unlock()
			m.writes.close() // what is queued is written (or refused) first
			return nil
		case <-alloc.C:
			cycle()
		case <-m.kick:
			if wait := minGap - time.Since(last); wait > 0 {
				if deferred == nil {
					deferred = time.After(wait)
				}
				continue
			}
			cycle()
		case <-deferred:
			cycle()
		case <-check.C:
			m.checkTimeouts(time.Now())
		}
	}
}

// trigger asks for an allocation cycle soon.
func (m *Master) trigger() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// maxOffersPerEvent bounds one Offers event: a cycle's offers to one
// framework go out in events of at most this many, so that no event nears
// gRPC's message limit however many agents the cluster has (one event of
// 50,000 offers was 4.15 MB, past the 4 MiB default, and the framework
// never got it).
const maxOffersPerEvent = 1000

// allocate runs one cycle and sends the offers.
func (m *Master) allocate() {
	m.mu.Lock()
	defer m.mu.Unlock()
	start := time.Now()
	before := len(m.offers)
	m.demandCycleLocked() // holds first: DRF offers what is left
	offers := m.alloc.Allocate()
	byFW := map[string]*OffersMade{}
	for _, o := range offers {
		f := m.frameworks[o.FrameworkID]
		ag := m.agents[o.AgentID]
		if f == nil || f.out == nil || ag == nil || ag.out == nil || ag.reserving {
			zero := time.Duration(0)
			_ = m.alloc.RecoverRole(o.FrameworkID, o.Role, o.AgentID, o.Resources, &zero)
			continue
		}
		e := &offerEntry{id: uuid.NewString(), fw: o.FrameworkID, agent: o.AgentID, role: o.Role, res: o.Resources, created: start}
		m.addOfferLocked(e, f, ag)
		made := byFW[f.id]
		if made == nil {
			made = &OffersMade{}
			byFW[f.id] = made
		}
		made.offers = append(made.offers, e)
		made.hostnames = append(made.hostnames, ag.hostname)
		if len(made.offers) == maxOffersPerEvent {
			f.out.send(made)
			delete(byFW, f.id)
		}
	}
	for id, made := range byFW {
		m.frameworks[id].out.send(made)
	}
	d := time.Since(start)
	m.metrics.cycles.observe(d)
	if n := len(m.offers) - before; n > 0 {
		m.metrics.made += uint64(n)
	}
	m.cycles.count++
	m.cycles.last = d
	m.cycles.offers += len(offers)
	if len(m.cycles.durs) < 1024 {
		m.cycles.durs = append(m.cycles.durs, d)
	} else {
		m.cycles.durs[m.cycles.next] = d
		m.cycles.next = (m.cycles.next + 1) % len(m.cycles.durs)
	}
}

// CycleStats reports the number of allocation cycles run, offers made,
// tasks launched, and the p50 and p99 of the recent cycles' durations.
func (m *Master) CycleStats() (cycles, offers, launches int, p50, p99 time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p50, p99 = m.cyclePercentilesLocked()
	return m.cycles.count, m.cycles.offers, m.cycles.launches, p50, p99
}

func (m *Master) cyclePercentilesLocked() (p50, p99 time.Duration) {
	d := append([]time.Duration(nil), m.cycles.durs...)
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	if len(d) > 0 {
		p50 = d[len(d)/2]
		p99 = d[min(len(d)-1, len(d)*99/100)]
	}
	return p50, p99
}

// checkTimeouts marks silent agents unreachable, rescinds expired offers
// and removes frameworks whose failover timeout passed — measured in
// the time the master could listen, and only while its leadership
// holds (health.go).
func (m *Master) checkTimeouts(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.held() {
		return // the term may have ended while this master was stopped: it steps down
	}
	m.hearLocked(now)
	if len(m.awaited) > 0 && now.After(m.awaitUntil) {
		m.log.Warn("agents of the previous run did not come back", "count", len(m.awaited))
		clear(m.awaited)
	}
	if len(m.awaited) == 0 && len(m.deferred) > 0 {
		m.answerDeferredLocked()
	}
	m.loseUnseenStagingLocked(now)
	m.checkAgentsLocked(now)
	if m.opts.OfferTimeout > 0 {
		for _, o := range m.offers {
			if now.Sub(o.created) > m.opts.OfferTimeout {
				m.rescindLocked(o, nil)
			}
		}
	}
	for _, f := range m.frameworks {
		if f.out == nil && now.Sub(f.disconnectedAt) > f.failover {
			m.log.Info("framework failover timeout", "framework", f.id)
			m.removeFrameworkLocked(f)
		}
	}
}

// stagingGrace is how long a STAGING task an agent re-registered
// without may still show up: two heartbeats.
func (m *Master) stagingGrace() time.Duration { return 2 * m.opts.HeartbeatInterval }

// loseUnseenStagingLocked declares LOST the STAGING tasks an agent
// re-registered without and has not reported since, stagingGrace later:
// their RunTask went down with the agent's old stream (or the agent died
// before it checkpointed the launch). Without this they stayed STAGING
// forever and their resources allocated (found by the chaos harness).
func (m *Master) loseUnseenStagingLocked(now time.Time) {
	for t, since := range m.unseenStaging {
		switch {
		case t.state != TaskStaging || m.tasks[t.info.ID] != t:
			delete(m.unseenStaging, t) // reported, ended or forgotten
		case now.Sub(since) > m.stagingGrace():
			delete(m.unseenStaging, t)
			m.setTaskStatusLocked(t, &TaskStatus{
				TaskID: t.info.ID, AgentID: t.agent, FrameworkID: t.fw, State: TaskLost,
				Reason: ReasonUnknownOnAgent, Message: fmt.Sprintf("the agent re-registered without this launch and did not report it within %v", m.stagingGrace()),
			})
			if ag := m.agents[t.agent]; ag != nil {
				ag.lost[t.info.ID] = t.fw // killed should it still turn up
			}
			m.forgetTaskLocked(t)
		}
	}
}

// addOfferLocked records a new offer o of framework f on agent ag.
func (m *Master) addOfferLocked(o *offerEntry, f *frameworkEntry, ag *agentEntry) {
	m.offers[o.id] = o
	f.offers[o.id] = o
	ag.offers = append(ag.offers, o)
}

// dropOfferLocked forgets offer o wherever addOfferLocked recorded it
// (its resources are the caller's to give back or use).
func (m *Master) dropOfferLocked(o *offerEntry) {
	delete(m.offers, o.id)
	if f := m.frameworks[o.fw]; f != nil {
		delete(f.offers, o.id)
	}
	if ag := m.agents[o.agent]; ag != nil {
		if i := slices.Index(ag.offers, o); i >= 0 {
			ag.offers = slices.Delete(ag.offers, i, i+1)
		}
	}
}

// withdrawOfferLocked forgets offer o and tells its framework; the
// allocator is the caller's (it already took the resources back, or
// rescindLocked gives them back).
func (m *Master) withdrawOfferLocked(o *offerEntry) {
	m.dropOfferLocked(o)
	if f := m.frameworks[o.fw]; f != nil {
		f.out.send(&OfferRescinded{OfferID: o.id})
	}
}

// rescindLocked withdraws an offer, tells its framework and gives the
// resources back with the given refusal (nil: none).
func (m *Master) rescindLocked(o *offerEntry, refuse *time.Duration) {
	if m.offers[o.id] != o {
		return // gone already (a demand that failed withdrew its offers): given back then
	}
	m.metrics.rescinds++
	m.withdrawOfferLocked(o)
	if refuse == nil {
		zero := time.Duration(0)
		refuse = &zero
	}
	if err := m.alloc.RecoverRole(o.fw, o.role, o.agent, o.res, refuse); err != nil {
		m.log.Debug("recover rescinded offer", "offer", o.id, "err", err)
	}
	m.demandOfferGoneLocked(o)
	m.trigger()
}

// markUnreachableLocked removes an agent from allocation and declares its
// tasks LOST.
func (m *Master) markUnreachableLocked(ag *agentEntry) {
	ag.unreachable = true
	if ag.out != nil {
		ag.out.cancel()
		ag.out = nil
	}
	m.dropAgentFromAllocatorLocked(ag)
	for id, t := range ag.tasks {
		if !terminal(t.state) {
			ag.lost[id] = t.fw
		}
		m.setTaskStatusLocked(t, &TaskStatus{
			TaskID: id, AgentID: ag.id, FrameworkID: t.fw, State: TaskLost,
			Reason:  ReasonAgentUnreachable,
			Message: fmt.Sprintf("agent %s missed %d heartbeats", ag.id, m.opts.MaxMissedHeartbeats),
		})
		m.forgetTaskLocked(t)
	}
}

// dropAgentFromAllocatorLocked rescinds the agent's offers and removes it
// from the allocator (its tasks stay in the registry).
func (m *Master) dropAgentFromAllocatorLocked(ag *agentEntry) {
	for _, o := range slices.Clone(ag.offers) {
		if m.offers[o.id] != o {
			continue // withdrawn meanwhile, with a demand that failed
		}
		m.withdrawOfferLocked(o) // the allocator forgets the agent below
		m.demandOfferGoneLocked(o)
	}
	if ag.inAllocator {
		if err := m.alloc.RemoveAgent(ag.id); err != nil {
			m.log.Warn("remove agent from allocator", "agent", ag.id, "err", err)
		}
		ag.inAllocator = false
		m.dem.AgentGone(ag.id, m.dem.clock()) // no capacity until it is back; its bookings move
	}
	for _, t := range ag.tasks {
		t.recovered = true // the allocator forgot them with the agent
	}
}

func terminal(s TaskState) bool { return s.Terminal() }

// setTaskStatusLocked records a status, gives a newly terminal task's
// resources back to the allocator, and forwards the status to the
// framework.
func (m *Master) setTaskStatusLocked(t *taskEntry, st *TaskStatus) {
	if st.TimestampUnixNano == 0 {
		st.TimestampUnixNano = time.Now().UnixNano()
	}
	if t.preempted != "" && st.State == TaskKilled && st.Reason != ReasonPreempted {
		// An agent that knows no preemption reports a plain kill.
		st.Reason, st.Message = ReasonPreempted, t.preempted
	}
	t.state = st.State
	t.status = st
	if terminal(st.State) && !t.recovered {
		t.recovered = true
		held := t.held() // with the growth of an unanswered update
		t.pending = nil
		if ag := m.agents[t.agent]; ag != nil && ag.inAllocator {
			zero := time.Duration(0)
			if err := m.alloc.RecoverRole(t.fw, t.role, t.agent, held, &zero); err != nil {
				m.log.Warn("recover task resources", "task", t.info.ID, "err", err)
			}
			m.trigger()
		}
	}
	if terminal(st.State) {
		m.demandTaskEndedLocked(t, st.State == TaskFinished)
	}
	if f := m.frameworks[t.fw]; f != nil {
		f.out.send(st)
	}
}

// forgetTaskLocked removes a task from the registry into the completed
// history (a task still running, of a removed framework, as LOST).
func (m *Master) forgetTaskLocked(t *taskEntry) {
	if m.tasks[t.info.ID] == t {
		ts := taskStateOf(t)
		ts.State = terminalOrLost(t.state).String()
		m.completed.addTask(ts)
	}
	delete(m.tasks, t.info.ID)
	if ag := m.agents[t.agent]; ag != nil {
		delete(ag.tasks, t.info.ID)
	}
	if f := m.frameworks[t.fw]; f != nil {
		delete(f.tasks, t.info.ID)
	}
}

// removeFrameworkLocked kills the framework's tasks, rescinds its offers
// and forgets it.
func (m *Master) removeFrameworkLocked(f *frameworkEntry) {
	for tid, fw := range m.answeredLost {
		if fw == f.id {
			delete(m.answeredLost, tid)
		}
	}
	for _, o := range f.offers {
		m.rescindLocked(o, nil)
	}
	ntasks := len(f.tasks)
	for _, t := range f.tasks {
		if !terminal(t.state) {
			if ag := m.agents[t.agent]; ag != nil {
				ag.out.send(&KillTask{TaskID: t.info.ID, FrameworkID: f.id})
			}
			t.state = TaskKilled // in the completed history
			t.status = &TaskStatus{TaskID: t.info.ID, AgentID: t.agent, FrameworkID: f.id, State: t.state, Reason: ReasonFrameworkRemoved}
		}
		m.forgetTaskLocked(t)
	}
	if f.out != nil {
		f.out.cancel()
	}
	m.completed.addFramework(FrameworkState{ID: f.id, Name: f.name, Principal: f.principal, Roles: f.roles, Tasks: ntasks})
	if err := m.alloc.RemoveFramework(f.id); err != nil {
		m.log.Warn("remove framework from allocator", "framework", f.id, "err", err)
	}
	delete(m.frameworks, f.id)
	delete(m.knownFWs, f.id)
	m.deleteFrameworkRecordLocked(f.id)
	m.trigger()
}
