package master

import "strconv"

// TaskState is a task's state as the domain keeps it. Its numbers are
// those of masterlinkpb.TaskState, the vocabulary agents and frameworks
// speak, so that the transport converts by number; TestTaskStateMatchesPB
// checks names, numbers and terminal states against the proto.
type TaskState int32

const (
	TaskUnknown TaskState = iota
	TaskStaging
	TaskStarting
	TaskRunning
	TaskFinished
	TaskFailed
	TaskKilled
	TaskLost
	TaskGone
	TaskKilling
	TaskError
)

var taskStateNames = [...]string{
	TaskUnknown: "UNKNOWN", TaskStaging: "STAGING", TaskStarting: "STARTING", TaskRunning: "RUNNING",
	TaskFinished: "FINISHED", TaskFailed: "FAILED", TaskKilled: "KILLED", TaskLost: "LOST",
	TaskGone: "GONE", TaskKilling: "KILLING", TaskError: "ERROR",
}

// String is the state's short name ("RUNNING"), as State shows it; the
// number for a state this master does not know.
func (s TaskState) String() string {
	if s >= 0 && int(s) < len(taskStateNames) {
		return taskStateNames[s]
	}
	return strconv.Itoa(int(s))
}

// Terminal reports whether a task in state s has ended.
func (s TaskState) Terminal() bool {
	switch s {
	case TaskFinished, TaskFailed, TaskKilled, TaskLost, TaskGone, TaskError:
		return true
	}
	return false
}
