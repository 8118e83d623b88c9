package masterlinkpb

// Status reasons of a task resource update (TaskStatus.reason), set by the
// agent side and read by the master and frameworks.
const (
	// ReasonResourcesUpdated: the agent resized the task's container; the
	// status's resources field holds the task's new resources.
	ReasonResourcesUpdated = "RESOURCES_UPDATED"
	// ReasonResourcesUpdateFailed: the agent could not apply the update;
	// the task keeps running with the resources the status names, and the
	// message says why.
	ReasonResourcesUpdateFailed = "RESOURCES_UPDATE_FAILED"
)

// Terminal reports whether s ends a task (FINISHED, FAILED, KILLED, LOST,
// GONE).
func (s TaskState) Terminal() bool {
	switch s {
	case TaskState_TASK_FINISHED, TaskState_TASK_FAILED, TaskState_TASK_KILLED,
		TaskState_TASK_LOST, TaskState_TASK_GONE:
		return true
	}
	return false
}
