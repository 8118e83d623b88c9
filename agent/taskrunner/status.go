package taskrunner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/qos"
	"github.com/brimnode/brim/resources"
)

// Labels the runner puts on the containers it launches for the master;
// they let a restarted agent report its tasks.
const (
	LabelTask      = "brim.task"
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
)

// reasonShimLost is the exit reason the containerizer records when a
// container's shim died without recording the exit status
// (executor.ReasonShimLost).
const reasonShimLost = "shim-lost"

// agentResourcesOf turns a task's resources into the agent's limits.
func agentResourcesOf(res resources.Resources) (agent.Resources, bool, error) {
	rev := !res.Revocable().IsEmpty()
	if rev && !res.NonRevocable().IsEmpty() {
		return agent.Resources{}, false, fmt.Errorf("task mixes revocable and non-revocable resources")
	}
	flat := res.Flatten()
	out := agent.Resources{MilliCPUs: int64(flat.CPUs()), MemMiB: int64(flat.Mem()) / 1000, NetMbit: int64(flat.NetBandwidth()) / 1000}
	if out.MilliCPUs <= 0 || out.MemMiB <= 0 {
		return agent.Resources{}, false, fmt.Errorf("task needs cpus and mem, has %s", res)
	}
	return out, rev, nil
}

// finalStatus maps an exited container to the task's final status; killed
// says the framework asked for the kill.
func finalStatus(c *agent.Container, killed bool) masterlink.Status {
	st := masterlink.Status{TaskID: c.Labels[LabelTask], FrameworkID: c.Labels[LabelFramework], State: pb.TaskState_TASK_FAILED, Reason: ReasonCommandExited}
	e := c.Exit
	if e == nil {
		st.State, st.Reason, st.Message = pb.TaskState_TASK_LOST, ReasonContainerLost, "exit status unknown"
		return st
	}
	code := e.Code
	st.ExitCode = &code
	switch {
	case killed:
		st.State, st.Reason, st.Message = pb.TaskState_TASK_KILLED, ReasonKilled, "killed"
	case e.Reason == qos.ReasonPreempted:
		// Mesos reports TASK_LOST here; the agent knows the container is
		// gone, so brim says KILLED, with Mesos's reason.
		st.State, st.Reason, st.Message = pb.TaskState_TASK_KILLED, ReasonPreempted, e.Message
	case e.OOMKilled || e.Reason == agent.ReasonMemoryLimit:
		st.Reason, st.Message = ReasonMemoryLimit, "memory limit exceeded"
	case e.Reason == agent.ReasonLost:
		st.State, st.Reason, st.Message, st.ExitCode = pb.TaskState_TASK_LOST, ReasonContainerLost, e.Message, nil
	case e.Reason == reasonShimLost:
		// The runtime lost the task (Mesos: REASON_EXECUTOR_TERMINATED):
		// the SIGKILL and its code are the agent's cleanup, not the
		// command's end.
		st.Reason, st.ExitCode = ReasonContainerLost, nil
		st.Message = "the container runtime lost the task: " + e.Message
		return st
	case e.Code == 0 && e.Signal == 0:
		st.State, st.Message = pb.TaskState_TASK_FINISHED, "command exited with code 0"
	case e.Signal != 0:
		st.Message = fmt.Sprintf("command killed by signal %d", e.Signal)
	default:
		st.Message = fmt.Sprintf("command exited with code %d", e.Code)
	}
	if e.Message != "" && st.State == pb.TaskState_TASK_FAILED {
		st.Message += ": " + e.Message
	}
	return st
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
