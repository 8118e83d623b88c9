package master

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/brimnode/brim/internal/speclimit"
	"github.com/brimnode/brim/resources"
)

// OpKind is the kind of an ACCEPT operation.
type OpKind int

const (
	OpUnknown OpKind = iota // an operation this master does not know
	OpLaunch
	OpReserve
	OpUnreserve
)

// Operation is one operation of an ACCEPT, in domain terms (the
// transport builds it from the protobuf).
type Operation struct {
	Kind      OpKind
	Tasks     []TaskSpec // OpLaunch
	Resources string     // OpReserve, OpUnreserve: the text the framework sent
}

// TaskSpec is a task a LAUNCH asks for: its description and resources as
// the framework wrote them.
type TaskSpec struct {
	Info      TaskInfo
	Resources string
}

// AcceptRequest is an ACCEPT call.
type AcceptRequest struct {
	FrameworkID string
	OfferIDs    []string
	Operations  []Operation
	Refuse      *time.Duration // filter for what the operations leave; nil: default
	// MayRunAsRoot says whether the caller may run tasks as root for a
	// role (the run_as_root ACL; an error wrapping ErrForbidden says why
	// not). The transport, which authenticated the caller, sets it; nil:
	// nobody may.
	MayRunAsRoot func(role string) error
}

// acceptView is what planAccept reads of the master's state. The Master
// fills it under its lock; tests fill it by hand.
type acceptView struct {
	framework *frameworkEntry // nil: unknown framework
	// agentConnected reports whether an agent can take tasks now.
	agentConnected func(id string) bool
	// taskExists reports whether a task ID is in use.
	taskExists func(id string) bool
	// mayRunAsRoot says whether the framework's principal may run tasks
	// as root for role (ActionRunAsRoot; an error wrapping ErrForbidden
	// says why not). nil: nobody may.
	mayRunAsRoot func(role string) error
}

// acceptPlan is everything an accepted ACCEPT changes; applyAcceptLocked
// carries it out.
type acceptPlan struct {
	framework, agent string
	offers           []string                       // used up
	unused           map[string]resources.Resources // role → what goes back to the allocator
	refuse           *time.Duration
	reservations     []reservationOp
	launches         []launchOp
	// refused are tasks the master ends with TASK_ERROR instead of
	// launching (a root task without run_as_root); their resources stay
	// in unused.
	refused []refusedTask
}

// refusedTask is a task of an ACCEPT that the master refuses on its own
// (the rest of the ACCEPT goes ahead): the framework gets TASK_ERROR with
// reason and message.
type refusedTask struct {
	id, reason, message string
}

// reservationOp is one RESERVE or UNRESERVE: res in reserved form (one
// role, one principal).
type reservationOp struct {
	res     resources.Resources
	reserve bool
}

// launchOp is one task to start: its resources parsed, and the role of the
// offer they come from.
type launchOp struct {
	info TaskInfo
	res  resources.Resources
	role string
	// runAsRoot: the run_as_root ACL allows it for role (runTask.runAsRoot).
	runAsRoot bool
}

// planAccept validates an ACCEPT completely and returns what it changes;
// it changes nothing itself. A forged or stale offer, a task outside the
// offers, a bad operation all return errors: the offers stay outstanding.
// Errors wrap ErrNotFound (framework), ErrStaleOffer (an offer not
// outstanding for the framework, named twice, or of an agent that is
// gone), ErrInvalid or ErrInsufficient (not in the offers).
func planAccept(v acceptView, req AcceptRequest) (acceptPlan, error) {
	f := v.framework
	if f == nil || f.id != req.FrameworkID {
		return acceptPlan{}, fmt.Errorf("framework %q: %w", req.FrameworkID, ErrNotFound)
	}
	if len(req.OfferIDs) == 0 {
		return acceptPlan{}, fmt.Errorf("accept: no offer: %w", ErrInvalid)
	}
	p := acceptPlan{framework: f.id, unused: map[string]resources.Resources{}, refuse: req.Refuse}
	seen := map[string]bool{}
	for _, oid := range req.OfferIDs {
		o := f.offers[oid]
		if o == nil || seen[oid] {
			return acceptPlan{}, fmt.Errorf("accept offer %q: %w", oid, ErrStaleOffer)
		}
		seen[oid] = true
		if p.agent != "" && o.agent != p.agent {
			return acceptPlan{}, fmt.Errorf("accept: offers of agents %s and %s: %w", p.agent, o.agent, ErrInvalid)
		}
		p.agent = o.agent
		p.offers = append(p.offers, oid)
		p.unused[o.role] = p.unused[o.role].Add(o.res)
	}
	if !v.agentConnected(p.agent) {
		return acceptPlan{}, fmt.Errorf("accept: agent %s is gone: %w", p.agent, ErrStaleOffer)
	}
	ids := map[string]bool{}
	for i, op := range req.Operations {
		var err error
		switch op.Kind {
		case OpLaunch:
			err = p.planLaunch(v, op.Tasks, ids)
		case OpReserve:
			err = p.planReserve(op.Resources, f.roles)
		case OpUnreserve:
			err = p.planUnreserve(op.Resources)
		default:
			err = fmt.Errorf("unknown operation: %w", ErrInvalid)
		}
		if err != nil {
			return acceptPlan{}, fmt.Errorf("operation %d: %w", i, err)
		}
	}
	return p, nil
}

// take removes want from the first role's remains (in role order) that
// holds all of it, and returns that role.
func (p *acceptPlan) take(want resources.Resources) (string, error) {
	for _, r := range sortedRoles(p.unused) {
		if p.unused[r].Contains(want) {
			p.unused[r] = p.unused[r].Subtract(want)
			return r, nil
		}
	}
	return "", fmt.Errorf("%s is not in the offers: %w", want, ErrInsufficient)
}

func (p *acceptPlan) planLaunch(v acceptView, tasks []TaskSpec, ids map[string]bool) error {
	for _, ts := range tasks {
		id := ts.Info.ID
		if !taskIDRE.MatchString(id) {
			return fmt.Errorf("task ID %q: must match %s: %w", id, taskIDRE, ErrInvalid)
		}
		if v.taskExists(id) || ids[id] {
			return fmt.Errorf("task ID %q is in use: %w", id, ErrInvalid)
		}
		if err := checkTaskImage(ts.Info); err != nil {
			return fmt.Errorf("task %s: %w", id, err)
		}
		// The agent would refuse it (or the kernel fail its exec); its
		// runner adds speclimit.ReservedLabels labels of its own.
		if err := speclimit.Check(ts.Info.Command, ts.Info.Env, ts.Info.Labels, speclimit.MaxTaskLabels); err != nil {
			return fmt.Errorf("task %s: %w: %w", id, ErrInvalid, err)
		}
		res, err := resources.Parse(ts.Resources)
		if err != nil {
			return fmt.Errorf("task %s: %w: %w", id, ErrInvalid, err)
		}
		if err := resources.ValidateTask(res); err != nil {
			return fmt.Errorf("task %s: %w: %w", id, ErrInvalid, err)
		}
		if res.IsEmpty() {
			return fmt.Errorf("task %s: no resources: %w", id, ErrInvalid)
		}
		role, err := p.take(res)
		if err != nil {
			return fmt.Errorf("task %s: %w", id, err)
		}
		ids[id] = true
		rootErr := fmt.Errorf("no ACL allows run_as_root: %w", ErrForbidden)
		if v.mayRunAsRoot != nil {
			rootErr = v.mayRunAsRoot(role)
		}
		if rootUser(ts.Info.User) && !ts.Info.Userns && rootErr != nil {
			// Refused on its own, as Mesos does with TASK_ERROR: the
			// resources go back with the rest of the offers.
			p.unused[role] = p.unused[role].Add(res)
			p.refused = append(p.refused, refusedTask{id: id, reason: ReasonTaskUnauthorized,
				message: fmt.Sprintf("task %s runs as user %q, which needs run_as_root: %v", id, ts.Info.User, rootErr)})
			continue
		}
		p.launches = append(p.launches, launchOp{info: ts.Info, res: res, role: role, runAsRoot: rootErr == nil})
	}
	return nil
}

func (p *acceptPlan) planReserve(text string, roles []string) error {
	res, err := resources.Parse(text)
	if err != nil {
		return fmt.Errorf("reserve: %w: %w", ErrInvalid, err)
	}
	for _, e := range res {
		if e.Revocable {
			return fmt.Errorf("reserve %s: %w: %w", e.String(), ErrInvalid, resources.ErrRevocableReservation)
		}
		if e.Reservation == nil || !roleIn(e.Role, roles) {
			return fmt.Errorf("reserve %s: needs a dynamic reservation for one of the framework's roles: %w", e.String(), ErrInvalid)
		}
	}
	if res.IsEmpty() {
		return fmt.Errorf("reserve: no resources: %w", ErrInvalid)
	}
	if _, err := p.take(res.Unreserve()); err != nil {
		return fmt.Errorf("reserve: %w", err)
	}
	p.reservations = append(p.reservations, reservationOp{res: res, reserve: true})
	return nil
}

func (p *acceptPlan) planUnreserve(text string) error {
	res, err := resources.Parse(text)
	if err != nil {
		return fmt.Errorf("unreserve: %w: %w", ErrInvalid, err)
	}
	for _, e := range res {
		if e.Reservation == nil {
			return fmt.Errorf("unreserve %s: not dynamically reserved: %w", e.String(), ErrInvalid)
		}
	}
	if res.IsEmpty() {
		return fmt.Errorf("unreserve: no resources: %w", ErrInvalid)
	}
	if _, err := p.take(res); err != nil {
		return fmt.Errorf("unreserve: %w", err)
	}
	p.reservations = append(p.reservations, reservationOp{res: res})
	return nil
}

// rootUser reports whether a task's user names root literally: "root" or
// uid 0, with or without a group. The agent resolves other names and
// refuses uid 0 without runTask.runAsRoot.
func rootUser(user string) bool {
	name, _, _ := strings.Cut(user, ":")
	if name == "root" {
		return true
	}
	n, err := strconv.ParseUint(name, 10, 32)
	return err == nil && n == 0
}

// Accept is the ACCEPT call: it applies operations to offers of one agent,
// validating everything before anything changes (see planAccept, whose
// errors it returns).
func (m *Master) Accept(req AcceptRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, err := planAccept(acceptView{
		framework: m.frameworks[req.FrameworkID],
		agentConnected: func(id string) bool {
			ag := m.agents[id]
			return ag != nil && ag.out != nil
		},
		taskExists:   func(id string) bool { return m.tasks[id] != nil },
		mayRunAsRoot: req.MayRunAsRoot,
	}, req)
	if err != nil {
		return err
	}
	m.applyAcceptLocked(p)
	return nil
}

// applyAcceptLocked carries out a plan: the offers are used up, what the
// operations leave goes back with the plan's filter, reservations change,
// tasks are staged and sent to the agent.
func (m *Master) applyAcceptLocked(p acceptPlan) {
	f, ag := m.frameworks[p.framework], m.agents[p.agent]
	for _, id := range p.offers {
		if o := f.offers[id]; o != nil { // planAccept checked each
			m.dropOfferLocked(o)
		}
	}
	for _, role := range sortedRoles(p.unused) {
		if res := p.unused[role]; !res.IsEmpty() {
			if err := m.alloc.RecoverRole(f.id, role, p.agent, res, p.refuse); err != nil {
				m.log.Warn("recover unused offer", "framework", f.id, "err", err)
			}
		}
	}
	for _, rv := range p.reservations {
		m.applyReservationLocked(f.id, p.agent, rv)
	}
	for _, l := range p.launches {
		t := &taskEntry{info: l.info, fw: f.id, agent: p.agent, role: l.role, res: l.res, launched: m.dem.clock()}
		m.tasks[t.info.ID] = t
		if m.forgetLostLocked(f.id, t.info.ID) { // a new task of that ID
			m.persistFrameworkLocked(f.id)
		}
		f.tasks[t.info.ID] = t
		ag.tasks[t.info.ID] = t
		m.setTaskStatusLocked(t, &TaskStatus{TaskID: t.info.ID, AgentID: p.agent, FrameworkID: f.id, State: TaskStaging})
		ag.out.send(&RunTask{Info: t.info, FrameworkID: t.fw, AgentID: t.agent, Resources: t.res, RunAsRoot: l.runAsRoot, Lent: m.lentLaunchLocked(ag, t.res)})
		m.cycles.launches++
		m.metrics.launches++
	}
	for _, r := range p.refused {
		m.log.Info("task refused", "task", r.id, "framework", f.id, "reason", r.reason, "message", r.message)
		f.out.send(&TaskStatus{TaskID: r.id, AgentID: p.agent, FrameworkID: f.id, State: TaskError,
			Reason: r.reason, Message: r.message, TimestampUnixNano: time.Now().UnixNano()})
	}
	m.demandLaunchedLocked(p.offers, p)
	m.trigger()
}

// applyReservationLocked gives the offered resources of a RESERVE or
// UNRESERVE back and moves them between the agent's pools, entry by entry
// (one operation may name several roles).
func (m *Master) applyReservationLocked(fw, agentID string, rv reservationOp) {
	zero := time.Duration(0)
	if rv.reserve {
		_ = m.alloc.RecoverRole(fw, "", agentID, rv.res.Unreserve(), &zero)
	} else {
		_ = m.alloc.RecoverRole(fw, "", agentID, rv.res, &zero)
	}
	for _, e := range rv.res {
		one := resources.Resources{e}
		if rv.reserve {
			if err := m.alloc.Reserve(agentID, e.Role, e.Reservation.Principal, one.Unreserve()); err != nil {
				m.log.Warn("reserve", "agent", agentID, "err", err)
				continue
			}
			m.reservations[agentID] = m.reservations[agentID].Add(one)
		} else {
			if err := m.alloc.Unreserve(agentID, one); err != nil {
				m.log.Warn("unreserve", "agent", agentID, "err", err)
				continue
			}
			m.reservations[agentID] = m.reservations[agentID].Subtract(one)
		}
	}
	// A framework's operation cannot be refused once its offers are used:
	// the record is written behind the change (writes.go); a store that
	// fails is logged and the next change writes it again.
	m.putReservationsLocked(agentID, m.reservations[agentID])
}
