package masterlinkpb

// The values of TaskStatus.reason, one per TaskReason: the proto enum is
// the one definition, these are its names as the wire carries them.
// master, agent/taskrunner and frameworks use these (or alias them), never
// string literals. (TaskReason_name rather than String(): package vars are
// initialised before the generated init that String needs.)
var (
	ReasonCommandExited             = TaskReason_name[int32(TaskReason_COMMAND_EXITED)]
	ReasonContainerLimitationMemory = TaskReason_name[int32(TaskReason_CONTAINER_LIMITATION_MEMORY)]
	ReasonKilledByFramework         = TaskReason_name[int32(TaskReason_KILLED_BY_FRAMEWORK)]
	ReasonContainerLost             = TaskReason_name[int32(TaskReason_CONTAINER_LOST)]
	ReasonInvalidResources          = TaskReason_name[int32(TaskReason_INVALID_RESOURCES)]
	// ReasonContainerPreempted: a QoS correction killed the task's
	// revocable container.
	ReasonContainerPreempted = TaskReason_name[int32(TaskReason_CONTAINER_PREEMPTED)]
	// ReasonResourcesUpdated: the agent resized the task's container; the
	// status's resources field holds the task's new resources.
	ReasonResourcesUpdated = TaskReason_name[int32(TaskReason_RESOURCES_UPDATED)]
	// ReasonResourcesUpdateFailed: the agent could not apply the update;
	// the task keeps running with the resources the status names, and the
	// message says why.
	ReasonResourcesUpdateFailed = TaskReason_name[int32(TaskReason_RESOURCES_UPDATE_FAILED)]
	ReasonAgentUnreachable      = TaskReason_name[int32(TaskReason_AGENT_UNREACHABLE)]
	ReasonAgentRemoved          = TaskReason_name[int32(TaskReason_AGENT_REMOVED)]
	ReasonTaskUnknownOnAgent    = TaskReason_name[int32(TaskReason_TASK_UNKNOWN_ON_AGENT)]
	ReasonFrameworkRemoved      = TaskReason_name[int32(TaskReason_FRAMEWORK_REMOVED)]
	ReasonReconciliation        = TaskReason_name[int32(TaskReason_RECONCILIATION)]
	ReasonInvalidTask           = TaskReason_name[int32(TaskReason_INVALID_TASK)]
	// ReasonTaskUnauthorized: the master refused the task at ACCEPT
	// (TASK_ERROR): its principal may not run it as asked (run_as_root).
	ReasonTaskUnauthorized = TaskReason_name[int32(TaskReason_TASK_UNAUTHORIZED)]
	// ReasonContainerLimitationDisk: the task's read-write image root
	// wrote more than its disk; the agent killed it.
	ReasonContainerLimitationDisk = TaskReason_name[int32(TaskReason_CONTAINER_LIMITATION_DISK)]
	// ReasonLaunchFailed: the agent could not launch the task
	// (TASK_FAILED); the message says why.
	ReasonLaunchFailed = TaskReason_name[int32(TaskReason_LAUNCH_FAILED)]
)

// Terminal reports whether s ends a task (FINISHED, FAILED, KILLED, LOST,
// GONE, ERROR). It is the one definition: the master, the task runner, brim run
// and the examples call it.
func (s TaskState) Terminal() bool {
	switch s {
	case TaskState_TASK_FINISHED, TaskState_TASK_FAILED, TaskState_TASK_KILLED,
		TaskState_TASK_LOST, TaskState_TASK_GONE, TaskState_TASK_ERROR:
		return true
	}
	return false
}
