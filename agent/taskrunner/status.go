package taskrunner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/internal/exitstatus"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/qos"
	"github.com/brimnode/brim/resources"
)

// Labels the runner puts on the containers it launches for the master;
// they let a restarted agent report its tasks.
const (
	LabelTask      = agent.LabelTask
	LabelFramework = "brim.framework"
	LabelResources = "brim.resources"
	LabelTaskName  = "brim.task-name"
)

// ContainerName is the name of the container of framework fw's task id:
// the task ID, a dot and 8 hex digits of the framework ID's SHA-256
// ("web-1.3fa2c1d0"), so that two frameworks' tasks of one ID — a
// finished one's container is kept for a while — never collide. A task
// ID too long for a name (63 bytes) is cut, and the hash then covers it
// too. Containers of older agents are named after the task ID alone; the
// runner finds every container by its labels, so they keep working.
func ContainerName(fw, id string) string {
	h := sha256.Sum256([]byte(fw))
	name := id + "." + hex.EncodeToString(h[:4])
	if len(name) <= 63 {
		return name
	}
	h = sha256.Sum256([]byte(fw + "/" + id))
	return strings.TrimRight(id[:45], ".-_") + "." + hex.EncodeToString(h[:8])
}

// Status reasons of the agent side: names of the proto's TaskReason
// (masterlinkpb/reasons.go), the one definition.
var (
	ReasonCommandExited  = pb.ReasonCommandExited
	ReasonMemoryLimit    = pb.ReasonContainerLimitationMemory
	ReasonKilled         = pb.ReasonKilledByFramework
	ReasonContainerLost  = pb.ReasonContainerLost
	ReasonInvalidTaskRes = pb.ReasonInvalidResources
	// ReasonPreempted: a QoS correction killed the task's revocable
	// container (the container's exit reason, qos.ReasonPreempted, is the
	// same string).
	ReasonPreempted = pb.ReasonContainerPreempted
	// ReasonDiskLimit: the task's read-write image root wrote more than
	// its disk (the container's exit reason is agent.ReasonDiskLimit).
	ReasonDiskLimit = pb.ReasonContainerLimitationDisk
)

// agentResourcesOf turns a task's resources into the agent's limits.
func agentResourcesOf(res resources.Resources) (agent.Resources, bool, error) {
	rev := !res.Revocable().IsEmpty()
	if rev && !res.NonRevocable().IsEmpty() {
		return agent.Resources{}, false, fmt.Errorf("task mixes revocable and non-revocable resources")
	}
	flat := res.Flatten()
	out := agent.Resources{MilliCPUs: int64(flat.CPUs()), MemMiB: int64(flat.Mem()) / 1000, NetMbit: int64(flat.NetBandwidth()) / 1000,
		DiskMiB: int64(flat.Disk()) / 1000}
	if out.MilliCPUs <= 0 || out.MemMiB <= 0 {
		return agent.Resources{}, false, fmt.Errorf("task needs cpus and mem, has %s", res)
	}
	return out, rev, nil
}

// taskEnd is what a container's exit reason means for its task.
type taskEnd struct {
	State  pb.TaskState
	Reason string // a masterlinkpb reason
	// Command: the command ended by itself, and its exit code says how:
	// FINISHED for 0, State otherwise, and the message names the code or
	// the signal.
	Command bool
	// Code: the exit code is the command's (set in the status); without
	// it the code is the runtime's cleanup (a SIGKILL), not the task's.
	Code bool
	// Message is the status message; empty: Prefix and the exit's own.
	Message, Prefix string
}

// taskEnds maps every exit reason (internal/exitstatus, the one
// vocabulary) to its task's end: the one table, tested to cover every
// reason. Mesos reports a preempted task LOST; the agent knows its
// container is gone, so brim says KILLED, with Mesos's reason. A shim that
// died or hung is the runtime losing the task (Mesos:
// REASON_EXECUTOR_TERMINATED): its SIGKILL is the agent's cleanup, not
// the command's end.
var taskEnds = map[exitstatus.Reason]taskEnd{
	exitstatus.ReasonNone:             {State: pb.TaskState_TASK_FAILED, Reason: ReasonCommandExited, Command: true, Code: true},
	exitstatus.ReasonKilled:           {State: pb.TaskState_TASK_FAILED, Reason: ReasonCommandExited, Command: true, Code: true},
	exitstatus.ReasonMemoryLimit:      {State: pb.TaskState_TASK_FAILED, Reason: ReasonMemoryLimit, Code: true, Message: "memory limit exceeded"},
	exitstatus.ReasonPreempted:        {State: pb.TaskState_TASK_KILLED, Reason: ReasonPreempted, Code: true},
	exitstatus.ReasonLost:             {State: pb.TaskState_TASK_LOST, Reason: ReasonContainerLost},
	exitstatus.ReasonShimLost:         {State: pb.TaskState_TASK_FAILED, Reason: ReasonContainerLost, Prefix: runtimeLost},
	exitstatus.ReasonShimUnresponsive: {State: pb.TaskState_TASK_FAILED, Reason: ReasonContainerLost, Prefix: runtimeLost},
	exitstatus.ReasonDiskLimit:        {State: pb.TaskState_TASK_FAILED, Reason: ReasonDiskLimit, Code: true, Prefix: "disk limit exceeded: "},
	// The agent refuses to restart a task's container: a record carrying
	// it (edited by hand, or from a later agent) is a runtime failure.
	exitstatus.ReasonRestartFailed: {State: pb.TaskState_TASK_FAILED, Reason: ReasonContainerLost, Prefix: runtimeLost},
}

// runtimeLost starts the message of a task whose shim died or hung.
const runtimeLost = "the container runtime lost the task: "

// finalStatus maps an exited container to the task's final status through
// taskEnds; killed says the framework asked for the kill.
func finalStatus(c *agent.Container, killed bool) masterlink.Status {
	st := masterlink.Status{TaskID: c.Labels[LabelTask], FrameworkID: c.Labels[LabelFramework]}
	e := c.Exit
	if e == nil {
		st.State, st.Reason, st.Message = pb.TaskState_TASK_LOST, ReasonContainerLost, "exit status unknown"
		return st
	}
	code := e.Code
	if killed {
		st.State, st.Reason, st.Message, st.ExitCode = pb.TaskState_TASK_KILLED, ReasonKilled, "killed", &code
		return st
	}
	reason := e.Reason
	if e.OOMKilled && (reason == exitstatus.ReasonNone || reason == exitstatus.ReasonKilled) {
		reason = exitstatus.ReasonMemoryLimit // a record from before the shim set the reason
	}
	end, ok := taskEnds[reason]
	if !ok {
		// A reason of a newer shim or agent: say so, claim nothing.
		st.State = pb.TaskState_TASK_FAILED
		st.Message = fmt.Sprintf("the container ended with exit reason %q, which this agent does not know (code %d)", reason, e.Code)
		if e.Message != "" {
			st.Message += ": " + e.Message
		}
		return st
	}
	st.State, st.Reason = end.State, end.Reason
	if end.Code {
		st.ExitCode = &code
	}
	switch {
	case end.Command:
		st.Message = commandMessage(e)
		if e.Code == 0 && e.Signal == 0 {
			st.State = pb.TaskState_TASK_FINISHED
		} else if e.Message != "" {
			st.Message += ": " + e.Message
		}
	case end.Message != "":
		st.Message = end.Message
	default:
		st.Message = end.Prefix + e.Message
	}
	return st
}

// commandMessage says how a command ended by itself.
func commandMessage(e *agent.ExitStatus) string {
	if e.Signal != 0 {
		return fmt.Sprintf("command killed by signal %d", e.Signal)
	}
	return fmt.Sprintf("command exited with code %d", e.Code)
}

// describeCorrection renders a correction's trigger for a framework.
func describeCorrection(c qos.Correction) string {
	t := c.Trigger
	s := "trigger " + t.Signal
	if t.Victim != "" {
		s += " of " + t.Victim
	}
	s += fmt.Sprintf(" %.4g", t.Value)
	if t.Baseline != 0 {
		s += fmt.Sprintf(" (baseline %.4g, threshold %.4g)", t.Baseline, t.Threshold)
	} else {
		s += fmt.Sprintf(" (threshold %.4g)", t.Threshold)
	}
	if c.Reason != "" {
		s += ": " + c.Reason
	}
	return s
}
