package chaos

import (
	"errors"
	"fmt"
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

// terminalState reports whether a task state name (as /state and brim
// run print it, without TASK_) is terminal.
func terminalState(s string) bool {
	switch s {
	case "FINISHED", "FAILED", "KILLED", "LOST", "GONE", "ERROR", "DROPPED":
		return true
	}
	return false
}

// LiveTasks are the master's tasks not in a terminal state, by ID.
func (st MasterState) LiveTasks() map[string]string {
	out := map[string]string{}
	for _, t := range st.Tasks {
		if !terminalState(t.State) {
			out[t.ID] = t.AgentID
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
// with nothing after it.
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
		last[s.Task] = s
		ended[s.Task] = terminalState(s.State)
	}
	return bad
}

// Fault kinds.
const (
	AgentKill     = "agent-kill"     // kill -9 of an agent, restarted after a pause
	MasterKill    = "master-kill"    // kill -9 of the master, restarted after a pause
	ShimKill      = "shim-kill"      // kill -9 of one task's shim
	ShimStop      = "shim-stop"      // SIGSTOP of one task's shim, SIGCONT after a pause
	LinkReset     = "link-reset"     // every connection of an agent's link closed, new ones refused
	LinkBlackHole = "link-blackhole" // an agent's link forwards nothing, closes nothing
	// CheckpointCorrupt is kill -9 of an agent, one running task's
	// checkpoint record overwritten with garbage, and a restart.
	CheckpointCorrupt = "checkpoint-corrupt"
	// DiskFull fills the agent's state dir (a small tmpfs) for a while.
	DiskFull = "disk-full"
)

// Fault is one injected fault: on Agent (a harness agent name; empty for
// the master) or Task (for shim faults), from Start to End (when its cause
// was lifted: the process restarted, the link restored).
type Fault struct {
	Kind       string
	Agent      string
	Task       string
	Start, End time.Time
	Pause      time.Duration
}

func (f Fault) String() string {
	s := f.Kind
	if f.Agent != "" {
		s += " agent=" + f.Agent
	}
	if f.Task != "" {
		s += " task=" + f.Task
	}
	if f.Pause > 0 {
		s += " pause=" + f.Pause.String()
	}
	return s
}

// Outcome is how one framework's task ended, as its `brim run` showed.
type Outcome struct {
	Task       string
	Want       int    // the task's own exit code
	Code       int    // brim run's exit code; -1 if it never exited
	Agent      string // harness agent name the task ran on ("" if unknown)
	Final      Status // the terminal status, if any
	Start, End time.Time
}

// Judge says whether an outcome is what the task's command does or what
// the faults that touched it allow (docs/chaos.md has the table):
//
//   - always: FINISHED/FAILED with the command's exit code, brim run
//     exiting with it;
//   - agent-kill, link-reset, link-blackhole, checkpoint-corrupt on the
//     task's agent while the task lived: LOST as well (the agent was
//     unreachable past the heartbeat timeout);
//   - shim-kill, shim-stop or checkpoint-corrupt of the task itself: any
//     terminal state but FINISHED with a wrong code;
//   - disk-full of the task's agent while the task lived: any terminal
//     state but FINISHED with a wrong code (a launch or a checkpoint
//     write may fail);
//   - master-kill: nothing more (the master must fail over without losing
//     tasks).
//
// It returns "" when the outcome is allowed, else why not.
func Judge(o Outcome, faults []Fault) string {
	if o.Code < 0 {
		return fmt.Sprintf("task %s: brim run never exited", o.Task)
	}
	if o.Final.State == "" {
		return fmt.Sprintf("task %s: brim run exited %d without a terminal state", o.Task, o.Code)
	}
	expected := (o.Want == 0 && o.Final.State == "FINISHED") || (o.Want != 0 && o.Final.State == "FAILED")
	if expected && o.Code == o.Want {
		return ""
	}
	if o.Code == 0 {
		return fmt.Sprintf("task %s: brim run exited 0 after %s, want %d", o.Task, o.Final.State, o.Want)
	}
	var touched []string
	for _, f := range faults {
		if f.Start.After(o.End) || f.End.Before(o.Start) {
			continue
		}
		switch f.Kind {
		case ShimKill, ShimStop, CheckpointCorrupt:
			if f.Task == o.Task && o.Final.State != "FINISHED" {
				return ""
			}
			if f.Kind == CheckpointCorrupt && (o.Agent == "" || f.Agent == o.Agent) && o.Final.State == "LOST" {
				return ""
			}
		case DiskFull:
			if (o.Agent == "" || f.Agent == o.Agent) && o.Final.State != "FINISHED" {
				return ""
			}
		case AgentKill, LinkReset, LinkBlackHole:
			if (o.Agent == "" || f.Agent == o.Agent) && o.Final.State == "LOST" {
				return ""
			}
		}
		touched = append(touched, f.String())
	}
	return fmt.Sprintf("task %s: ended %s (%s) %q with brim run exit %d, want exit %d; faults during its life: %v",
		o.Task, o.Final.State, o.Final.Reason, o.Final.Message, o.Code, o.Want, touched)
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
