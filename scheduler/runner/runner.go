package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/brimnode/brim/scheduler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrInterrupted: ctx ended before a task ran (or every launched task
	// was killed for it).
	ErrInterrupted = errors.New("interrupted")
	// ErrTimeout: the master or an offer that fits did not come within
	// Config.Timeout; the error says which and why.
	ErrTimeout = errors.New("gave up waiting")
	// ErrRefused: the master refused to launch a task for a reason a
	// retry cannot fix (an invalid task ID, one in use, not permitted).
	ErrRefused = errors.New("the master refused to launch")
	// ErrStopped: the driver stopped without an error.
	ErrStopped = errors.New("framework stopped")
)

// ExitError is a task that did not finish successfully: its exit code,
// or 1 when it ended without one (KILLED, LOST).
type ExitError struct {
	TaskID string
	Code   int
}

func (e *ExitError) Error() string { return fmt.Sprintf("task %s: exit status %d", e.TaskID, e.Code) }

// Config describes the tasks of one run.
type Config struct {
	// Task is the template of every task: Name, Command, Env, User,
	// Userns and the image fields (TaskId and Resources are set per
	// task).
	Task *pb.TaskInfo
	// IDs are the tasks' IDs, one task each; with more than one the
	// tasks are named Task.Name-0, -1, ….
	IDs []string
	// Want is what each task asks for.
	Want resources.Resources
	// Role, when set, lets tasks use resources reserved for it.
	Role string
	// PerOffer caps the tasks launched on one offer (0: no cap).
	PerOffer int
	// KillAfter kills the tasks after this long (0: never).
	KillAfter time.Duration
	// Timeout bounds every wait for the master (not reachable, or the
	// subscription broken), and the wait for a first offer that fits,
	// counted from the start (once a copy launched, the others wait for
	// resources as long as it takes). 0: no bound.
	Timeout time.Duration
	// Master names the master in messages.
	Master string
	// Out gets the progress lines.
	Out io.Writer
	// Explain, if set, may add to why the master cannot be reached (e.g.
	// that it serves TLS), called after each failed attempt.
	Explain func(ctx context.Context, err error) error
}

// Run runs the tasks of cfg through d until all have ended: it returns
// nil when all finished, else the first failed task's *ExitError (in
// cfg.IDs order). When ctx ends it kills the launched tasks and returns
// once they ended (ErrInterrupted if none had launched). It returns an
// error wrapping ErrTimeout or ErrRefused when giving up (after killing
// what had launched, if the master is there to do it), and d.Run's error
// when the master refuses the framework. Run owns d's Run loop; d stays
// open.
func Run(ctx context.Context, d *scheduler.Driver, cfg Config) error {
	r := newRun(d, cfg, time.Now())
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- d.Run(sctx, r.callbacks(sctx)) }()
	stop := func() {
		cancel()
		err := <-errc // wait for Run to end
		_ = err       // cancelled by us: its error says only that
	}

	var killTimer <-chan time.Time
	if cfg.KillAfter > 0 {
		killTimer = time.After(cfg.KillAfter)
	}
	interrupted := ctx.Done()
	var giveUp error // why the tasks are being killed, when not for ctx
	for {
		timeout, expire := r.timer()
		select {
		case <-r.allDone:
			stop()
			if giveUp != nil {
				return giveUp
			}
			return r.result()
		case err := <-errc:
			if err != nil {
				return err
			}
			return ErrStopped
		case <-killTimer:
			killTimer = nil
			r.killAll(sctx)
		case <-r.nudge:
			err := r.fatalErr()
			if err == nil || giveUp != nil {
				continue
			}
			if !r.killFor(sctx, err) {
				stop()
				return err
			}
			giveUp = err
		case <-expire:
			err := r.timeoutErr(sctx, timeout)
			if giveUp != nil || !r.killFor(sctx, err) {
				stop()
				return err
			}
			giveUp = err
		case <-interrupted:
			interrupted = nil
			if !r.anyLaunched() {
				stop()
				return ErrInterrupted
			}
			r.printf("interrupted: killing the tasks\n")
			r.killAll(sctx)
		}
	}
}

// run is the state of one Run. Its fields are guarded by mu; callbacks
// (the driver's goroutine) and Run's loop share it.
type run struct {
	d   *scheduler.Driver
	cfg Config
	s   spec

	outMu sync.Mutex

	mu        sync.Mutex
	tasks     []task // every task, launched or not
	launched  map[string]bool
	shown     map[string]pb.TaskState // the last state printed, by task
	ended     map[string]*pb.TaskStatus
	stopping  bool
	connected bool
	lastErr   error     // why the master was last unreachable
	printed   string    // last unreachable message printed
	printedAt time.Time // and when
	waitSince time.Time // zero: waiting for nothing
	free      map[string]resources.Resources
	told      map[string]string // agent → resources said not to fit
	offers    int               // offers received
	fatal     error
	allDone   chan struct{}
	closed    bool
	nudge     chan struct{} // a fatal error, or the wait changed
}

func newRun(d *scheduler.Driver, cfg Config, now time.Time) *run {
	r := &run{d: d, cfg: cfg, launched: map[string]bool{}, shown: map[string]pb.TaskState{}, ended: map[string]*pb.TaskStatus{},
		free: map[string]resources.Resources{}, told: map[string]string{}, waitSince: now,
		allDone: make(chan struct{}), nudge: make(chan struct{}, 1)}
	if cfg.Out == nil {
		r.cfg.Out = io.Discard
	}
	r.s = spec{command: cfg.Task.Command, env: cfg.Task.Env, user: cfg.Task.User, userns: cfg.Task.Userns,
		image: cfg.Task.Image, imagePull: cfg.Task.ImagePull, imageRW: cfg.Task.ImageReadWrite,
		want: cfg.Want, role: cfg.Role, perOffer: cfg.PerOffer}
	for i, id := range cfg.IDs {
		name := cfg.Task.Name
		if len(cfg.IDs) > 1 {
			name = fmt.Sprintf("%s-%d", name, i)
		}
		r.tasks = append(r.tasks, task{ID: id, Name: name})
	}
	return r
}

func (r *run) printf(format string, args ...any) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	fmt.Fprintf(r.cfg.Out, format, args...)
}

func (r *run) poke() {
	select {
	case r.nudge <- struct{}{}:
	default:
	}
}

// timer returns the running wait's bound and a channel that fires when
// it passes (nil when nothing is awaited or there is no bound).
func (r *run) timer() (time.Duration, <-chan time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg.Timeout <= 0 || r.waitSince.IsZero() {
		return 0, nil
	}
	return r.cfg.Timeout, time.After(time.Until(r.waitSince.Add(r.cfg.Timeout)))
}

// waitingLocked recomputes whether anything is awaited: the master, or
// an offer that fits while no task has launched. Once one has, the task
// fits somewhere, and the other copies wait for resources to free up as
// long as that takes. A wait that goes on keeps its start.
func (r *run) waitingLocked() {
	switch {
	case !waiting(r.connected, len(r.launched), len(r.pendingLocked()), r.stopping):
		r.waitSince = time.Time{}
	case r.waitSince.IsZero():
		r.waitSince = time.Now()
	}
	r.poke()
}

// waiting tells whether Run is waiting for something that --timeout
// bounds: the master, or the first offer that fits.
func waiting(connected bool, launched, pending int, stopping bool) bool {
	return !connected || (launched == 0 && pending > 0 && !stopping)
}

func (r *run) pendingLocked() []task {
	var out []task
	for _, t := range r.tasks {
		if !r.launched[t.ID] {
			out = append(out, t)
		}
	}
	return out
}

func (r *run) liveLocked() []string {
	var out []string
	for _, t := range r.tasks {
		if r.launched[t.ID] && r.ended[t.ID] == nil {
			out = append(out, t.ID)
		}
	}
	return out
}

func (r *run) anyLaunched() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.launched) > 0
}

func (r *run) fatalErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}

// checkDoneLocked closes allDone once every task that will ever run has
// ended.
func (r *run) checkDoneLocked() {
	if !r.closed && len(r.ended) == len(r.tasks) {
		r.closed = true
		close(r.allDone)
	}
}

// stopLocked gives up on tasks not launched yet.
func (r *run) stopLocked() {
	r.stopping = true
	var keep []task
	for _, t := range r.tasks {
		if r.launched[t.ID] {
			keep = append(keep, t)
		}
	}
	r.tasks = keep
	r.checkDoneLocked()
	r.waitingLocked()
}

// killAll gives up on pending tasks and kills the live ones.
func (r *run) killAll(ctx context.Context) {
	r.mu.Lock()
	r.stopLocked()
	live := r.liveLocked()
	r.mu.Unlock()
	for _, id := range live {
		if err := r.d.Kill(ctx, id); err != nil {
			r.printf("kill %s: %v\n", id, err)
		}
	}
}

// killFor kills the live tasks because of err, when the master is there
// to do it; it reports whether Run must wait for them to end.
func (r *run) killFor(ctx context.Context, err error) bool {
	r.mu.Lock()
	live := len(r.liveLocked())
	connected := r.connected
	r.mu.Unlock()
	if live == 0 || !connected {
		return false
	}
	r.printf("%v: killing the tasks\n", err)
	r.killAll(ctx)
	return true
}

// result is Run's outcome once every task ended.
func (r *run) result() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping && len(r.tasks) == 0 {
		return ErrInterrupted
	}
	for _, t := range r.tasks {
		if err := exitOf(r.ended[t.ID]); err != nil {
			return err
		}
	}
	return nil
}

// timeoutErr says why the wait that just passed its bound failed.
func (r *run) timeoutErr(ctx context.Context, timeout time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.connected && len(r.launched) > 0:
		return fmt.Errorf("%w: lost the master at %s for %v: %v; it ends the tasks after the framework's failover timeout",
			ErrTimeout, r.cfg.Master, timeout, r.lastErr)
	case !r.connected && r.lastErr != nil:
		return fmt.Errorf("%w: cannot reach the master at %s within %v: %w", ErrTimeout, r.cfg.Master, timeout, r.lastErr)
	case !r.connected:
		return fmt.Errorf("%w: no answer from the master at %s within %v", ErrTimeout, r.cfg.Master, timeout)
	case len(r.free) == 0:
		return fmt.Errorf("%w: no offer within %v for %s: no agent has free resources for the framework (is any agent registered with the master, and are its resources in use?)",
			ErrTimeout, timeout, r.cfg.Want)
	}
	return fmt.Errorf("%w: no agent can fit %s (waited %v); the largest free resources offered: %s",
		ErrTimeout, r.cfg.Want, timeout, largest(r.free, r.cfg.Want))
}

func (r *run) callbacks(ctx context.Context) scheduler.Callbacks {
	return scheduler.Callbacks{
		Subscribed:   r.subscribed,
		Disconnected: r.disconnected,
		Offers:       r.offersIn,
		Update:       r.update,
		Error:        func(_ context.Context, msg string) { r.printf("master error: %s\n", msg) },
	}
}

func (r *run) subscribed(ctx context.Context, id string) {
	r.printf("subscribed as framework %s\n", id)
	r.mu.Lock()
	r.connected = true
	r.printed = ""
	live := r.liveLocked()
	pending := len(r.pendingLocked())
	stopping := r.stopping
	r.waitingLocked()
	r.mu.Unlock()
	if pending > 0 && !stopping {
		r.printf("waiting for an offer that fits %s (%d task(s) to launch)\n", r.cfg.Want, pending)
	}
	if len(live) > 0 {
		_ = r.d.Reconcile(ctx, live...)
	}
}

// disconnected notes why the master is not there, printing it when that
// changed or every 30 s.
func (r *run) disconnected(ctx context.Context, err error, retryIn time.Duration) {
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unavailable {
		err = errors.New(dialCause(st.Message()))
	}
	if r.cfg.Explain != nil {
		err = r.cfg.Explain(ctx, err)
	}
	msg := err.Error()
	r.mu.Lock()
	r.connected = false
	r.lastErr = err
	say := msg != r.printed || time.Since(r.printedAt) >= 30*time.Second
	if say {
		r.printed, r.printedAt = msg, time.Now()
	}
	r.waitingLocked()
	r.mu.Unlock()
	if say {
		r.printf("waiting for the master at %s: %s (retrying in %v)\n", r.cfg.Master, msg, retryIn.Round(time.Millisecond))
	}
}

// dialCause strips gRPC's wrapping off a dial error's message:
// `connection error: desc = "transport: Error while dialing: dial tcp
// …: connection refused"` says "dial tcp …: connection refused".
func dialCause(msg string) string {
	const prefix = `connection error: desc = "transport: `
	if !strings.HasPrefix(msg, prefix) || !strings.HasSuffix(msg, `"`) {
		return msg
	}
	msg = strings.TrimSuffix(strings.TrimPrefix(msg, prefix), `"`)
	return strings.TrimPrefix(msg, "Error while dialing: ")
}

func (r *run) offersIn(ctx context.Context, offers []*pb.Offer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.offers += len(offers)
	for _, o := range offers {
		if have, err := resources.Parse(o.Resources); err == nil {
			r.free[o.AgentId] = have
		}
	}
	var pending []task
	if !r.stopping && r.fatal == nil {
		pending = r.pendingLocked()
	}
	launches, decline, noFit := match(offers, pending, r.s)
	for _, l := range launches {
		err := r.d.Launch(ctx, []string{l.offer.Id}, l.tasks, l.refuse)
		switch {
		case err == nil:
		case scheduler.InDoubt(err):
			// The master may have launched them before its answer was
			// lost (killed right after staging them): they count as
			// launched, and the next subscription's reconciliation
			// tells their fate. Launching their IDs again would be
			// refused as in use, or run them twice.
			r.printf("launch on %s: %v: the master may have launched %s; asking it once it is back\n", l.offer.AgentId, err, taskIDs(l.tasks))
		case status.Code(err) == codes.InvalidArgument || status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated:
			r.fatal = fmt.Errorf("%w: %s", ErrRefused, status.Convert(err).Message())
			r.poke()
			continue
		default:
			r.printf("launch on %s: %v\n", l.offer.AgentId, err)
			continue
		}
		for _, t := range l.tasks {
			r.launched[t.TaskId] = true
		}
		r.waitingLocked()
	}
	// Only the offers a task did not fit in: one that another offer of
	// the same batch left with nothing to place was said "does not fit"
	// though it did.
	for _, id := range noFit {
		r.tellNoFitLocked(offers, id)
	}
	if len(decline) > 0 {
		_ = r.d.Decline(ctx, decline, declineRefuse)
	}
	if len(r.pendingLocked()) == 0 {
		if err := r.d.Suppress(ctx); err != nil {
			r.printf("suppress offers: %v\n", err)
		}
	}
}

// taskIDs lists the IDs of tasks, comma-separated.
func taskIDs(tasks []*pb.TaskInfo) string {
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.TaskId
	}
	return strings.Join(ids, ", ")
}

// tellNoFitLocked says once per agent and resources that its offer is too
// small.
func (r *run) tellNoFitLocked(offers []*pb.Offer, id string) {
	for _, o := range offers {
		if o.Id != id || r.told[o.AgentId] == o.Resources {
			continue
		}
		r.told[o.AgentId] = o.Resources
		r.printf("agent %s offers %s: does not fit %s\n", o.AgentId, o.Resources, r.cfg.Want)
	}
}

func (r *run) update(ctx context.Context, st *pb.TaskStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.launched[st.TaskId] || r.ended[st.TaskId] != nil {
		return
	}
	if last, ok := r.shown[st.TaskId]; ok && !st.State.Terminal() && stage(st.State) <= stage(last) {
		// Not a transition: a reconciliation answer, or an update the
		// agent sent again to a new leader after a failover — which
		// may come after the new leader's answer and be older (STARTING
		// after RUNNING).
		return
	}
	r.shown[st.TaskId] = st.State
	r.printf("%s\n", statusLine(st))
	// A reconciliation answer is final only when LOST (the master kills
	// the task should its agent turn up later); a terminal state it
	// reports for a known task is followed by the agent's own update,
	// which is acknowledged.
	if st.State.Terminal() && (st.Reason != pb.ReasonReconciliation || st.State == pb.TaskState_TASK_LOST) {
		// Acknowledge before exiting so the agent stops retrying (the
		// driver's own acknowledgement would race with the exit).
		if st.Uuid != "" {
			if err := r.d.Acknowledge(ctx, st.AgentId, st.TaskId, st.Uuid); err != nil {
				r.printf("acknowledge: %v\n", err)
			}
		}
		r.ended[st.TaskId] = st
		r.checkDoneLocked()
	}
}

// stage orders the states a task lives through: an update of a state
// before the one shown is stale.
func stage(s pb.TaskState) int {
	switch s {
	case pb.TaskState_TASK_STAGING:
		return 1
	case pb.TaskState_TASK_STARTING:
		return 2
	case pb.TaskState_TASK_RUNNING:
		return 3
	case pb.TaskState_TASK_KILLING:
		return 4
	}
	return 5 // terminal (or unknown)
}

// statusLine is how a task's transition is printed:
// "task ID: STATE on agent A (REASON): MESSAGE".
func statusLine(st *pb.TaskStatus) string {
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
	return line
}

func stateName(s pb.TaskState) string { return s.String()[len("TASK_"):] }

// exitOf is a task's outcome: nil for FINISHED without a non-zero exit
// code, else an *ExitError with the task's exit code (1 without one).
func exitOf(st *pb.TaskStatus) error {
	switch {
	case st.HasExitCode && st.ExitCode != 0:
		return &ExitError{TaskID: st.TaskId, Code: int(st.ExitCode)}
	case st.State == pb.TaskState_TASK_FINISHED:
		return nil
	}
	return &ExitError{TaskID: st.TaskId, Code: 1}
}
