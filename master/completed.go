package master

import "github.com/brimnode/brim/master/api"

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
	tasks                   []api.TaskState
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
func (c *completed) addTask(ts api.TaskState) {
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
		c.tasks[0] = api.TaskState{}
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

// hasFramework reports whether framework id is in the history: it was
// removed, and not so long ago that the history forgot it.
func (c *completed) hasFramework(id string) bool {
	for _, f := range c.frameworks {
		if f.ID == id {
			return true
		}
	}
	return false
}

// taskStateOf renders a task for State.
func taskStateOf(t *taskEntry) api.TaskState {
	ts := api.TaskState{ID: t.info.ID, Name: t.info.Name, FrameworkID: t.fw, AgentID: t.agent, State: t.state.String(), Resources: t.res.String(),
		Image: t.info.Image}
	if t.status != nil {
		ts.Reason, ts.Message = t.status.Reason, t.status.Message
		if t.status.HasExitCode {
			code := t.status.ExitCode
			ts.ExitCode = &code
		}
	}
	return ts
}

// completeReportLocked records in the history a terminal task an agent
// reports that the master does not track (after a master restart), once,
// with its end as the agent kept it (reason, message, exit code: before,
// a restart lost them).
func (m *Master) completeReportLocked(agentID string, rep TaskReport) {
	if m.completed.has(rep.FrameworkID, rep.Info.ID) {
		return
	}
	m.completed.addTask(api.TaskState{ID: rep.Info.ID, Name: rep.Info.Name, FrameworkID: rep.FrameworkID, AgentID: agentID,
		State: rep.State.String(), Resources: rep.Resources, Reason: rep.Reason, Message: rep.Message, ExitCode: rep.ExitCode})
}

// terminalOrLost is the state a task leaves the master in: its own when
// terminal, else the LOST its removal means.
func terminalOrLost(s TaskState) TaskState {
	if terminal(s) {
		return s
	}
	return TaskLost
}
