// Command drf-demo is an example brim framework built on the scheduler SDK:
// it subscribes to the master, launches tasks of one demand vector
// (--task-cpus, --task-mem) running --cmd on the offers it gets, declines
// what it cannot use with a short filter, prints each task's state
// transitions, and on SIGTERM/SIGINT or after --duration kills its tasks
// and exits once they have ended.
//
// It takes at most --per-offer tasks from one offer (default 1), so on a
// single agent the master's allocator decides, cycle by cycle, which
// framework grows next: two drf-demo frameworks with the DRF paper's
// demand vectors end with the allocation the paper predicts.
//
//	drf-demo --master 127.0.0.1:5050 --name A --role a --task-cpus 0.1 --task-mem 400 --cmd 'sleep 60'
//
// It never talks to agents and owns no kernel objects: the tasks are the
// agent's containers, killed through the master.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
)

// config is the framework's flags.
type config struct {
	master, name, role, cmd string
	cpus                    float64
	memMiB                  int64
	maxTasks, perOffer      int
	refuse, duration, grace time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.master, "master", "127.0.0.1:5050", "master address, host:port")
	flag.StringVar(&c.name, "name", "drf-demo", "framework name; task IDs are NAME-1, NAME-2, …")
	flag.StringVar(&c.role, "role", "", "role to subscribe with (default: the master's default role)")
	flag.Float64Var(&c.cpus, "task-cpus", 0.1, "cpus of each task")
	flag.Int64Var(&c.memMiB, "task-mem", 64, "memory of each task, MiB")
	flag.IntVar(&c.maxTasks, "tasks", 0, "most tasks to run at once (0: as many as the master offers)")
	flag.IntVar(&c.perOffer, "per-offer", 1, "most tasks to launch from one offer (0: as many as fit)")
	flag.StringVar(&c.cmd, "cmd", "sleep 600", "task command, run with sh -c")
	flag.DurationVar(&c.refuse, "refuse", time.Second, "filter on what an offer leaves unused")
	flag.DurationVar(&c.duration, "duration", 0, "stop after this long (0: at SIGTERM or SIGINT)")
	flag.DurationVar(&c.grace, "stop-timeout", 20*time.Second, "how long to wait for killed tasks to end when stopping")
	flag.Parse()
	if flag.NArg() > 0 || c.cpus <= 0 || c.memMiB <= 0 || c.maxTasks < 0 || c.perOffer < 0 || c.name == "" {
		fmt.Fprintln(os.Stderr, "drf-demo: want positive --task-cpus and --task-mem, a --name, non-negative --tasks and --per-offer, no arguments")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if c.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.duration)
		defer cancel()
	}
	// Once stopping, a second SIGINT or SIGTERM ends the process at once
	// (its tasks then end with the framework's failover timeout).
	context.AfterFunc(ctx, stop)
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "drf-demo %s: %v\n", c.name, err)
		os.Exit(1)
	}
}

// run is the framework until ctx ends and its tasks have been killed.
func run(ctx context.Context, c config, out io.Writer) error {
	want, err := resources.Parse("cpus:" + strconv.FormatFloat(c.cpus, 'f', -1, 64) + ";mem:" + strconv.FormatInt(c.memMiB, 10))
	if err != nil {
		return fmt.Errorf("parse demand vector: %w", err)
	}
	var roles []string
	if c.role != "" {
		roles = []string{c.role}
	}
	d, err := scheduler.New(scheduler.Options{Master: c.master, Name: c.name, Roles: roles, FailoverTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }() // the demo is over
	f := &framework{c: c, want: want, d: d, out: out, live: map[string]pb.TaskState{}, ended: make(chan struct{}, 1)}

	// The driver runs until the tasks are killed, not until ctx ends: the
	// KILLED updates arrive on its stream.
	dctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- d.Run(dctx, scheduler.Callbacks{
			Subscribed: f.subscribed, Offers: f.offers, Update: f.update,
			Error: func(_ context.Context, msg string) { f.printf("master error: %s", msg) },
		})
	}()
	select {
	case err := <-errc:
		return err // Run stopped by itself: an error a retry cannot fix
	case <-ctx.Done():
	}
	err = f.stop(dctx)
	cancel()
	return errors.Join(err, <-errc)
}

// framework is the state of one drf-demo framework. Callbacks run on the
// driver's goroutine; stop runs on run's.
type framework struct {
	c    config
	want resources.Resources
	d    *scheduler.Driver
	out  io.Writer

	mu         sync.Mutex
	seq        int                     // tasks launched so far, names the next
	live       map[string]pb.TaskState // tasks launched and not yet ended
	suppressed bool                    // offers suppressed at --tasks
	stopping   bool                    // no more launches
	ended      chan struct{}           // a live task ended (capacity 1)
}

func (f *framework) printf(format string, args ...any) {
	fmt.Fprintf(f.out, "%s: %s\n", f.c.name, fmt.Sprintf(format, args...))
}

func (f *framework) subscribed(ctx context.Context, id string) {
	f.printf("subscribed as framework %s, role %q, task ⟨%s⟩", id, f.c.role, f.want)
	if ids := f.liveTasks(); len(ids) > 0 { // a re-subscription: learn what happened meanwhile
		if err := f.d.Reconcile(ctx, ids...); err != nil {
			f.printf("reconcile: %v", err)
		}
	}
}

// offers launches up to --per-offer tasks from each offer, within --tasks,
// and declines the offers it does not use.
func (f *framework) offers(ctx context.Context, offers []*pb.Offer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var decline []string
	for _, o := range offers {
		have, err := resources.Parse(o.Resources)
		if err != nil {
			f.printf("offer %s: %v", o.Id, err)
			decline = append(decline, o.Id)
			continue
		}
		n := 0
		if !f.stopping {
			n = fit(have.Unreserved(), f.want, launchLimit(f.c.maxTasks, len(f.live), f.c.perOffer))
		}
		if n == 0 {
			decline = append(decline, o.Id)
			continue
		}
		tasks := make([]*pb.TaskInfo, 0, n)
		for range n {
			f.seq++
			id := fmt.Sprintf("%s-%d", f.c.name, f.seq)
			tasks = append(tasks, &pb.TaskInfo{TaskId: id, Name: id, Command: []string{"sh", "-c", f.c.cmd}, Resources: f.want.String()})
		}
		if err := f.d.Launch(ctx, []string{o.Id}, tasks, f.c.refuse.Seconds()); err != nil {
			f.printf("launch on agent %s: %v", o.AgentId, err)
			continue
		}
		for _, t := range tasks {
			f.live[t.TaskId] = pb.TaskState_TASK_STAGING
		}
	}
	if len(decline) > 0 {
		if err := f.d.Decline(ctx, decline, f.c.refuse.Seconds()); err != nil {
			f.printf("decline: %v", err)
		}
	}
	if f.c.maxTasks > 0 && len(f.live) >= f.c.maxTasks && !f.suppressed {
		if err := f.d.Suppress(ctx); err != nil {
			f.printf("suppress: %v", err)
		} else {
			f.suppressed = true
		}
	}
}

// update prints a transition and forgets ended tasks; below --tasks again,
// offers are revived so the framework can replace them.
func (f *framework) update(ctx context.Context, st *pb.TaskStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev, known := f.live[st.TaskId]
	if !known || (prev == st.State && st.Reason == pb.ReasonReconciliation) {
		return // a task of an earlier run, or nothing new
	}
	line := st.TaskId + " " + stateName(st.State)
	if st.HasExitCode {
		line += fmt.Sprintf(" exit %d", st.ExitCode)
	}
	if st.Reason != "" && st.State != pb.TaskState_TASK_RUNNING {
		line += " (" + st.Reason + ")"
	}
	if st.Message != "" && st.State != pb.TaskState_TASK_RUNNING {
		line += ": " + st.Message
	}
	f.printf("%s", line)
	if !st.State.Terminal() {
		f.live[st.TaskId] = st.State
		return
	}
	delete(f.live, st.TaskId)
	select {
	case f.ended <- struct{}{}:
	default:
	}
	if f.suppressed && !f.stopping {
		if err := f.d.Revive(ctx); err != nil {
			f.printf("revive: %v", err)
		} else {
			f.suppressed = false
		}
	}
}

// stop launches nothing more, kills the live tasks and waits (at most
// --stop-timeout) for them to end. Kills are sent again every
// killRetry: a kill that reaches the agent while the task is still being
// launched may be lost, and a framework must not rely on one message.
func (f *framework) stop(ctx context.Context) error {
	f.mu.Lock()
	f.stopping = true
	f.mu.Unlock()
	if err := f.d.Suppress(ctx); err != nil {
		f.printf("suppress: %v", err)
	}
	timeout := time.NewTimer(f.c.grace)
	defer timeout.Stop()
	retry := time.NewTicker(killRetry)
	defer retry.Stop()
	for round := 0; ; round++ {
		ids := f.liveTasks()
		if len(ids) == 0 {
			f.printf("stopped: all tasks ended")
			return nil
		}
		if round == 0 {
			f.printf("stopping: killing %d tasks", len(ids))
		}
		for _, id := range ids {
			if err := f.d.Kill(ctx, id); err != nil && round == 0 {
				f.printf("kill %s: %v (retrying every %s)", id, err, killRetry)
			}
		}
	wait:
		for {
			select {
			case <-f.ended:
				if len(f.liveTasks()) == 0 {
					break wait
				}
			case <-retry.C:
				break wait
			case <-timeout.C:
				return fmt.Errorf("stop: %d tasks still live after %s", len(f.liveTasks()), f.c.grace)
			}
		}
	}
}

// killRetry is how often stop sends its kills again.
const killRetry = 2 * time.Second

// liveTasks returns the IDs of the tasks launched and not yet ended.
func (f *framework) liveTasks() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]string, 0, len(f.live))
	for id := range f.live {
		ids = append(ids, id)
	}
	return ids
}

// launchLimit is how many tasks one offer may start: perOffer (0: no cap)
// within maxTasks (0: no cap) of which live are running. -1 means no cap.
func launchLimit(maxTasks, live, perOffer int) int {
	limit := -1
	if perOffer > 0 {
		limit = perOffer
	}
	if maxTasks > 0 {
		left := max(maxTasks-live, 0)
		if limit < 0 || left < limit {
			limit = left
		}
	}
	return limit
}

// fit is how many copies of want fit in have, at most limit (negative: no
// cap).
func fit(have, want resources.Resources, limit int) int {
	if want.IsEmpty() {
		return 0
	}
	n := 0
	for (limit < 0 || n < limit) && have.Contains(want) {
		have = have.Subtract(want)
		n++
	}
	return n
}

func stateName(s pb.TaskState) string {
	const prefix = "TASK_"
	n := s.String()
	if len(n) > len(prefix) && n[:len(prefix)] == prefix {
		return n[len(prefix):]
	}
	return n
}
