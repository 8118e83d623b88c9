// Package taskrunner runs the master's tasks on an agent: it is the
// masterlink.TaskRunner (and TaskUpdater) of `brim agent --master` and
// `brim dev`. A task is an agent container named after the task ID and
// its framework (ContainerName: "web-1.3fa2c1d0", so that two frameworks'
// tasks of one ID never collide) and labelled with the task, its
// framework, name and resources (status.go), so that a restarted agent
// reports its tasks from its own checkpoint. The runner finds a task's
// container by those labels (older agents named it after the task ID
// alone); when several containers carry one task ID, the current one is
// the one not exited, else the newest, and only it is reported. Every
// command and status names the task by framework and ID: a kill or a
// resize of one framework's task never reaches another's container, and
// each status carries its framework (an older master's command without
// one names the current task of that ID).
//
// Runner owns every task's life on the agent side, after Nomad's
// client/allocrunner/taskrunner: LaunchTask starts the container and a
// watcher that reports the task's end; KillTask kills it, including one
// still being created (the kill is remembered and acted on once the
// container exists); finalStatus maps an exit to the task's final state and
// reason (status.go). Two notions stay apart: shutting the runner down
// (its context ends: watchers stop, containers keep running and the next
// agent reports them) and killing a task (only KillTask and QoS kills).
//
// Run (link.go) waits for the agent's recovery (agent.Agent.Ready), links
// it to the master with a masterlink.Client, reports the tasks that ended
// while the agent was down, and sends the estimator's revocable resources
// and the QoS corrections in force to the master.
//
// It never touches containers except through the agent, and names no
// concrete estimator or QoS controller. Errors are the agent's sentinels
// (agent.ErrNotFound, agent.ErrNotRunning, agent.ErrInsufficientResources)
// and masterlink.ErrRejected from Run.
package taskrunner
