package master

import "strconv"

// taskState is a task's state as the domain keeps it. Its numbers are
// those of masterlinkpb.TaskState, the vocabulary agents and frameworks
// speak, so that convert.go converts by number; TestTaskStateMatchesPB
// checks names, numbers and terminal states against the proto.
type taskState int32

const (
	taskUnknown taskState = iota
	taskStaging
	taskStarting
	taskRunning
	taskFinished
	taskFailed
	taskKilled
	taskLost
	taskGone
	taskKilling
	taskError
)

var taskStateNames = [...]string{
	taskUnknown: "UNKNOWN", taskStaging: "STAGING", taskStarting: "STARTING", taskRunning: "RUNNING",
	taskFinished: "FINISHED", taskFailed: "FAILED", taskKilled: "KILLED", taskLost: "LOST",
	taskGone: "GONE", taskKilling: "KILLING", taskError: "ERROR",
}

// String is the state's short name ("RUNNING"), as State shows it; the
// number for a state this master does not know.
func (s taskState) String() string {
	if s >= 0 && int(s) < len(taskStateNames) {
		return taskStateNames[s]
	}
	return strconv.Itoa(int(s))
}

// terminal reports whether a task in state s has ended.
func (s taskState) terminal() bool {
	switch s {
	case taskFinished, taskFailed, taskKilled, taskLost, taskGone, taskError:
		return true
	}
	return false
}
