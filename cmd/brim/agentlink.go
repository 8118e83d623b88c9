package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/estimator"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/qos"
	"github.com/brimnode/brim/resources"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Labels the task runner puts on the containers it launches for the
// master; they let a restarted agent report its tasks.
const (
	labelTask      = "brim.task"
	labelFramework = "brim.framework"
	labelResources = "brim.resources"
	labelTaskName  = "brim.task-name"
)

// Status reasons of the agent side.
const (
	reasonCommandExited  = "COMMAND_EXITED"
	reasonMemoryLimit    = "CONTAINER_LIMITATION_MEMORY"
	reasonKilled         = "KILLED_BY_FRAMEWORK"
	reasonContainerLost  = "CONTAINER_LOST"
	reasonInvalidTaskRes = "INVALID_RESOURCES"
	// reasonPreempted: a QoS correction killed the task's revocable
	// container (the agent's exit reason is the same string).
	reasonPreempted = qos.ReasonPreempted
)

// oversubPollInterval is how often the link checks the QoS corrections in
// force for a change to send to the master.
const oversubPollInterval = time.Second

// preemptTriggerWait bounds the wait for the QoS applier to record the
// kill whose trigger a preempted task's status names.
const preemptTriggerWait = 2 * time.Second

// taskRunner runs the master's tasks as agent containers
// (masterlink.TaskRunner). A task is a container named after the task ID.
type taskRunner struct {
	a   *agent.Agent
	log *slog.Logger
	ctx context.Context // ends watchers when the agent shuts down

	mu        sync.Mutex
	link      *masterlink.Client
	killed    map[string]bool
	launching map[string]bool // tasks between LaunchTask and a running container
	wg        sync.WaitGroup
}

var _ masterlink.TaskRunner = (*taskRunner)(nil)

func (r *taskRunner) update(st masterlink.Status) {
	if err := r.link.Update(st); err != nil {
		r.log.Error("record task status", "task", st.TaskID, "state", st.State, "err", err)
	}
}

// agentResourcesOf turns a task's resources into the agent's limits.
func agentResourcesOf(res resources.Resources) (agent.Resources, bool, error) {
	rev := !res.Revocable().IsEmpty()
	if rev && !res.NonRevocable().IsEmpty() {
		return agent.Resources{}, false, fmt.Errorf("task mixes revocable and non-revocable resources")
	}
	flat := res.Flatten()
	out := agent.Resources{MilliCPUs: int64(flat.CPUs()), MemMiB: int64(flat.Mem()) / 1000, NetMbit: int64(flat.NetBandwidth()) / 1000}
	if out.MilliCPUs <= 0 || out.MemMiB <= 0 {
		return agent.Resources{}, false, fmt.Errorf("task needs cpus and mem, has %s", res)
	}
	return out, rev, nil
}

func (r *taskRunner) LaunchTask(ctx context.Context, t masterlink.Task) error {
	r.update(masterlink.Status{TaskID: t.ID, State: pb.TaskState_TASK_STARTING})
	ar, rev, err := agentResourcesOf(t.Resources)
	if err != nil {
		return err
	}
	labels := map[string]string{}
	for k, v := range t.Labels {
		labels[k] = v
	}
	labels[labelTask], labels[labelFramework], labels[labelResources], labels[labelTaskName] = t.ID, t.FrameworkID, t.Resources.String(), t.Name
	r.mu.Lock()
	r.launching[t.ID] = true
	r.mu.Unlock()
	c, err := r.a.Launch(ctx, agent.Spec{Name: t.ID, Command: t.Command, Env: t.Env, Resources: ar, Revocable: rev, Labels: labels,
		Network: ar.NetMbit > 0}) // net_bw needs the container's own netns (agent --network)
	r.mu.Lock()
	delete(r.launching, t.ID)
	killed := r.killed[t.ID]
	r.mu.Unlock()
	if err != nil {
		return err
	}
	r.update(masterlink.Status{TaskID: t.ID, State: pb.TaskState_TASK_RUNNING, Message: fmt.Sprintf("container %s pid %d", c.ID, c.Pid)})
	r.watch(t.ID)
	if killed {
		// A kill arrived while the container was being created, when the
		// agent could not act on it yet: act on it now (the watcher
		// reports KILLED).
		if _, err := r.a.Kill(ctx, t.ID, 0); err != nil && !errors.Is(err, agent.ErrNotRunning) {
			r.log.Warn("kill task killed during launch", "task", t.ID, "err", err)
		}
	}
	return nil
}

// watch reports the task's end.
func (r *taskRunner) watch(id string) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		c, err := r.a.Wait(r.ctx, id)
		if r.ctx.Err() != nil {
			return // the agent is shutting down; the next one reports it
		}
		if err != nil {
			r.update(masterlink.Status{TaskID: id, State: pb.TaskState_TASK_LOST, Reason: reasonContainerLost, Message: err.Error()})
			return
		}
		st := r.terminal(c)
		if st.Reason == reasonPreempted {
			st.Message = r.preemptMessage(c)
		}
		r.update(st)
	}()
}

// preemptMessage names the QoS kill's trigger for a preempted task. The
// applier records the kill once it returns, which may be just after the
// container's end: wait for it a bounded time.
func (r *taskRunner) preemptMessage(c *agent.Container) string {
	msg := "preempted by the QoS controller to protect non-revocable work"
	ctx, cancel := context.WithTimeout(r.ctx, preemptTriggerWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if st, ok := r.a.Oversubscription(); ok {
			for i := len(st.Recent) - 1; i >= 0; i-- {
				ap := st.Recent[i]
				if ap.Type == qos.Kill && ap.Err == nil && (ap.ContainerID == c.ID || ap.ContainerID == c.Name) {
					return msg + ": " + describeCorrection(ap.Correction)
				}
			}
		} else {
			return msg
		}
		select {
		case <-ctx.Done():
			return msg
		case <-tick.C:
		}
	}
}

// describeCorrection renders a correction's trigger for a framework.
func describeCorrection(c qos.Correction) string {
	t := c.Trigger
	s := "trigger " + t.Signal
	if t.Victim != "" {
		s += " of " + t.Victim
	}
	s += fmt.Sprintf(" %.4g", t.Value)
	if t.Baseline != 0 {
		s += fmt.Sprintf(" (baseline %.4g, threshold %.4g)", t.Baseline, t.Threshold)
	} else {
		s += fmt.Sprintf(" (threshold %.4g)", t.Threshold)
	}
	if c.Reason != "" {
		s += ": " + c.Reason
	}
	return s
}

// terminal maps an exited container to the task's final status.
func (r *taskRunner) terminal(c *agent.Container) masterlink.Status {
	id := c.Labels[labelTask]
	st := masterlink.Status{TaskID: id, State: pb.TaskState_TASK_FAILED, Reason: reasonCommandExited}
	e := c.Exit
	if e == nil {
		st.State, st.Reason, st.Message = pb.TaskState_TASK_LOST, reasonContainerLost, "exit status unknown"
		return st
	}
	code := e.Code
	st.ExitCode = &code
	r.mu.Lock()
	killed := r.killed[id]
	r.mu.Unlock()
	switch {
	case killed:
		st.State, st.Reason, st.Message = pb.TaskState_TASK_KILLED, reasonKilled, "killed"
	case e.Reason == qos.ReasonPreempted:
		// Mesos reports TASK_LOST here; the agent knows the container is
		// gone, so brim says KILLED, with Mesos's reason.
		st.State, st.Reason, st.Message = pb.TaskState_TASK_KILLED, reasonPreempted, e.Message
	case e.OOMKilled || e.Reason == agent.ReasonMemoryLimit:
		st.Reason, st.Message = reasonMemoryLimit, "memory limit exceeded"
	case e.Reason == agent.ReasonLost:
		st.State, st.Reason, st.Message, st.ExitCode = pb.TaskState_TASK_LOST, reasonContainerLost, e.Message, nil
	case e.Code == 0 && e.Signal == 0:
		st.State, st.Message = pb.TaskState_TASK_FINISHED, "command exited with code 0"
	case e.Signal != 0:
		st.Message = fmt.Sprintf("command killed by signal %d", e.Signal)
	default:
		st.Message = fmt.Sprintf("command exited with code %d", e.Code)
	}
	if e.Message != "" && st.State == pb.TaskState_TASK_FAILED {
		st.Message += ": " + e.Message
	}
	return st
}

func (r *taskRunner) KillTask(ctx context.Context, id string) error {
	r.mu.Lock()
	r.killed[id] = true
	launching := r.launching[id]
	r.mu.Unlock()
	if _, err := r.a.Kill(ctx, id, 0); err != nil {
		if launching && (errors.Is(err, agent.ErrNotFound) || errors.Is(err, agent.ErrNotRunning)) {
			return nil // LaunchTask kills it once the container exists
		}
		if errors.Is(err, agent.ErrNotFound) {
			r.update(masterlink.Status{TaskID: id, State: pb.TaskState_TASK_LOST, Reason: reasonContainerLost, Message: "no such task on this agent"})
			return nil
		}
		if errors.Is(err, agent.ErrNotRunning) {
			return nil // its end is reported by the watcher
		}
		return err
	}
	return nil
}

var _ masterlink.TaskUpdater = (*taskRunner)(nil)

// UpdateTask resizes a task's container live to res (cpu shares, memory
// limit and, for a container with networking, its bandwidth) through the
// agent, which accounts the change (growth only if free), and records res
// in the container's resources label with the same checkpoint, so that a
// restarted agent reports the resources the container has.
func (r *taskRunner) UpdateTask(ctx context.Context, id string, res resources.Resources) error {
	ar, rev, err := agentResourcesOf(res)
	if err != nil {
		return err
	}
	c, err := r.a.Get(id)
	if err != nil {
		return err
	}
	if c.Labels[labelTask] != id {
		return fmt.Errorf("container %s does not run task %s", c.ID, id)
	}
	if c.Revocable != rev {
		return fmt.Errorf("task %s: an update cannot change whether it is revocable", id)
	}
	_, err = r.a.ResizeLabeled(ctx, id, agent.Update{MilliCPUs: ar.MilliCPUs, MemMiB: ar.MemMiB, NetMbit: ar.NetMbit},
		map[string]string{labelResources: res.String()})
	return err
}

func (r *taskRunner) Tasks(context.Context) ([]masterlink.TaskSnapshot, error) {
	var out []masterlink.TaskSnapshot
	for _, c := range r.a.List() {
		id := c.Labels[labelTask]
		if id == "" {
			continue
		}
		res, err := resources.Parse(c.Labels[labelResources])
		if err != nil {
			continue
		}
		s := masterlink.TaskSnapshot{Task: masterlink.Task{ID: id, FrameworkID: c.Labels[labelFramework], Name: c.Labels[labelTaskName],
			Resources: res, Command: c.Command, Env: c.Env}, State: pb.TaskState_TASK_RUNNING}
		switch c.State {
		case agent.StateLaunching:
			s.State = pb.TaskState_TASK_STARTING
		case agent.StateExited:
			s.State = r.terminal(c).State
		}
		out = append(out, s)
	}
	return out, nil
}

// adopt reports the end of tasks that exited while the agent was down and
// watches the running ones again. Called once, after the agent recovered.
func (r *taskRunner) adopt() {
	for _, c := range r.a.List() {
		id := c.Labels[labelTask]
		if id == "" {
			continue
		}
		if c.State == agent.StateExited {
			r.update(r.terminal(c))
		} else {
			r.watch(id)
		}
	}
}

// linkOptions are the master link flags shared by `brim dev` and
// `brim agent --master`.
type linkOptions struct {
	master             string
	retryMin, retryMax time.Duration
	// principal and secretFile authenticate the agent (registerAuth);
	// secret is resolved from them by credentials.
	principal, secretFile, secret string
	// tls is --master-ca; dial is resolved from it by credentials.
	tls  masterTLS
	dial []grpc.DialOption
}

// registerAuth adds the agent's authentication flags to f.
func (lo *linkOptions) registerAuth(f *pflag.FlagSet) {
	f.StringVar(&lo.principal, "principal", "", "principal to authenticate the agent as (needed when the master has --authenticate-agents)")
	f.StringVar(&lo.secretFile, "secret-file", "", "file holding the principal's secret (default: $BRIM_SECRET)")
	lo.tls.register(f)
}

// credentials resolves the agent's secret (--secret-file, else
// $BRIM_SECRET) and its TLS dial options (--master-ca); a usage error
// exits 2.
func (lo *linkOptions) credentials() error {
	dial, err := lo.tls.dialOptions()
	if err != nil {
		return err
	}
	lo.dial = dial
	if lo.principal != "" && lo.secretFile == "" && os.Getenv("BRIM_SECRET") == "" {
		return exitError{code: 2, msg: fmt.Sprintf("--principal %s needs a secret: --secret-file or $BRIM_SECRET", lo.principal)}
	}
	secret, err := frameworkSecret(lo.principal, "", lo.secretFile)
	if err != nil {
		return exitError{code: 2, msg: err.Error()}
	}
	lo.secret = secret
	return nil
}

// masterRefusal turns the master's refusal of who ("agent",
// "framework": codes.Unauthenticated or PermissionDenied anywhere in err's
// chain) into a one-line message and exit code 1; other errors are
// returned as they are.
func masterRefusal(who string, err error) error {
	var gs interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &gs) {
		return err
	}
	var what string
	switch st := gs.GRPCStatus(); st.Code() {
	case codes.Unauthenticated:
		what = "unauthenticated"
	case codes.PermissionDenied:
		what = "permission denied"
	default:
		return err
	}
	return exitError{code: 1, msg: "the master refused the " + who + ": " + what + ": " + gs.GRPCStatus().Message()}
}

// runAgentLink connects a recovered agent to the master and serves the
// link until ctx ends. total is what the agent offers.
func runAgentLink(ctx context.Context, a *agent.Agent, total agent.Resources, stateDir string, lo linkOptions, log *slog.Logger) error {
	text := fmt.Sprintf("cpus:%s;mem:%d", agent.FormatMilli(total.MilliCPUs), total.MemMiB)
	if total.NetMbit > 0 {
		text += fmt.Sprintf(";net_bw:%d", total.NetMbit)
	}
	res, err := resources.Parse(text)
	if err != nil {
		return fmt.Errorf("agent resources: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &taskRunner{a: a, log: log.With("component", "tasks"), ctx: ctx, killed: map[string]bool{}, launching: map[string]bool{}}
	defer r.wg.Wait()
	defer cancel() // a link that ends (the master refused the agent) ends the watchers and the oversubscription sender
	link, err := masterlink.New(masterlink.Options{
		Master: lo.master, StateDir: stateDir, AgentID: a.ID(), Resources: res, Runner: r,
		RetryMin: lo.retryMin, RetryMax: lo.retryMax, Principal: lo.principal, Secret: lo.secret, DialOptions: lo.dial, Log: log,
	})
	if err != nil {
		return err
	}
	r.link = link
	r.adopt()
	// The estimator's revocable resources reach the master through the link
	// (no-op when the agent runs without oversubscription), and so do the
	// QoS corrections in force.
	if _, ok := a.Oversubscription(); ok {
		a.SetForward(func(_ context.Context, est estimator.Estimate) error {
			return link.UpdateOversubscription(func(o *masterlink.Oversubscription) {
				o.Revocable, o.Summary = est.Revocable, est.Explanation.Summary
			})
		})
		defer a.SetForward(nil)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.sendOversubscription(ctx, link)
		}()
	}
	return masterRefusal("agent", link.Run(ctx))
}

// sendOversubscription sends the agent's estimator and QoS controller names
// and its corrections to the master whenever they change, until ctx ends.
func (r *taskRunner) sendOversubscription(ctx context.Context, link *masterlink.Client) {
	tick := time.NewTicker(oversubPollInterval)
	defer tick.Stop()
	for {
		if st, ok := r.a.Oversubscription(); ok {
			cs := correctionsOf(st, r.a.List())
			if err := link.UpdateOversubscription(func(o *masterlink.Oversubscription) {
				o.Estimator, o.QoS, o.Corrections = st.Estimator, st.QoS, cs
			}); err != nil {
				r.log.Debug("send oversubscription status", "err", err) // resent with the next Register
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// maxReportedKills bounds the recent QoS kills sent to the master.
const maxReportedKills = 8

// correctionsOf turns the agent's corrections in force and its recent
// kills into the link's form, naming the tasks of the containers.
func correctionsOf(st agent.Oversubscription, cs []*agent.Container) []*pb.Correction {
	tasks := map[string]string{}
	for _, c := range cs {
		if id := c.Labels[labelTask]; id != "" {
			tasks[c.ID], tasks[c.Name] = id, id
		}
	}
	applied := func(c qos.Correction) time.Time {
		for i := len(st.Recent) - 1; i >= 0; i-- {
			if ap := st.Recent[i]; ap.Err == nil && ap.Type == c.Type && ap.ContainerID == c.ContainerID {
				return ap.At
			}
		}
		return time.Time{}
	}
	conv := func(c qos.Correction, at time.Time, active bool) *pb.Correction {
		p := &pb.Correction{Type: c.Type.String(), ContainerId: c.ContainerID, TaskId: tasks[c.ContainerID], CpuQuotaMilli: c.CPUQuota,
			Reason: c.Reason, Signal: c.Trigger.Signal, Victim: c.Trigger.Victim, Value: c.Trigger.Value,
			Baseline: c.Trigger.Baseline, Threshold: c.Trigger.Threshold, Active: active}
		if !at.IsZero() {
			p.AppliedUnixNano = at.UnixNano()
		}
		return p
	}
	var out []*pb.Correction
	for _, c := range st.Active {
		out = append(out, conv(c, applied(c), true))
	}
	var kills []*pb.Correction
	for i := len(st.Recent) - 1; i >= 0 && len(kills) < maxReportedKills; i-- {
		if ap := st.Recent[i]; ap.Type == qos.Kill && ap.Err == nil {
			kills = append(kills, conv(ap.Correction, ap.At, false))
		}
	}
	slices.Reverse(kills) // oldest first, as Recent
	return append(out, kills...)
}

// serveLinkedAgent serves the agent's local API on l (a.Serve recovers the
// containers first) and, once the agent answers on socket, links it to the
// master until ctx ends; then it stops the agent without touching its
// containers. `brim agent --master` and `brim dev` use it.
func serveLinkedAgent(ctx context.Context, a *agent.Agent, l net.Listener, socket string, total agent.Resources, stateDir string, lo linkOptions, log *slog.Logger) error {
	if err := lo.credentials(); err != nil {
		l.Close()
		return err
	}
	actx, stopAgent := context.WithCancel(context.Background())
	defer stopAgent()
	var wg sync.WaitGroup
	wg.Add(1)
	var serveErr error
	go func() { defer wg.Done(); serveErr = a.Serve(actx, l) }()
	// Serve recovers the containers before it answers on the socket: the
	// link starts once the agent answers, so it reports recovered tasks.
	if err := waitAgentReady(ctx, socket); err != nil {
		stopAgent()
		wg.Wait()
		return errors.Join(err, serveErr)
	}
	linkErr := runAgentLink(ctx, a, total, stateDir, lo, log)
	stopAgent()
	wg.Wait()
	return errors.Join(linkErr, serveErr)
}
