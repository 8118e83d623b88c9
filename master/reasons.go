package master

// Task status reasons the master sets or reads itself: the names of the
// proto's TaskReason as the wire carries them. masterlinkpb/reasons.go
// is the one definition; these are held equal to it by
// TestReasonsMatchPB (master/transport), so that the domain links no
// generated code.
const (
	ReasonAgentUnreachable = "AGENT_UNREACHABLE"
	ReasonAgentRemoved     = "AGENT_REMOVED"
	ReasonUnknownOnAgent   = "TASK_UNKNOWN_ON_AGENT"
	ReasonFrameworkRemoved = "FRAMEWORK_REMOVED"
	ReasonReconciliation   = "RECONCILIATION"
	ReasonInvalidTask      = "INVALID_TASK"
	ReasonTaskUnauthorized = "TASK_UNAUTHORIZED"
	// ReasonPreempted: the master preempted the task (demands.go).
	ReasonPreempted = "CONTAINER_PREEMPTED"

	// The agent's answers to a resource update (update.go).
	ReasonResourcesUpdated      = "RESOURCES_UPDATED"
	ReasonResourcesUpdateFailed = "RESOURCES_UPDATE_FAILED"
)
