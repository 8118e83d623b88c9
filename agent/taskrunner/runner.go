package taskrunner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/qos"
	"github.com/brimnode/brim/resources"
)

// preemptTriggerWait bounds the wait for the QoS applier to record the
// kill whose trigger a preempted task's status names.
const preemptTriggerWait = 2 * time.Second

// Agent is what the runner needs of the agent (*agent.Agent).
type Agent interface {
	Launch(ctx context.Context, spec agent.Spec) (*agent.Container, error)
	Wait(ctx context.Context, ref string) (*agent.Container, error)
	Kill(ctx context.Context, ref string, grace time.Duration) (*agent.Container, error)
	Get(ref string) (*agent.Container, error)
	List() []*agent.Container
	ResizeLabeled(ctx context.Context, ref string, u agent.Update, labels map[string]string) (*agent.Container, error)
	Oversubscription() (agent.Oversubscription, bool)
}

var _ Agent = (*agent.Agent)(nil)

// Updater records a task's status for the master (*masterlink.Client).
type Updater interface {
	Update(st masterlink.Status) error
}

// Runner runs the master's tasks as agent containers. Create it with New,
// give it its Updater with SetUpdater before the link starts, and end it
// with Close (containers keep running). Safe for concurrent use.
type Runner struct {
	a   Agent
	log *slog.Logger

	// ctx is the runner's life: it ends the watchers when the agent shuts
	// down. It is not the kill of any task.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	up    Updater
	tasks map[taskKey]*task
}

// taskKey names a task on the agent: its framework and its ID. Tasks of
// several frameworks may share an ID (one after the other, each with its
// own container: ContainerName), and nothing done for one — a kill, a
// resize, a status — may touch another. An empty fw is a command of an
// older master, which names the task by its ID alone (keyOf).
type taskKey struct{ fw, id string }

// keyOf is the key of container c's task, from its labels.
func keyOf(c *agent.Container) taskKey {
	return taskKey{c.Labels[LabelFramework], c.Labels[LabelTask]}
}

// matches reports whether a command for k is about container c's task:
// the same framework and ID, or the same ID for a command without a
// framework.
func (k taskKey) matches(c *agent.Container) bool {
	return c.Labels[LabelTask] == k.id && (k.fw == "" || c.Labels[LabelFramework] == k.fw)
}

// task is what the runner remembers of one task between calls.
type task struct {
	launching bool   // between LaunchTask and a running container
	killed    bool   // the framework asked for the kill
	container string // the container's ID once it exists
	// preempted: the master preempted the task (PreemptTask); what
	// needed its resources, for the status.
	preempted string
}

var (
	_ masterlink.TaskRunner    = (*Runner)(nil)
	_ masterlink.TaskUpdater   = (*Runner)(nil)
	_ masterlink.TaskPreempter = (*Runner)(nil)
)

// New returns a runner of a's tasks; its watchers end with ctx or Close.
func New(ctx context.Context, a Agent, log *slog.Logger) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	return &Runner{a: a, log: log.With("component", "tasks"), ctx: ctx, cancel: cancel, tasks: map[taskKey]*task{}}
}

// SetUpdater sets where task statuses go (the master link).
func (r *Runner) SetUpdater(u Updater) {
	r.mu.Lock()
	r.up = u
	r.mu.Unlock()
}

// Close ends the watchers and waits for them. Containers keep running.
func (r *Runner) Close() {
	r.cancel()
	r.wg.Wait()
}

func (r *Runner) update(st masterlink.Status) {
	r.mu.Lock()
	up := r.up
	r.mu.Unlock()
	if up == nil {
		r.log.Error("record task status: no link", "task", st.TaskID, "state", st.State)
		return
	}
	if err := up.Update(st); err != nil {
		r.log.Error("record task status", "task", st.TaskID, "state", st.State, "err", err)
	}
}

// liveLocked reports whether task t is being launched or its container
// runs (the agent's own record, which outlives an agent restart).
func (r *Runner) liveLocked(t masterlink.Task) bool {
	if tk := r.tasks[taskKey{t.FrameworkID, t.ID}]; tk != nil && tk.launching {
		return true
	}
	c, err := r.a.Get(ContainerName(t.FrameworkID, t.ID))
	return err == nil && c.State == agent.StateRunning
}

// taskLocked returns the record of task k, creating it.
func (r *Runner) taskLocked(k taskKey) *task {
	t := r.tasks[k]
	if t == nil {
		t = &task{}
		r.tasks[k] = t
	}
	return t
}

// killed reports whether task k was killed by request, and the
// preemption's message when the master preempted it.
func (r *Runner) killed(k taskKey) (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.tasks[k]; t != nil {
		return t.killed, t.preempted
	}
	return false, ""
}

// LaunchTask starts t's container and watches it. A kill that arrives
// while the container is being created is acted on once it exists.
//
// A launch of a task being launched, or whose container runs, is a
// duplicate — the master sent it again, or a new leader that did not know
// the task yet launched it once more — and leaves the task as it is: no
// second container, no status (its statuses so far stand). Launched
// again, the agent refused the container's name, the task was reported
// FAILED while it ran, and its record lost its container.
func (r *Runner) LaunchTask(ctx context.Context, t masterlink.Task) error {
	k := taskKey{t.FrameworkID, t.ID}
	ar, rev, err := agentResourcesOf(t.Resources)
	if err != nil {
		r.update(masterlink.Status{TaskID: t.ID, FrameworkID: t.FrameworkID, State: pb.TaskState_TASK_STARTING})
		return err
	}
	labels := map[string]string{}
	for k, v := range t.Labels {
		labels[k] = v
	}
	labels[LabelTask], labels[LabelFramework], labels[LabelResources], labels[LabelTaskName] = t.ID, t.FrameworkID, t.Resources.String(), t.Name
	r.mu.Lock()
	if r.liveLocked(t) {
		r.mu.Unlock()
		r.log.Info("launch of a task already launching or running: left as it is", "task", t.ID, "framework", t.FrameworkID)
		return nil
	}
	tk := r.taskLocked(k)
	tk.launching, tk.container, tk.killed, tk.preempted = true, "", false, ""
	r.mu.Unlock()
	r.update(masterlink.Status{TaskID: t.ID, FrameworkID: t.FrameworkID, State: pb.TaskState_TASK_STARTING})
	c, err := r.a.Launch(ctx, agent.Spec{Name: ContainerName(t.FrameworkID, t.ID), Command: t.Command, Env: t.Env, Resources: ar, Revocable: rev, Lent: rev && t.Lent, Labels: labels,
		User: t.User, UserNS: t.UserNS, RunAsRoot: t.RunAsRoot, // the master checked run_as_root
		Image: t.Image, Pull: agent.PullPolicy(t.ImagePull), ReadWrite: t.ImageReadWrite,
		Network: ar.NetMbit > 0}) // net_bw needs the container's own netns (agent --network)
	r.mu.Lock()
	tk = r.taskLocked(k)
	tk.launching = false
	killed := tk.killed
	if err == nil {
		tk.container = c.ID
	}
	r.mu.Unlock()
	if err != nil {
		return err
	}
	r.update(masterlink.Status{TaskID: t.ID, FrameworkID: t.FrameworkID, State: pb.TaskState_TASK_RUNNING, Message: fmt.Sprintf("container %s pid %d", c.ID, c.Pid)})
	r.watch(k, c.ID)
	if killed {
		// A kill arrived while the container was being created, when the
		// agent could not act on it yet: act on it now (the watcher
		// reports KILLED).
		if _, err := r.a.Kill(ctx, c.ID, 0); err != nil && !errors.Is(err, agent.ErrNotRunning) {
			r.log.Warn("kill task killed during launch", "task", t.ID, "err", err)
		}
	}
	return nil
}

// watch reports the end of task k, run by container ref.
func (r *Runner) watch(k taskKey, ref string) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		c, err := r.a.Wait(r.ctx, ref)
		if r.ctx.Err() != nil {
			return // the agent is shutting down; the next one reports it
		}
		if err != nil {
			r.update(masterlink.Status{TaskID: k.id, FrameworkID: k.fw, State: pb.TaskState_TASK_LOST, Reason: ReasonContainerLost, Message: err.Error()})
			return
		}
		st, byMaster := r.endStatus(k, c)
		if st.Reason == ReasonPreempted && !byMaster {
			st.Message = r.preemptMessage(c)
		}
		r.update(st)
	}()
}

// endStatus is task k's final status, its container c having exited: a
// task the master preempted (byMaster) is KILLED with reason
// CONTAINER_PREEMPTED and the master's message.
func (r *Runner) endStatus(k taskKey, c *agent.Container) (st masterlink.Status, byMaster bool) {
	killed, preempted := r.killed(k)
	st = finalStatus(c, killed)
	if killed && preempted != "" && st.State == pb.TaskState_TASK_KILLED {
		st.Reason, st.Message = ReasonPreempted, preempted
		return st, true
	}
	return st, false
}

// preemptMessage names the QoS kill's trigger for a preempted task. The
// applier records the kill once it returns, which may be just after the
// container's end: wait for it a bounded time.
func (r *Runner) preemptMessage(c *agent.Container) string {
	msg := "preempted by the QoS controller to protect non-revocable work"
	ctx, cancel := context.WithTimeout(r.ctx, preemptTriggerWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		st, ok := r.a.Oversubscription()
		if !ok {
			return msg
		}
		for i := len(st.Recent) - 1; i >= 0; i-- {
			ap := st.Recent[i]
			if ap.Type == qos.Kill && ap.Err == nil && (ap.ContainerID == c.ID || ap.ContainerID == c.Name) {
				return msg + ": " + describeCorrection(ap.Correction)
			}
		}
		select {
		case <-ctx.Done():
			return msg
		case <-tick.C:
		}
	}
}

// KillTask kills framework fw's task id's container with the agent's
// default grace (fw empty, from an older master: the task of that ID). A
// task still being created is killed once its container exists; an
// unknown task is reported LOST. Another framework's task of the same ID
// is never touched.
func (r *Runner) KillTask(ctx context.Context, fw, id string) error {
	return r.kill(ctx, fw, id, "")
}

// PreemptTask kills framework fw's task id as KillTask does; its status
// is TASK_KILLED with reason CONTAINER_PREEMPTED and message (what
// needed its resources, as the master said).
func (r *Runner) PreemptTask(ctx context.Context, fw, id, message string) error {
	if message == "" {
		message = "preempted by the master"
	}
	return r.kill(ctx, fw, id, message)
}

func (r *Runner) kill(ctx context.Context, fw, id, preempted string) error {
	k := taskKey{fw, id}
	if fw == "" {
		k = r.keyOfID(id)
	}
	r.mu.Lock()
	tk := r.taskLocked(k)
	tk.killed = true
	if tk.preempted == "" {
		tk.preempted = preempted
	}
	launching := tk.launching
	r.mu.Unlock()
	if _, err := r.a.Kill(ctx, r.ref(k), 0); err != nil {
		if launching && (errors.Is(err, agent.ErrNotFound) || errors.Is(err, agent.ErrNotRunning)) {
			return nil // LaunchTask kills it once the container exists
		}
		if errors.Is(err, agent.ErrNotFound) {
			r.update(masterlink.Status{TaskID: id, FrameworkID: k.fw, State: pb.TaskState_TASK_LOST, Reason: ReasonContainerLost, Message: "no such task on this agent"})
			return nil
		}
		if errors.Is(err, agent.ErrNotRunning) {
			return nil // its end is reported by the watcher
		}
		return err
	}
	return nil
}

// UpdateTask resizes a task's container live to res (cpu shares, memory
// limit and, for a container with networking, its bandwidth) through the
// agent, which accounts the change (growth only if free), and records res
// in the container's resources label with the same checkpoint, so that a
// restarted agent reports the resources the container has.
func (r *Runner) UpdateTask(ctx context.Context, fw, id string, res resources.Resources) error {
	ar, rev, err := agentResourcesOf(res)
	if err != nil {
		return err
	}
	k := taskKey{fw, id}
	c, err := r.a.Get(r.ref(k))
	if err != nil {
		return err
	}
	if !k.matches(c) {
		return fmt.Errorf("container %s does not run task %s of framework %s", c.ID, id, fw)
	}
	if c.Revocable != rev {
		return fmt.Errorf("task %s: an update cannot change whether it is revocable", id)
	}
	_, err = r.a.ResizeLabeled(ctx, c.ID, agent.Update{MilliCPUs: ar.MilliCPUs, MemMiB: ar.MemMiB, NetMbit: ar.NetMbit},
		map[string]string{LabelResources: res.String()})
	return err
}

// Tasks lists the tasks the agent's containers run, from their labels:
// one per task (framework and ID), its current container (current); an
// ended one with its end.
func (r *Runner) Tasks(context.Context) ([]masterlink.TaskSnapshot, error) {
	var out []masterlink.TaskSnapshot
	for _, c := range current(r.a.List()) {
		k := keyOf(c)
		res, err := resources.Parse(c.Labels[LabelResources])
		if err != nil {
			continue
		}
		s := masterlink.TaskSnapshot{Task: masterlink.Task{ID: k.id, FrameworkID: k.fw, Name: c.Labels[LabelTaskName],
			Resources: res, Command: c.Command, Env: c.Env, User: c.User, UserNS: c.UserNS,
			Image: c.Image, ImageReadWrite: c.ReadWrite}, State: pb.TaskState_TASK_RUNNING}
		switch c.State {
		case agent.StateLaunching:
			s.State = pb.TaskState_TASK_STARTING
		case agent.StateExited:
			st, _ := r.endStatus(k, c)
			s.State, s.Reason, s.Message, s.ExitCode = st.State, st.Reason, st.Message, st.ExitCode
		}
		out = append(out, s)
	}
	return out, nil
}

// Adopt reports the end of tasks that exited while the agent was down and
// watches the running ones again. Call it once, after the agent recovered
// and the updater is set.
func (r *Runner) Adopt() {
	for _, c := range current(r.a.List()) {
		k := keyOf(c)
		r.mu.Lock()
		r.taskLocked(k).container = c.ID
		r.mu.Unlock()
		if c.State == agent.StateExited {
			st, _ := r.endStatus(k, c)
			r.update(st)
		} else {
			r.watch(k, c.ID)
		}
	}
}

// ref returns the container of task k: the one the runner launched or
// adopted, else the current one by the labels (current), else the task
// ID itself (the agent then answers ErrNotFound).
func (r *Runner) ref(k taskKey) string {
	r.mu.Lock()
	tk := r.tasks[k]
	r.mu.Unlock()
	if tk != nil && tk.container != "" {
		return tk.container
	}
	var match *agent.Container
	for _, c := range r.a.List() {
		if k.matches(c) && (match == nil || match.State == agent.StateExited) {
			match = c
		}
	}
	if match != nil {
		return match.ID
	}
	return k.id
}

// keyOfID is the key of the task of ID id an older master's command
// names (without a framework): one being launched, else the current
// container's (the one not exited, else the newest), else one with no
// framework.
func (r *Runner) keyOfID(id string) taskKey {
	r.mu.Lock()
	for k, tk := range r.tasks {
		if k.id == id && tk.launching {
			r.mu.Unlock()
			return k
		}
	}
	r.mu.Unlock()
	var match *agent.Container
	for _, c := range r.a.List() {
		if c.Labels[LabelTask] == id && (match == nil || match.State == agent.StateExited) {
			match = c
		}
	}
	if match == nil {
		return taskKey{id: id}
	}
	return keyOf(match)
}

// current returns, of containers cs (oldest first, as agent.List), the
// current container of each task ID: the one not exited, else the newest.
// A task ID may have several containers: tasks of different frameworks
// with one ID, one after the other (ContainerName). Only the current one
// is reported: the master tracks one live task per ID, and an ended
// task's unacknowledged end still reaches it through the link's outbox,
// where each framework's task has its own queue.
func current(cs []*agent.Container) []*agent.Container {
	idx := map[string]int{}
	var out []*agent.Container
	for _, c := range cs {
		id := c.Labels[LabelTask]
		if id == "" {
			continue
		}
		i, ok := idx[id]
		switch {
		case !ok:
			idx[id] = len(out)
			out = append(out, c)
		case out[i].State == agent.StateExited:
			out[i] = c
		}
	}
	return out
}
