package chaos

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/brimnode/brim/resources"
)

// MasterState is the part of the master's GET /state the checks read.
type MasterState struct {
	Agents []struct {
		ID             string `json:"id"`
		Resources      string `json:"resources"`
		Revocable      string `json:"revocable"`
		RevocableInUse string `json:"revocableInUse"`
		Reserved       string `json:"reserved"`
		Connected      bool   `json:"connected"`
	} `json:"agents"`
	Frameworks []struct {
		ID        string `json:"id"`
		Connected bool   `json:"connected"`
	} `json:"frameworks"`
	Tasks []struct {
		ID          string `json:"id"`
		FrameworkID string `json:"frameworkId"`
		AgentID     string `json:"agentId"`
		State       string `json:"state"`
		Resources   string `json:"resources"`
	} `json:"tasks"`
	Offers []struct {
		ID          string `json:"id"`
		FrameworkID string `json:"frameworkId"`
		AgentID     string `json:"agentId"`
		Role        string `json:"role"`
		Resources   string `json:"resources"`
	} `json:"offers"`
	Roles []struct {
		Role      string `json:"role"`
		Allocated string `json:"allocated"`
	} `json:"roles"`
	Shares []struct {
		FrameworkID string `json:"frameworkId"`
		Role        string `json:"role"`
		Allocated   string `json:"allocated"`
	} `json:"frameworkShares"`
}

// taskKey names a task of a framework: task IDs are reused across
// frameworks (framework-kill), never within one.
func taskKey(framework, task string) string { return framework + "/" + task }

// Election is a change of leader as the harness saw it in etcd: the
// masters' election keys, the lowest create revision leading.
type Election struct {
	At     time.Time
	Leader string // the leader's advertised address; "" none
	Key    string // its election key
}

// FailoverDelay is how soon after fault f (a leader fault of HA mode) a
// leader was elected: from its end for etcd-quorum-loss (nobody can be
// elected before quorum returns), from its start otherwise. ok is false
// when no election came after it; preempted when another leader fault
// (of faults) started before the election, or before any.
func FailoverDelay(f Fault, faults []Fault, elections []Election) (d time.Duration, ok, preempted bool) {
	from := f.Start
	if f.Kind == EtcdQuorumLoss {
		from = f.End
	}
	var until time.Time // the next leader fault's start
	for _, g := range faults {
		if leaderFault(g.Kind) && g.Start.After(f.Start) && (until.IsZero() || g.Start.Before(until)) {
			until = g.Start
		}
	}
	for _, e := range elections {
		if e.Leader == "" || !e.At.After(from) {
			continue
		}
		if !until.IsZero() && e.At.After(until) {
			return 0, false, true
		}
		return e.At.Sub(from), true, false
	}
	return 0, false, !until.IsZero()
}

// CheckFailovers checks that after every etcd quorum loss of HA mode a
// leader was elected within bound of the quorum's return, unless another
// leader fault came first or the leader kept its term (its key never
// changed: a loss shorter than a term may go without a lease refresh); and returns how soon a leader came after each
// leader fault, by kind (figures).
func CheckFailovers(faults []Fault, elections []Election, bound time.Duration) ([]string, map[string][]time.Duration) {
	var bad []string
	delays := map[string][]time.Duration{}
	for _, f := range faults {
		if !leaderFault(f.Kind) || !f.Leader {
			continue
		}
		d, ok, preempted := FailoverDelay(f, faults, elections)
		if ok {
			delays[f.Kind] = append(delays[f.Kind], d)
		}
		if f.Kind != EtcdQuorumLoss || preempted {
			continue
		}
		switch {
		case !ok && !keyChanged(f, elections):
			// The leader kept its term through a loss shorter than
			// the TTL·3/4 it may go without a lease refresh: no
			// failover was due.
		case !ok:
			bad = append(bad, fmt.Sprintf("%s: no leader was elected after the quorum returned", f))
		case d > bound:
			bad = append(bad, fmt.Sprintf("%s: a leader was elected %v after the quorum returned, bound %v", f, d.Round(10*time.Millisecond), bound))
		}
	}
	return bad, delays
}

// keyChanged reports whether the leader's election key changed (a
// new leader, or none: the key gone) at or after fault f's start.
func keyChanged(f Fault, elections []Election) bool {
	for _, e := range elections {
		if !e.At.Before(f.Start) {
			return true
		}
	}
	return false
}

// terminalState reports whether a task state name (as /state and brim
// run print it, without TASK_) is terminal.
func terminalState(s string) bool {
	switch s {
	case "FINISHED", "FAILED", "KILLED", "LOST", "GONE", "ERROR", "DROPPED":
		return true
	}
	return false
}

// LiveTasks are the master's tasks not in a terminal state, by
// framework/task (taskKey): a task ID may be reused by another
// framework.
func (st MasterState) LiveTasks() map[string]string {
	out := map[string]string{}
	for _, t := range st.Tasks {
		if !terminalState(t.State) {
			out[taskKey(t.FrameworkID, t.ID)] = t.AgentID
		}
	}
	return out
}

func sum(texts ...string) (resources.Resources, error) {
	var r resources.Resources
	for _, s := range texts {
		if s == "" {
			continue
		}
		x, err := resources.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("parse %q: %w", s, err)
		}
		r = r.Add(x)
	}
	return r, nil
}

// CheckAllocation checks one /state snapshot: per framework, what the
// allocator says it holds equals its live tasks plus its outstanding
// offers (the allocator reports scalar totals, revocable and reserved
// parts folded in, so totals per scalar are compared); per role, the
// role's allocation is the sum of its frameworks'; per agent, its live
// non-revocable tasks and offers fit in its resources, and its revocable
// offers in its revocable estimate (/state's "revocable" is the agent's
// estimate of what is free, tasks left out): no offer of resources that
// are not free.
// It returns one line per violation.
func CheckAllocation(st MasterState) []string {
	var bad []string
	held := map[string][]string{}    // framework → task and offer resources
	onAgent := map[string][]string{} // agent → same
	offered := map[string][]string{} // agent → offers
	for _, t := range st.Tasks {
		if terminalState(t.State) {
			continue
		}
		held[t.FrameworkID] = append(held[t.FrameworkID], t.Resources)
		onAgent[t.AgentID] = append(onAgent[t.AgentID], t.Resources)
	}
	for _, o := range st.Offers {
		held[o.FrameworkID] = append(held[o.FrameworkID], o.Resources)
		onAgent[o.AgentID] = append(onAgent[o.AgentID], o.Resources)
		offered[o.AgentID] = append(offered[o.AgentID], o.Resources)
	}
	alloc := map[string][]string{}  // framework → allocator's view
	byRole := map[string][]string{} // role → frameworks' allocations
	for _, s := range st.Shares {
		alloc[s.FrameworkID] = append(alloc[s.FrameworkID], s.Allocated)
		byRole[s.Role] = append(byRole[s.Role], s.Allocated)
	}
	for _, fw := range sortedKeys(held, alloc) {
		if _, known := alloc[fw]; !known {
			// Not (yet) in the allocator, e.g. after a master restart
			// before it re-subscribed: the allocator holds its tasks as
			// the agent's orphaned usage, which /state does not show.
			continue
		}
		want, err1 := sum(held[fw]...)
		got, err2 := sum(alloc[fw]...)
		if err1 != nil || err2 != nil {
			bad = append(bad, fmt.Sprintf("framework %s: %v %v", fw, err1, err2))
			continue
		}
		if !sameScalars(got, want) {
			bad = append(bad, fmt.Sprintf("framework %s: allocation %q != tasks+offers %q", fw, got, want))
		}
	}
	for _, r := range st.Roles {
		got, err1 := sum(r.Allocated)
		want, err2 := sum(byRole[r.Role]...)
		if err1 == nil && err2 == nil && !sameScalars(got, want) {
			bad = append(bad, fmt.Sprintf("role %s: allocated %q != its frameworks' %q", r.Role, got, want))
		}
	}
	for _, ag := range st.Agents {
		plain, err1 := sum(ag.Resources)
		free, err2 := sum(ag.Revocable)
		used, err3 := sum(onAgent[ag.ID]...)
		offers, err4 := sum(offered[ag.ID]...)
		reserved, err5 := sum(ag.Reserved)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			bad = append(bad, fmt.Sprintf("agent %s: %v", ag.ID, err))
			continue
		}
		// /state's resources are the agent's totals; reservations carve
		// their part out of the unreserved resources.
		if plain.Contains(reserved.Unreserve()) {
			plain = plain.Subtract(reserved.Unreserve()).Add(reserved)
		} else {
			bad = append(bad, fmt.Sprintf("agent %s: reservations %q exceed its resources %q", ag.ID, reserved, plain))
		}
		if !plain.Contains(used.NonRevocable()) {
			bad = append(bad, fmt.Sprintf("agent %s: tasks+offers %q exceed its resources %q", ag.ID, used.NonRevocable(), plain))
		}
		// What the agent's tasks held when it computed the estimate but
		// the master no longer counts (tasks whose end it has seen since)
		// is free as well; the agent's next estimate will say so.
		inUse, err := sum(ag.RevocableInUse)
		if err != nil {
			bad = append(bad, fmt.Sprintf("agent %s: %v", ag.ID, err))
			continue
		}
		if allowed := free.Add(endedSince(inUse, used.Revocable(), offers.Revocable())); !allowed.Contains(offers.Revocable()) {
			bad = append(bad, fmt.Sprintf("agent %s: revocable offers %q exceed its revocable estimate %q (in use then %q)", ag.ID, offers.Revocable(), free, inUse))
		}
	}
	for id := range onAgent {
		if !hasAgent(st, id) {
			bad = append(bad, fmt.Sprintf("tasks or offers on unknown agent %q", id))
		}
	}
	return bad
}

func hasAgent(st MasterState, id string) bool {
	for _, a := range st.Agents {
		if a.ID == id {
			return true
		}
	}
	return false
}

func sortedKeys(ms ...map[string][]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Status is one transition a framework printed: "task ID: STATE on agent
// A (REASON): MESSAGE".
type Status struct {
	Task, State, Agent, Reason, Message string
}

// ParseStatus parses a `brim run` status line; ok is false for other
// lines.
func ParseStatus(line string) (Status, bool) {
	rest, ok := strings.CutPrefix(line, "task ")
	if !ok {
		return Status{}, false
	}
	id, rest, ok := strings.Cut(rest, ": ")
	if !ok {
		return Status{}, false
	}
	head, msg, _ := strings.Cut(rest, ": ")
	var s Status
	s.Task, s.Message = id, msg
	f := strings.Fields(head)
	if len(f) == 0 {
		return Status{}, false
	}
	s.State = f[0]
	if rank(s.State) < 0 {
		return Status{}, false
	}
	for i := 1; i < len(f); i++ {
		switch {
		case f[i] == "on" && i+2 < len(f) && f[i+1] == "agent":
			s.Agent = f[i+2]
			i += 2
		case strings.HasPrefix(f[i], "(") && strings.HasSuffix(f[i], ")"):
			s.Reason = strings.Trim(f[i], "()")
		}
	}
	return s, true
}

// rank orders task states; -1 for an unknown name.
func rank(state string) int {
	switch state {
	case "STAGING":
		return 0
	case "STARTING":
		return 1
	case "RUNNING":
		return 2
	}
	if terminalState(state) {
		return 3
	}
	return -1
}

// CheckSequence checks one framework's view of its tasks: per task, the
// states after de-duplication of repeats (reconciliation re-sends the
// current state) never go back, and there is at most one terminal state,
// with nothing after it. A terminal state a reconciliation reports
// (reason RECONCILIATION, not LOST) is not final for brim run, which
// waits for the agent's own update: that may follow, in the same state.
func CheckSequence(sts []Status) []string {
	var bad []string
	last := map[string]Status{}
	ended := map[string]bool{}
	for _, s := range sts {
		prev, seen := last[s.Task]
		if ended[s.Task] {
			bad = append(bad, fmt.Sprintf("task %s: %s after terminal %s", s.Task, s.State, prev.State))
			continue
		}
		if seen && rank(s.State) < rank(prev.State) {
			bad = append(bad, fmt.Sprintf("task %s: %s after %s", s.Task, s.State, prev.State))
		}
		if seen && terminalState(prev.State) && s.State != prev.State {
			bad = append(bad, fmt.Sprintf("task %s: %s after %s (%s)", s.Task, s.State, prev.State, prev.Reason))
		}
		last[s.Task] = s
		ended[s.Task] = terminalState(s.State) && (s.Reason != "RECONCILIATION" || s.State == "LOST")
	}
	return bad
}

// Fault kinds.
const (
	AgentKill     = "agent-kill"     // kill -9 of an agent, restarted after a pause
	MasterKill    = "master-kill"    // kill -9 of the master (HA: the leader), restarted after a pause
	ShimKill      = "shim-kill"      // kill -9 of one task's shim
	ShimStop      = "shim-stop"      // SIGSTOP of one task's shim, SIGCONT after a pause
	LinkReset     = "link-reset"     // every connection of an agent to the masters closed, new ones refused
	LinkBlackHole = "link-blackhole" // an agent's links to the masters forward nothing, close nothing
	// CheckpointCorrupt is kill -9 of an agent, one running task's
	// checkpoint record overwritten with garbage, and a restart.
	CheckpointCorrupt = "checkpoint-corrupt"
	// DiskFull fills the agent's state dir (a small tmpfs) for a while.
	DiskFull = "disk-full"
	// MasterStop is SIGSTOP of the master (HA: the leader) for seconds to
	// a minute and a half, then SIGCONT.
	MasterStop = "master-stop"
	// FrameworkKill is kill -9 of a framework (failover timeout 3 s)
	// whose task runs, and after its failover timeout a new framework
	// with the same task ID.
	FrameworkKill = "framework-kill"
	// DiskFullRecover fills an agent's state dir while containers run,
	// kills the agent and starts it on the full disk; space returns after
	// a pause.
	DiskFullRecover = "disk-full-recover"
	// LogFlood is a task that writes 64–128 MiB to its stdout.
	LogFlood = "log-flood"
	// EtcdCut stops the leader's links to etcd (agents and frameworks
	// still reach it) and writes to the registry through it.
	EtcdCut = "etcd-cut"
	// EtcdMemberKill is kill -9 of one etcd member, restarted after a
	// pause.
	EtcdMemberKill = "etcd-member-kill"
	// EtcdQuorumLoss is kill -9 of two of the three etcd members,
	// restarted after a pause.
	EtcdQuorumLoss = "etcd-quorum-loss"
)

// AllFaults are the fault kinds, in the order the seed indexes them.
var AllFaults = []string{AgentKill, MasterKill, ShimKill, ShimStop, LinkReset, LinkBlackHole, CheckpointCorrupt, DiskFull,
	MasterStop, FrameworkKill, DiskFullRecover, LogFlood, EtcdCut, EtcdMemberKill, EtcdQuorumLoss}

// HAFaults are the kinds that need HA mode (an etcd store).
var HAFaults = []string{EtcdCut, EtcdMemberKill, EtcdQuorumLoss}

// Applicable are the fault kinds a run with that many masters can
// inject: all of them in HA mode, all but HAFaults with one master.
func Applicable(masters int) []string {
	if masters > 1 {
		return AllFaults
	}
	var out []string
	for _, k := range AllFaults {
		if !slices.Contains(HAFaults, k) {
			out = append(out, k)
		}
	}
	return out
}

// leaderFault reports a kind that takes the leader away (a failover in
// HA mode).
func leaderFault(kind string) bool {
	switch kind {
	case MasterKill, MasterStop, EtcdCut, EtcdQuorumLoss:
		return true
	}
	return false
}

// agentFault reports a kind that takes an agent away from the masters.
func agentFault(kind string) bool {
	switch kind {
	case AgentKill, LinkReset, LinkBlackHole, CheckpointCorrupt, DiskFullRecover:
		return true
	}
	return false
}

// Fault is one injected fault: on Agent (a harness agent name), Target
// (a master or etcd members) or Task (of Framework, for task faults),
// from Start to End (when its cause was lifted: the process restarted,
// the link restored).
type Fault struct {
	Kind      string
	Agent     string
	Target    string
	Task      string
	Framework string
	// Leader: the fault hit the leader of an HA cluster (a failover).
	Leader     bool
	Start, End time.Time
	Pause      time.Duration
}

func (f Fault) String() string {
	s := f.Kind
	if f.Agent != "" {
		s += " agent=" + f.Agent
	}
	if f.Target != "" {
		s += " target=" + f.Target
	}
	if f.Task != "" {
		s += " task=" + f.Task
	}
	if f.Framework != "" {
		s += " framework=" + f.Framework
	}
	if f.Pause > 0 {
		s += " pause=" + f.Pause.String()
	}
	return s
}

// Outcome is how one framework's task ended, as its `brim run` showed.
type Outcome struct {
	Task       string
	Framework  string // its framework's ID ("" if it never subscribed)
	Want       int    // the task's own exit code
	Code       int    // brim run's exit code; -1 if it never exited
	Agent      string // harness agent name the task ran on ("" if unknown)
	Final      Status // the terminal status, if any
	Start, End time.Time
	// Started: the framework saw STARTING or RUNNING. SeenRunning: the
	// harness saw the task's container running.
	Started, SeenRunning bool
	// NoMasters: brim run exited at its start because its etcd://
	// discovery found no master (etcd without quorum, or no master
	// campaigning).
	NoMasters bool
	// Recover is how long after an etcd quorum returns the masters may
	// take to campaign again (the reach bound: session TTL + 2 s).
	Recover time.Duration
}

// Judge says whether an outcome is what the task's command does or what
// the faults that touched it allow (docs/chaos.md has the table):
//
//   - always: FINISHED/FAILED with the command's exit code, brim run
//     exiting with it;
//   - agent-kill, link-reset, link-blackhole, checkpoint-corrupt,
//     disk-full-recover on the task's agent while the task lived: LOST as
//     well (the agent was unreachable past the heartbeat timeout);
//   - shim-kill, shim-stop or checkpoint-corrupt of the task itself: any
//     terminal state but FINISHED with a wrong code;
//   - disk-full or disk-full-recover of the task's agent while the task
//     lived: any terminal state but FINISHED with a wrong code (a launch
//     or a checkpoint write may fail);
//   - a fault that took an HA cluster's leader away (master-kill,
//     master-stop, etcd-cut, etcd-quorum-loss) while the task lived:
//     LOST for a launch that never reached an agent (no STARTING or
//     RUNNING, no container seen): a new leader learns tasks from the
//     agents only;
//   - a framework started with --master etcd://… while an etcd quorum
//     was lost, or within o.Recover after it returned: brim run exiting
//     non-zero at its start, its discovery having found no master;
//   - anything else (master-kill of a single master, framework-kill,
//     log-flood, etcd-member-kill): nothing more.
//
// It returns "" when the outcome is allowed, else why not.
func Judge(o Outcome, faults []Fault) string {
	if why, decided := judgeEnd(o, faults); decided {
		return why
	}
	var touched []string
	for _, f := range faults {
		if f.Start.After(o.End) || f.End.Before(o.Start) {
			continue
		}
		if allows(f, o) {
			return ""
		}
		touched = append(touched, f.String())
	}
	return fmt.Sprintf("task %s: ended %s (%s) %q with brim run exit %d, want exit %d; faults during its life: %v",
		o.Task, o.Final.State, o.Final.Reason, o.Final.Message, o.Code, o.Want, touched)
}

// judgeEnd decides the outcomes that no fault during the task's life
// changes: a brim run that never exited or ended without a terminal state
// (but for a discovery during a quorum loss), an expected end, an exit 0
// for an unexpected one. decided is false for the rest.
func judgeEnd(o Outcome, faults []Fault) (why string, decided bool) {
	if o.Code < 0 {
		return fmt.Sprintf("task %s: brim run never exited", o.Task), true
	}
	if o.Final.State == "" && o.NoMasters && o.Code != 0 {
		for _, f := range faults {
			if f.Kind == EtcdQuorumLoss && !o.Start.Before(f.Start) && !o.Start.After(f.End.Add(o.Recover)) {
				return "", true
			}
		}
	}
	if o.Final.State == "" {
		return fmt.Sprintf("task %s: brim run exited %d without a terminal state", o.Task, o.Code), true
	}
	expected := (o.Want == 0 && o.Final.State == "FINISHED") || (o.Want != 0 && o.Final.State == "FAILED")
	if expected && o.Code == o.Want {
		return "", true
	}
	if o.Code == 0 {
		return fmt.Sprintf("task %s: brim run exited 0 after %s, want %d", o.Task, o.Final.State, o.Want), true
	}
	return "", false
}

// allows reports whether fault f, during the task's life, allows its
// unexpected end (Judge's table).
func allows(f Fault, o Outcome) bool {
	onAgent := o.Agent == "" || f.Agent == o.Agent
	ownTask := f.Task == o.Task && (f.Framework == "" || o.Framework == "" || f.Framework == o.Framework)
	switch {
	case (f.Kind == ShimKill || f.Kind == ShimStop || f.Kind == CheckpointCorrupt) && ownTask && o.Final.State != "FINISHED":
		return true
	case (f.Kind == DiskFull || f.Kind == DiskFullRecover) && onAgent && o.Final.State != "FINISHED":
		return true
	case agentFault(f.Kind) && onAgent && o.Final.State == "LOST":
		return true
	case leaderFault(f.Kind) && f.Leader && o.Final.State == "LOST" && !o.Started && !o.SeenRunning:
		return true
	}
	return false
}

// TimedStatus is a status line and when the harness read it.
type TimedStatus struct {
	Status
	At time.Time
}

// TaskView is what the harness knows of one framework's task, for
// CheckForeign.
type TaskView struct {
	Task, Framework string
	Start           time.Time     // brim run started
	Sleep           time.Duration // the command sleeps this long, then exits
	Ends            []TimedStatus // the terminal states it printed
	// LastSeenRunning is when the last container listing that showed the
	// task's container (of this framework) running began; zero: never.
	LastSeenRunning time.Time
}

// ForeignSlack is how long after a framework printed its task's end the
// task's container may still be listed as running (the agent sends the
// status once the container has exited; its listing may lag).
const ForeignSlack = 2 * time.Second

// exitedMessage is how the agent reports a command's own exit.
const exitedMessage = "command exited with code "

// CheckForeign checks that a framework saw no other framework's update
// for its task: a FINISHED or FAILED that reports the command's own exit
// ("command exited with code N") cannot be printed sooner than the
// command's sleep after brim run started, nor while the task's own
// container still runs (later than ForeignSlack after it was printed).
// Either means the update was another task's (one with the same ID, of
// an earlier framework). It returns one line per violation.
func CheckForeign(v TaskView) []string {
	var bad []string
	for _, e := range v.Ends {
		if !strings.HasPrefix(e.Message, exitedMessage) {
			continue
		}
		if took := e.At.Sub(v.Start); took < v.Sleep {
			bad = append(bad, fmt.Sprintf("task %s of framework %s: %s %q printed %v after brim run started, but its command sleeps %v: another task's update",
				v.Task, v.Framework, e.State, e.Message, took.Round(time.Millisecond), v.Sleep))
		}
		if !v.LastSeenRunning.IsZero() && v.LastSeenRunning.After(e.At.Add(ForeignSlack)) {
			bad = append(bad, fmt.Sprintf("task %s of framework %s: %s %q printed, but its container still ran %v later: another task's update",
				v.Task, v.Framework, e.State, e.Message, v.LastSeenRunning.Sub(e.At).Round(time.Millisecond)))
		}
	}
	return bad
}

// Reach is one client (a framework or an agent) after an election: when
// the new leader first listed it connected, and when it left (exited)
// if it did.
type Reach struct {
	Name    string
	Agent   string // the harness agent name, for an agent
	Reached time.Time
	Left    time.Time
	// Down: the agent's process was not running at some point of the
	// watch (killed by a fault, or exited: a violation of its own).
	Down bool
}

// reachWindowBefore is how long before an election an agent fault still
// excuses its agent: its reconnect backoff (up to 5 s) outlasts the
// fault.
const reachWindowBefore = 5 * time.Second

// CheckReach checks that every client reached leader (elected at e.At)
// within bound. An election is not judged when the next one (at next,
// zero: none) or a fault that takes the leader away comes before
// e.At+bound; a client is not judged when it left before then, or (an
// agent) when a fault cut it from the masters around then or its process
// was down. It returns
// one line per client that was late or never seen.
func CheckReach(e Election, leader string, next time.Time, bound time.Duration, faults []Fault, clients []Reach) []string {
	deadline := e.At.Add(bound)
	if !next.IsZero() && next.Before(deadline) {
		return nil
	}
	for _, f := range faults {
		if leaderFault(f.Kind) && !f.Start.Before(e.At) && f.Start.Before(deadline) {
			return nil
		}
	}
	var bad []string
clients:
	for _, c := range clients {
		if !c.Reached.IsZero() && !c.Reached.After(deadline) {
			continue
		}
		if !c.Left.IsZero() && !c.Left.After(deadline) || c.Down {
			continue
		}
		if c.Agent != "" {
			for _, f := range faults {
				if agentFault(f.Kind) && f.Agent == c.Agent && !f.End.Before(e.At.Add(-reachWindowBefore)) && !f.Start.After(deadline) {
					continue clients
				}
			}
		}
		if c.Reached.IsZero() {
			bad = append(bad, fmt.Sprintf("%s never reached the leader %s elected at %s (bound %v)", c.Name, leader, e.At.Format("15:04:05.000"), bound))
			continue
		}
		bad = append(bad, fmt.Sprintf("%s reached the leader %s %v after its election, bound %v", c.Name, leader, c.Reached.Sub(e.At).Round(10*time.Millisecond), bound))
	}
	return bad
}

// CheckLogCap checks a container's log files (name → size) against the
// agent's cap (total bytes over every rotated file); "" if they fit.
func CheckLogCap(sizes map[string]int64, limit int64) string {
	var total int64
	var names []string
	for n, s := range sizes {
		total += s
		names = append(names, fmt.Sprintf("%s %d", n, s))
	}
	if total <= limit {
		return ""
	}
	sort.Strings(names)
	return fmt.Sprintf("logs hold %d bytes, over the cap of %d (%s)", total, limit, strings.Join(names, ", "))
}

// sameScalars compares two resource sets' totals per scalar name,
// whatever their roles, reservations or revocability.
// endedSince is, per scalar, what the agent had in use when it computed
// its estimate beyond what its revocable tasks hold now in the master
// (used less offers): the share of tasks that ended since; never
// negative.
func endedSince(inUse, used, offers resources.Resources) resources.Resources {
	var out resources.Resources
	for _, r := range inUse {
		if r.Type != resources.Scalar {
			continue
		}
		if v := r.Scalar - (used.Scalar(r.Name) - offers.Scalar(r.Name)); v > 0 {
			r.Scalar = v
			out = out.Add(resources.Resources{r})
		}
	}
	return out
}

func sameScalars(a, b resources.Resources) bool {
	names := map[string]bool{}
	for _, r := range append(append(resources.Resources{}, a...), b...) {
		if r.Type == resources.Scalar {
			names[r.Name] = true
		}
	}
	for n := range names {
		if a.Scalar(n) != b.Scalar(n) {
			return false
		}
	}
	return true
}
