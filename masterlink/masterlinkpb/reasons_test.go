package masterlinkpb

import "testing"

// The reason strings are wire format: frameworks and older peers compare
// them. Renaming a TaskReason value would change them; this catches it.
func TestReasonWireNames(t *testing.T) {
	for got, want := range map[string]string{
		ReasonCommandExited:             "COMMAND_EXITED",
		ReasonContainerLimitationMemory: "CONTAINER_LIMITATION_MEMORY",
		ReasonKilledByFramework:         "KILLED_BY_FRAMEWORK",
		ReasonContainerLost:             "CONTAINER_LOST",
		ReasonInvalidResources:          "INVALID_RESOURCES",
		ReasonContainerPreempted:        "CONTAINER_PREEMPTED",
		ReasonResourcesUpdated:          "RESOURCES_UPDATED",
		ReasonResourcesUpdateFailed:     "RESOURCES_UPDATE_FAILED",
		ReasonAgentUnreachable:          "AGENT_UNREACHABLE",
		ReasonAgentRemoved:              "AGENT_REMOVED",
		ReasonTaskUnknownOnAgent:        "TASK_UNKNOWN_ON_AGENT",
		ReasonFrameworkRemoved:          "FRAMEWORK_REMOVED",
		ReasonReconciliation:            "RECONCILIATION",
		ReasonInvalidTask:               "INVALID_TASK",
		ReasonTaskUnauthorized:          "TASK_UNAUTHORIZED",
		ReasonContainerLimitationDisk:   "CONTAINER_LIMITATION_DISK",
		ReasonLaunchFailed:              "LAUNCH_FAILED",
	} {
		if got != want {
			t.Errorf("reason %q, want %q", got, want)
		}
	}
	// Every named reason has its Go name above (the enum has 17 plus the
	// unspecified zero).
	if n := len(TaskReason_name); n != 18 {
		t.Errorf("TaskReason has %d values; name the new ones in reasons.go and here", n)
	}
}

func TestTerminal(t *testing.T) {
	for s := range TaskState_name {
		st := TaskState(s)
		want := st == TaskState_TASK_FINISHED || st == TaskState_TASK_FAILED || st == TaskState_TASK_KILLED ||
			st == TaskState_TASK_LOST || st == TaskState_TASK_GONE || st == TaskState_TASK_ERROR
		if st.Terminal() != want {
			t.Errorf("%s.Terminal() = %v", st, !want)
		}
	}
}
