package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

var _ = registerSubcommand(newRunCommand)

// runTasks is the state of `brim run`'s tasks.
type runTasks struct {
	mu       sync.Mutex
	ids      []string        // every task, launched or not
	launched map[string]bool // launched task IDs
	ended    map[string]*pb.TaskStatus
	perOffer int // 0: no limit
	stopping bool
	allDone  chan struct{}
	closed   bool
}

// checkDoneLocked closes allDone once every task that will ever run has
// ended.
func (rt *runTasks) checkDoneLocked() {
	if !rt.closed && len(rt.ended) == len(rt.ids) {
		rt.closed = true
		close(rt.allDone)
	}
}

// stopLocked gives up on tasks not launched yet.
func (rt *runTasks) stopLocked() {
	rt.stopping = true
	var keep []string
	for _, id := range rt.ids {
		if rt.launched[id] {
			keep = append(keep, id)
		}
	}
	rt.ids = keep
	rt.checkDoneLocked()
}

func (rt *runTasks) pending() []string {
	var out []string
	for _, id := range rt.ids {
		if !rt.launched[id] {
			out = append(out, id)
		}
	}
	return out
}

func (rt *runTasks) live() []string {
	var out []string
	for _, id := range rt.ids {
		if rt.launched[id] && rt.ended[id] == nil {
			out = append(out, id)
		}
	}
	return out
}

func newRunCommand() *cobra.Command {
	var (
		addr, role, name, taskID string
		principal, secret        string
		secretFile               string
		cpus                     float64
		mem                      int64
		revocable                bool
		env                      []string
		failover, killAfter      time.Duration
		instances, perOffer      int
		mtls                     masterTLS
	)
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARG…]",
		Short: "Run one task through the master (a one-task framework, like mesos-execute)",
		Long: `Subscribe to the master as a framework, launch CMD on the first offer that
fits --cpus and --mem, print the task's state transitions, and exit with the
task's exit code (1 when the task ended without one, e.g. LOST). Ctrl-C kills
the task.`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			milli, err := milliCPUs(cpus)
			if err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			if mem <= 0 {
				return exitError{code: 2, msg: "--mem must be positive"}
			}
			rev := ""
			if revocable {
				rev = "{REV}"
			}
			want, err := resources.Parse(fmt.Sprintf("cpus%s:%s;mem%s:%d", rev, fmtCPUs(milli), rev, mem))
			if err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			if instances < 1 {
				return exitError{code: 2, msg: "--instances must be at least 1"}
			}
			if taskID == "" {
				taskID = "run-" + uuid.NewString()[:8]
			}
			if name == "" {
				name = taskID
			}
			rt := &runTasks{launched: map[string]bool{}, ended: map[string]*pb.TaskStatus{}}
			for i := 0; i < instances; i++ {
				id := taskID
				if instances > 1 {
					id = fmt.Sprintf("%s-%d", taskID, i)
				}
				rt.ids = append(rt.ids, id)
			}
			var roles []string
			if role != "" {
				roles = []string{role}
			}
			secret, err := frameworkSecret(principal, secret, secretFile)
			if err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			dial, err := mtls.dialOptions()
			if err != nil {
				return err
			}
			d, err := scheduler.New(scheduler.Options{Master: addr, Name: "brim-run", Roles: roles, Revocable: revocable, FailoverTimeout: failover,
				Principal: principal, Secret: secret, DialOptions: dial})
			if err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			defer d.Close()
			out := cmd.OutOrStdout()
			rt.perOffer = perOffer
			return runTasksOn(cmd.Context(), d, out, rt, &pb.TaskInfo{Name: name, Command: args, Env: env}, want, role, killAfter)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "master", defaultMasterListen, "master address")
	f.Float64Var(&cpus, "cpus", 0.1, "cpus of the task")
	f.Int64Var(&mem, "mem", 64, "memory of the task, MiB")
	f.StringVar(&principal, "principal", "", "principal to authenticate the framework as (needed when the master has --credentials)")
	f.StringVar(&secret, "secret", "", "the principal's secret (prefer --secret-file or $BRIM_SECRET)")
	f.StringVar(&secretFile, "secret-file", "", "file holding the principal's secret")
	mtls.register(f)
	f.StringVar(&role, "role", "", "role to subscribe with (default: the master's default role)")
	f.BoolVar(&revocable, "revocable", false, "run on revocable (oversubscribed) resources")
	f.StringVar(&name, "name", "", "task name (default: the task ID)")
	f.StringVar(&taskID, "task-id", "", "task ID (default: run-<random>)")
	f.StringArrayVar(&env, "env", nil, "environment variable K=V (repeatable)")
	f.DurationVar(&failover, "failover-timeout", 10*time.Second, "how long the master keeps the framework after brim run exits")
	f.DurationVar(&killAfter, "kill-after", 0, "kill the task after this long (0: never)")
	f.IntVar(&perOffer, "tasks-per-offer", 0, "launch at most this many tasks per offer (0: as many as fit); 1 lets the allocator apply DRF task by task")
	f.IntVar(&instances, "instances", 1, "run this many copies of the task (IDs TASK-ID-0…); exit with the first non-zero exit code")
	markUsageErrors(cmd)
	return cmd
}

// refusal turns the master's refusal of the framework (authentication,
// ACL) into a one-line message; other errors are returned as they are.
func refusal(err error) error { return masterRefusal("framework", err) }

// frameworkSecret is the secret of principal: --secret-file (trimmed),
// else --secret, else $BRIM_SECRET. --secret or --secret-file without a
// principal is a usage error, as is a principal without any secret;
// $BRIM_SECRET alone is ignored.
func frameworkSecret(principal, secret, secretFile string) (string, error) {
	if principal == "" {
		if secret != "" || secretFile != "" {
			return "", errors.New("--secret and --secret-file need --principal")
		}
		return "", nil
	}
	if secretFile != "" {
		b, err := os.ReadFile(secretFile)
		if err != nil {
			return "", fmt.Errorf("--secret-file: %w", err)
		}
		secret = strings.TrimSpace(string(b))
	} else if secret == "" {
		secret = os.Getenv("BRIM_SECRET")
	}
	if secret == "" {
		return "", fmt.Errorf("--principal %s needs a secret: --secret-file, --secret or $BRIM_SECRET", principal)
	}
	return secret, nil
}

// runTasksOn launches the tasks (copies of tmpl) on offers that fit, prints
// their transitions, and returns once all have ended, with the first
// non-zero exit as an exitError.
func runTasksOn(ctx context.Context, d *scheduler.Driver, out io.Writer, rt *runTasks, tmpl *pb.TaskInfo, want resources.Resources, role string, killAfter time.Duration) error {
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt.allDone = make(chan struct{})
	allDone := rt.allDone
	errc := make(chan error, 1)
	go func() {
		errc <- d.Run(sctx, scheduler.Callbacks{
			Subscribed: func(_ context.Context, id string) {
				fmt.Fprintf(out, "subscribed as framework %s\n", id)
				rt.mu.Lock()
				live := rt.live()
				rt.mu.Unlock()
				if len(live) > 0 {
					_ = d.Reconcile(sctx, live...)
				}
			},
			Offers: func(cctx context.Context, offers []*pb.Offer) {
				rt.mu.Lock()
				defer rt.mu.Unlock()
				var decline []string
				for _, o := range offers {
					pending := rt.pending()
					if rt.stopping {
						pending = nil
					}
					have, err := resources.Parse(o.Resources)
					var tasks []*pb.TaskInfo
					for err == nil && len(tasks) < len(pending) && (rt.perOffer == 0 || len(tasks) < rt.perOffer) {
						res := fitting(have, want, role)
						if res == nil {
							break
						}
						t := &pb.TaskInfo{Name: tmpl.Name, Command: tmpl.Command, Env: tmpl.Env,
							TaskId: pending[len(tasks)], Resources: res.String()}
						if len(rt.ids) > 1 {
							t.Name = fmt.Sprintf("%s-%d", tmpl.Name, len(rt.launched)+len(tasks))
						}
						tasks = append(tasks, t)
						have = have.Subtract(res)
					}
					if len(tasks) == 0 {
						decline = append(decline, o.Id)
						continue
					}
					// While tasks remain, what is left goes back unfiltered:
					// the allocator offers it to whoever is furthest below
					// its fair share, possibly this framework again.
					refuse := 5.0
					if len(pending) > len(tasks) {
						refuse = 0
					}
					if err := d.Launch(cctx, []string{o.Id}, tasks, refuse); err != nil {
						fmt.Fprintf(out, "launch on %s: %v\n", o.AgentId, err)
						continue
					}
					for _, t := range tasks {
						rt.launched[t.TaskId] = true
					}
				}
				if len(decline) > 0 {
					_ = d.Decline(cctx, decline, 30)
				}
				if len(rt.pending()) == 0 {
					if err := d.Suppress(cctx); err != nil {
						fmt.Fprintf(out, "suppress offers: %v\n", err)
					}
				}
			},
			Update: func(_ context.Context, st *pb.TaskStatus) {
				rt.mu.Lock()
				defer rt.mu.Unlock()
				if !rt.launched[st.TaskId] || rt.ended[st.TaskId] != nil {
					return
				}
				line := fmt.Sprintf("task %s: %s", st.TaskId, stateName(st.State))
				if st.AgentId != "" {
					line += " on agent " + st.AgentId
				}
				if st.Reason != "" {
					line += " (" + st.Reason + ")"
				}
				if st.Message != "" {
					line += ": " + st.Message
				}
				fmt.Fprintln(out, line)
				if terminalState(st.State) && st.Reason != "RECONCILIATION" {
					// Acknowledge before exiting so the agent stops
					// retrying (the driver's own acknowledgement would
					// race with the exit).
					if st.Uuid != "" {
						if err := d.Acknowledge(sctx, st.AgentId, st.TaskId, st.Uuid); err != nil {
							fmt.Fprintf(out, "acknowledge: %v\n", err)
						}
					}
					rt.ended[st.TaskId] = st
					rt.checkDoneLocked()
				}
			},
			Error: func(_ context.Context, msg string) { fmt.Fprintf(out, "master error: %s\n", msg) },
		})
	}()
	killAll := func() {
		rt.mu.Lock()
		rt.stopLocked()
		live := rt.live()
		rt.mu.Unlock()
		for _, id := range live {
			if err := d.Kill(sctx, id); err != nil {
				fmt.Fprintf(out, "kill %s: %v\n", id, err)
			}
		}
	}
	var killTimer <-chan time.Time
	if killAfter > 0 {
		killTimer = time.After(killAfter)
	}
	interrupted := ctx.Done()
	for {
		select {
		case <-allDone:
			cancel()
			<-errc
			rt.mu.Lock()
			defer rt.mu.Unlock()
			var first error
			if rt.stopping && len(rt.ids) == 0 {
				return exitError{code: 130, msg: "interrupted"}
			}
			for _, id := range rt.ids {
				if err := exitOfTask(rt.ended[id]); err != nil && first == nil {
					first = err
				}
			}
			return first
		case err := <-errc:
			if err != nil {
				return refusal(err)
			}
			return exitError{code: 1, msg: "framework stopped"}
		case <-killTimer:
			killTimer = nil
			killAll()
		case <-interrupted:
			interrupted = nil
			rt.mu.Lock()
			launched := len(rt.launched)
			rt.mu.Unlock()
			if launched == 0 {
				cancel()
				<-errc
				return exitError{code: 130, msg: "interrupted"}
			}
			fmt.Fprintln(out, "interrupted: killing the tasks")
			killAll()
		}
	}
}

// fitting returns the resources to ask of what an offer has left: want as
// unreserved or (when role is set) as reserved for role, or nil.
func fitting(have, want resources.Resources, role string) resources.Resources {
	if have.Contains(want) {
		return want
	}
	if role == "" {
		return nil
	}
	// Reserved for the role (statically or dynamically): take it from the
	// role's entries of the offer.
	reserved := have.Reserved(role)
	var out resources.Resources
	for _, w := range want {
		for _, e := range reserved {
			if e.Name == w.Name && e.Revocable == w.Revocable && e.Type == resources.Scalar && e.Scalar >= w.Scalar {
				e.Scalar = w.Scalar
				out = append(out, e)
				break
			}
		}
	}
	if len(out) != len(want) || !have.Contains(out) {
		return nil
	}
	return out
}

func terminalState(s pb.TaskState) bool {
	switch s {
	case pb.TaskState_TASK_FINISHED, pb.TaskState_TASK_FAILED, pb.TaskState_TASK_KILLED, pb.TaskState_TASK_LOST, pb.TaskState_TASK_GONE:
		return true
	}
	return false
}

func stateName(s pb.TaskState) string { return s.String()[len("TASK_"):] }

// exitOfTask is brim run's exit: the task's exit code, else 0 for
// FINISHED and 1 otherwise.
func exitOfTask(st *pb.TaskStatus) error {
	switch {
	case st.HasExitCode && st.ExitCode != 0:
		return exitError{code: int(st.ExitCode)}
	case st.HasExitCode, st.State == pb.TaskState_TASK_FINISHED:
		if st.State == pb.TaskState_TASK_FINISHED {
			return nil
		}
		return exitError{code: 1}
	}
	return exitError{code: 1}
}
