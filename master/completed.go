package master

// Defaults of the completed history (Mesos's max_completed_tasks_per_framework
// and max_completed_frameworks figures).
const (
	DefaultMaxCompletedTasks      = 1000
	DefaultMaxCompletedFrameworks = 50
)

// completed is the bounded history of tasks and frameworks that left the
// master, newest last, as State shows them: a task whose terminal update
// its framework acknowledged (or that the master declared LOST), a task an
// agent reports as ended and acknowledged, a removed framework. A
// completed task's ID is free again. Not safe for concurrent use: the
// Master holds its lock around it.
type completed struct {
	maxTasks, maxFrameworks int
	tasks                   []TaskState
	keys                    map[completedKey]int // task → how many entries of tasks
	frameworks              []FrameworkState
}

// completedKey tells apart tasks of one ID run by different frameworks.
type completedKey struct{ fw, id string }

func newCompleted(maxTasks, maxFrameworks int) *completed {
	return &completed{maxTasks: maxTasks, maxFrameworks: maxFrameworks, keys: map[completedKey]int{}}
}

// has reports whether the history holds the task.
func (c *completed) has(fw, id string) bool { return c.keys[completedKey{fw, id}] > 0 }

// addTask appends a task, dropping the oldest beyond the limit.
func (c *completed) addTask(ts TaskState) {
	if c.maxTasks <= 0 {
		return
	}
	c.tasks = append(c.tasks, ts)
	c.keys[completedKey{ts.FrameworkID, ts.ID}]++
	for len(c.tasks) > c.maxTasks {
		old := c.tasks[0]
		k := completedKey{old.FrameworkID, old.ID}
		if c.keys[k]--; c.keys[k] <= 0 {
			delete(c.keys, k)
		}
		c.tasks[0] = TaskState{}
		c.tasks = c.tasks[1:]
	}
}

// addFramework appends a removed framework, dropping the oldest beyond the
// limit.
func (c *completed) addFramework(fs FrameworkState) {
	if c.maxFrameworks <= 0 {
		return
	}
	c.frameworks = append(c.frameworks, fs)
	if n := len(c.frameworks) - c.maxFrameworks; n > 0 {
		c.frameworks = append([]FrameworkState(nil), c.frameworks[n:]...)
	}
}

// taskStateOf renders a task for State.
func taskStateOf(t *taskEntry) TaskState {
	ts := TaskState{ID: t.info.id, Name: t.info.name, FrameworkID: t.fw, AgentID: t.agent, State: t.state.String(), Resources: t.res.String(),
		Image: t.info.image}
	if t.status != nil {
		ts.Reason, ts.Message = t.status.reason, t.status.message
		if t.status.hasExitCode {
			code := t.status.exitCode
			ts.ExitCode = &code
		}
	}
	return ts
}

// completeReportLocked records in the history a terminal task an agent
// reports that the master does not track (after a master restart), once,
// with its end as the agent kept it (reason, message, exit code: before,
// a restart lost them).
func (m *Master) completeReportLocked(agentID string, rep taskReport) {
	if m.completed.has(rep.framework, rep.info.id) {
		return
	}
	m.completed.addTask(TaskState{ID: rep.info.id, Name: rep.info.name, FrameworkID: rep.framework, AgentID: agentID,
		State: rep.state.String(), Resources: rep.resources, Reason: rep.reason, Message: rep.message, ExitCode: rep.exitCode})
}

// terminalOrLost is the state a task leaves the master in: its own when
// terminal, else the LOST its removal means.
func terminalOrLost(s taskState) taskState {
	if terminal(s) {
		return s
	}
	return taskLost
}
