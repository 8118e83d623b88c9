package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

var _ = registerSubcommand(newRunCommand)

// runTask is the state of `brim run`'s one task.
type runTask struct {
	mu       sync.Mutex
	id       string
	launched bool
	agent    string
}

func newRunCommand() *cobra.Command {
	var (
		addr, role, name, taskID string
		cpus                     float64
		mem                      int64
		revocable                bool
		env                      []string
		failover, killAfter      time.Duration
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
			if taskID == "" {
				taskID = "run-" + uuid.NewString()[:8]
			}
			if name == "" {
				name = taskID
			}
			var roles []string
			if role != "" {
				roles = []string{role}
			}
			d, err := scheduler.New(scheduler.Options{Master: addr, Name: "brim-run", Roles: roles, Revocable: revocable, FailoverTimeout: failover})
			if err != nil {
				return err
			}
			defer d.Close()
			out := cmd.OutOrStdout()
			return runOneTask(cmd.Context(), d, out, &runTask{id: taskID}, &pb.TaskInfo{TaskId: taskID, Name: name, Command: args, Env: env}, want, role, killAfter)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "master", defaultMasterListen, "master address")
	f.Float64Var(&cpus, "cpus", 0.1, "cpus of the task")
	f.Int64Var(&mem, "mem", 64, "memory of the task, MiB")
	f.StringVar(&role, "role", "", "role to subscribe with (default: the master's default role)")
	f.BoolVar(&revocable, "revocable", false, "run on revocable (oversubscribed) resources")
	f.StringVar(&name, "name", "", "task name (default: the task ID)")
	f.StringVar(&taskID, "task-id", "", "task ID (default: run-<random>)")
	f.StringArrayVar(&env, "env", nil, "environment variable K=V (repeatable)")
	f.DurationVar(&failover, "failover-timeout", 10*time.Second, "how long the master keeps the framework after brim run exits")
	f.DurationVar(&killAfter, "kill-after", 0, "kill the task after this long (0: never)")
	markUsageErrors(cmd)
	return cmd
}

// runOneTask launches ti on the first fitting offer and returns the task's
// exit as an exitError.
func runOneTask(ctx context.Context, d *scheduler.Driver, out io.Writer, rt *runTask, ti *pb.TaskInfo, want resources.Resources, role string, killAfter time.Duration) error {
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan *pb.TaskStatus, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- d.Run(sctx, scheduler.Callbacks{
			Subscribed: func(_ context.Context, id string) {
				fmt.Fprintf(out, "subscribed as framework %s\n", id)
				rt.mu.Lock()
				launched := rt.launched
				rt.mu.Unlock()
				if launched {
					_ = d.Reconcile(sctx, rt.id)
				}
			},
			Offers: func(cctx context.Context, offers []*pb.Offer) {
				rt.mu.Lock()
				defer rt.mu.Unlock()
				var decline []string
				for _, o := range offers {
					res := fitting(o, want, role)
					if rt.launched || res == nil {
						decline = append(decline, o.Id)
						continue
					}
					ti.Resources = res.String()
					if err := d.Launch(cctx, []string{o.Id}, []*pb.TaskInfo{ti}, 5); err != nil {
						fmt.Fprintf(out, "launch on %s: %v\n", o.AgentId, err)
						continue
					}
					rt.launched, rt.agent = true, o.AgentId
					if err := d.Suppress(cctx); err != nil {
						fmt.Fprintf(out, "suppress offers: %v\n", err)
					}
				}
				if len(decline) > 0 {
					_ = d.Decline(cctx, decline, 30)
				}
			},
			Update: func(_ context.Context, st *pb.TaskStatus) {
				if st.TaskId != rt.id {
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
					select {
					case done <- st:
					default:
					}
				}
			},
			Error: func(_ context.Context, msg string) { fmt.Fprintf(out, "master error: %s\n", msg) },
		})
	}()
	var killTimer <-chan time.Time
	if killAfter > 0 {
		killTimer = time.After(killAfter)
	}
	interrupted := ctx.Done()
	for {
		select {
		case st := <-done:
			cancel()
			<-errc
			return exitOfTask(st)
		case err := <-errc:
			if err != nil {
				return err
			}
			return exitError{code: 1, msg: "framework stopped"}
		case <-killTimer:
			killTimer = nil
			if err := d.Kill(sctx, rt.id); err != nil {
				fmt.Fprintf(out, "kill %s: %v\n", rt.id, err)
			}
		case <-interrupted:
			interrupted = nil
			rt.mu.Lock()
			launched := rt.launched
			rt.mu.Unlock()
			if !launched {
				cancel()
				<-errc
				return exitError{code: 130, msg: "interrupted"}
			}
			fmt.Fprintf(out, "interrupted: killing task %s\n", rt.id)
			if err := d.Kill(sctx, rt.id); err != nil {
				fmt.Fprintf(out, "kill %s: %v\n", rt.id, err)
			}
		}
	}
}

// fitting returns the resources to ask of offer o: want as unreserved or
// (when role is set) as reserved for role, or nil when o has neither.
func fitting(o *pb.Offer, want resources.Resources, role string) resources.Resources {
	have, err := resources.Parse(o.Resources)
	if err != nil {
		return nil
	}
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
