package scheduler

import (
	"context"
	"errors"
	"fmt"
	"github.com/brimnode/brim/internal/masteraddr"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// ErrNotSubscribed: a call before the driver subscribed.
var ErrNotSubscribed = errors.New("framework not subscribed")

// Options configure a Driver.
type Options struct {
	// Master is the master's address, host:port, or a comma-separated list
	// of the masters of a highly available cluster: the Driver subscribes
	// with the leader, follows the leader a standby names and asks the
	// next listed master when the one it used is gone.
	Master string
	// Discover, when set, finds the masters again (etcd:// discovery):
	// called when every address in use has failed since the framework
	// last subscribed; its answer replaces the list. Nil: fixed list.
	Discover func(context.Context) ([]string, error)
	Name     string
	// Roles default to the master's default role ("default").
	Roles []string
	// Revocable asks for revocable (oversubscribed) resources.
	Revocable bool
	// FrameworkID fails over an existing framework.
	FrameworkID     string
	FailoverTimeout time.Duration
	// Principal and Secret authenticate the framework to a master that has
	// a credentials file: they are sent with every call as gRPC metadata
	// "authorization: Basic base64(principal:secret)", like HTTP basic
	// authentication (in the clear without TLS: add transport credentials
	// to DialOptions across untrusted networks). Without a Principal
	// nothing is sent.
	Principal string
	Secret    string
	// DialOptions are added to the gRPC dial; default insecure.
	DialOptions []grpc.DialOption
	Log         *slog.Logger
}

// Callbacks receive the driver's events, one at a time, from Run's
// goroutine. Nil callbacks are skipped (an unhandled offer is declined).
// The ctx an event's callback gets ends with the subscription the event
// came on (Disconnected's: with Run): a call made with it to a master the
// driver left — one that stopped answering as the leader — fails at once
// (InDoubt) instead of waiting on it.
type Callbacks struct {
	Subscribed func(ctx context.Context, frameworkID string)
	Offers     func(ctx context.Context, offers []*pb.Offer)
	Rescind    func(ctx context.Context, offerID string)
	// Update gets each status update once; it is acknowledged when the
	// callback returns.
	Update func(ctx context.Context, st *pb.TaskStatus)
	// Error gets errors the master reports on the stream.
	Error func(ctx context.Context, msg string)
	// Demand gets every transition of the framework's demands
	// (SubmitDemand); offers of a demand's capacity carry its DemandId.
	Demand func(ctx context.Context, ev *pb.DemandEvent)
	// Disconnected gets why a subscription attempt failed or a
	// subscription broke (a master that cannot be reached gives
	// codes.Unavailable with the dial error), and when Run tries again.
	Disconnected func(ctx context.Context, err error, retryIn time.Duration)
}

// Driver is a framework's connection to the master. Safe for concurrent
// use; Run owns the subscription, the other methods may be called from
// callbacks or other goroutines.
type Driver struct {
	opts    Options
	log     *slog.Logger
	dial    []grpc.DialOption
	masters *masteraddr.Set
	leaders *masteraddr.Leaders // asked who leads (watchLeader)

	mu   sync.Mutex
	cc   *grpc.ClientConn // to masters.Current()
	api  pb.SchedulerClient
	id   string
	seen map[string]bool
}

// New dials the master (lazily: no I/O until Run). Close releases it.
func New(opts Options) (*Driver, error) {
	if opts.Master == "" {
		return nil, errors.New("new scheduler: no master address")
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if opts.Principal != "" {
		if strings.Contains(opts.Principal, ":") {
			return nil, fmt.Errorf("new scheduler: principal %q: must not contain ':'", opts.Principal)
		}
		dial = append(dial, grpc.WithPerRPCCredentials(pb.BasicCredentials(opts.Principal, opts.Secret)))
	}
	// gRPC's own reconnect backoff grows to 2 minutes; Run retries every
	// few seconds and needs the channel to try as often. Keepalive pings
	// find a master whose link lost every packet (no reset) or whose
	// process stopped, as masterlink's do for agents.
	dial = append(dial, grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: minRetry, Multiplier: 1.6, Jitter: 0.2, MaxDelay: maxRetry},
		MinConnectTimeout: 5 * time.Second,
	}), grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: pb.KeepaliveTime, Timeout: pb.KeepaliveTimeout}))
	dial = append(dial, opts.DialOptions...)
	addrs, err := masteraddr.Parse(opts.Master)
	if err != nil {
		return nil, fmt.Errorf("new scheduler: %w", err)
	}
	d := &Driver{opts: opts, log: log.With("component", "scheduler"), dial: dial, masters: masteraddr.NewSet(addrs),
		leaders: masteraddr.NewLeaders(dial), id: opts.FrameworkID, seen: map[string]bool{}}
	if err := d.redial(); err != nil {
		return nil, err
	}
	return d, nil
}

// redial points the Driver at masters.Current(), closing the previous
// channel (calls in flight on it fail and are retried by their callers).
func (d *Driver) redial() error {
	target := d.masters.Current()
	cc, err := grpc.NewClient(target, d.dial...)
	if err != nil {
		return fmt.Errorf("dial master %s: %w", target, err)
	}
	d.mu.Lock()
	old := d.cc
	d.cc, d.api = cc, pb.NewSchedulerClient(cc)
	d.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return nil
}

// conn is the Scheduler client of the master in use.
func (d *Driver) conn() pb.SchedulerClient {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.api
}

// Close closes the connection to the master. The framework stays
// registered until its failover timeout.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return errors.Join(d.cc.Close(), d.leaders.Close())
}

// FrameworkID returns the framework's ID ("" before the first
// subscription).
func (d *Driver) FrameworkID() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.id
}

// Bounds of Run's jittered retry delay. The longest delay (jittered to
// at most 3 s) bounds how long a framework that found no master during
// an outage (all of them restarting, etcd without a quorum) takes to
// reach the leader elected after it: with 5 s (up to 7.5 s) make chaos
// saw frameworks reach a new leader 6.3-6.9 s after its election, past
// the TTL + 2 s that frameworks are held to (docs/ha.md).
const (
	minRetry = 200 * time.Millisecond
	maxRetry = 2 * time.Second
)

// Run subscribes and delivers events to cb until ctx is cancelled,
// re-subscribing with the framework ID after a broken stream or a failed
// attempt (an unreachable master included), after a delay that doubles
// from 200 ms to 2 s, jittered so that many frameworks do not come back
// in step. It returns early only for errors a retry cannot fix
// (InvalidArgument, PermissionDenied, Unauthenticated, and
// FailedPrecondition: the master removed the framework, its failover
// timeout passed).
func (d *Driver) Run(ctx context.Context, cb Callbacks) error {
	delay := minRetry
	for {
		subscribed, err := d.session(masteraddr.WithUnreachable(ctx, d.masters.Unreachable()), cb)
		if ctx.Err() != nil {
			return nil
		}
		switch status.Code(err) {
		case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.FailedPrecondition:
			return fmt.Errorf("subscribe: %w", err)
		}
		if subscribed {
			delay = minRetry
			d.masters.Reached()
		}
		// Several masters: a standby names the leader (or the watch found
		// another elected); otherwise the one in use may be gone, so ask
		// the next.
		var left *masteraddr.LeaderMovedError
		if errors.As(err, &left) {
			d.log.Warn("leaving the master: another leads", "err", err)
			d.masters.Follow(left.Leader)
			delay = minRetry
		} else if leader, ok := masteraddr.Leader(err); ok {
			d.log.Info("master is a standby; following the leader", "leader", leader)
			d.masters.Follow(leader)
			delay = minRetry // a failover under way: no reason to wait longer
		} else {
			d.masters.Left(err) // the only one again when one is listed
			if d.opts.Discover != nil && d.masters.Exhausted() {
				masteraddr.Rediscover(ctx, d.opts.Discover, d.masters, d.log)
			}
		}
		d.mu.Lock()
		moved := d.cc.Target() != d.masters.Current()
		d.mu.Unlock()
		if moved {
			if err := d.redial(); err != nil {
				return err
			}
		}
		wait := jitter(delay)
		d.log.Warn("subscription broken", "err", err, "retry_in", wait)
		if cb.Disconnected != nil {
			cb.Disconnected(ctx, err, wait)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		delay = min(2*delay, maxRetry)
	}
}

// jitter spreads d over [d/2, 3d/2).
func jitter(d time.Duration) time.Duration { return d/2 + rand.N(d) }

// session subscribes and delivers the stream's events until it breaks.
// With several masters listed it also watches who leads, from the
// subscription call on (masteraddr.WatchLeader): the session ends, with the watch's
// *masteraddr.LeaderMovedError, when the master in use stops answering
// as the leader while another is elected.
func (d *Driver) session(ctx context.Context, cb Callbacks) (bool, error) {
	sctx, cancelCause := context.WithCancelCause(ctx)
	var watching sync.WaitGroup
	defer watching.Wait()
	defer cancelCause(nil)
	roles := d.opts.Roles // none: the master's default role
	d.mu.Lock()
	api, cur := d.api, d.cc.Target()
	d.mu.Unlock()
	// The watch starts before the call: a leader that freezes between
	// accepting the stream and answering it must not hold the framework
	// until the keepalive gives up.
	if d.masters.Len() > 1 {
		watching.Add(1)
		go func() {
			defer watching.Done()
			if err := masteraddr.WatchLeader(sctx, d.masters, cur, d.leaders, d.log); sctx.Err() == nil {
				cancelCause(err)
			}
		}()
	}
	causeOf := func(err error) error {
		if cause := context.Cause(sctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return cause
		}
		return err
	}
	stream, err := api.Subscribe(sctx, &pb.SubscribeRequest{Framework: &pb.FrameworkInfo{
		Id: d.FrameworkID(), Name: d.opts.Name, Roles: roles, Revocable: d.opts.Revocable,
		FailoverTimeoutNanos: int64(d.opts.FailoverTimeout), Principal: d.opts.Principal,
	}})
	if err != nil {
		return false, causeOf(err)
	}
	subscribed := false
	for {
		ev, err := stream.Recv()
		if err != nil {
			return subscribed, causeOf(err)
		}
		switch x := ev.Event.(type) {
		case *pb.Event_Subscribed:
			subscribed = true
			d.mu.Lock()
			d.id = x.Subscribed.FrameworkId
			d.mu.Unlock()
			if cb.Subscribed != nil {
				cb.Subscribed(sctx, x.Subscribed.FrameworkId)
			}
		case *pb.Event_Offers:
			if cb.Offers != nil {
				cb.Offers(sctx, x.Offers.Offers)
			} else {
				ids := make([]string, 0, len(x.Offers.Offers))
				for _, o := range x.Offers.Offers {
					ids = append(ids, o.Id)
				}
				if err := d.Decline(sctx, ids, -1); err != nil {
					d.log.Debug("decline unhandled offers", "err", err)
				}
			}
		case *pb.Event_Rescind:
			if cb.Rescind != nil {
				cb.Rescind(sctx, x.Rescind.OfferId)
			}
		case *pb.Event_Update:
			d.update(sctx, cb, x.Update)
		case *pb.Event_Error:
			if cb.Error != nil {
				cb.Error(sctx, x.Error.Message)
			}
		case *pb.Event_Demand:
			if cb.Demand != nil {
				cb.Demand(sctx, x.Demand)
			}
		case *pb.Event_Heartbeat:
		}
	}
}

// update delivers an update once and acknowledges it (again for a
// duplicate: the first acknowledgement may have been lost).
func (d *Driver) update(ctx context.Context, cb Callbacks, st *pb.TaskStatus) {
	dup := false
	if st.Uuid != "" {
		d.mu.Lock()
		dup = d.seen[st.Uuid]
		d.seen[st.Uuid] = true
		d.mu.Unlock()
	}
	if !dup && cb.Update != nil {
		cb.Update(ctx, st)
	}
	if st.Uuid != "" {
		if err := d.Acknowledge(ctx, st.AgentId, st.TaskId, st.Uuid); err != nil {
			d.log.Debug("acknowledge", "task", st.TaskId, "err", err)
		}
	}
}

func (d *Driver) fid() (string, error) {
	id := d.FrameworkID()
	if id == "" {
		return "", ErrNotSubscribed
	}
	return id, nil
}

func filters(refuseSeconds float64) *pb.Filters { return &pb.Filters{RefuseSeconds: refuseSeconds} }

// Accept applies operations to offers of one agent; what the operations
// do not use is declined for refuseSeconds (negative: the master's
// default).
func (d *Driver) Accept(ctx context.Context, offerIDs []string, ops []*pb.Operation, refuseSeconds float64) error {
	id, err := d.fid()
	if err != nil {
		return err
	}
	_, err = d.conn().Accept(ctx, &pb.AcceptRequest{FrameworkId: id, OfferIds: offerIDs, Operations: ops, Filters: filters(refuseSeconds)})
	return err
}

// InDoubt reports whether a call that failed with err may still have been
// carried out by the master: the call ended without the master's answer
// (codes.Unavailable other than a standby's, DeadlineExceeded, Canceled)
// — the connection broke, or the master died, after the call may have
// reached it. An Accept that failed so may have launched its tasks (the
// master stages a launch and sends it to the agent before it answers): a
// framework learns their fate by reconciling them, not by launching the
// same task IDs again, which the master refuses as in use when the agent
// runs them. A standby's answer and the master's refusals are answers:
// nothing was done; so is ErrNotSubscribed (no call was made).
func InDoubt(err error) bool {
	if err == nil || errors.Is(err, ErrNotSubscribed) {
		return false
	}
	if _, standby := masteraddr.Leader(err); standby {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}

// Launch is Accept with one LAUNCH operation.
func (d *Driver) Launch(ctx context.Context, offerIDs []string, tasks []*pb.TaskInfo, refuseSeconds float64) error {
	return d.Accept(ctx, offerIDs, []*pb.Operation{{Op: &pb.Operation_Launch_{Launch: &pb.Operation_Launch{Tasks: tasks}}}}, refuseSeconds)
}

// Decline returns offers; they are not offered again for refuseSeconds
// (negative: the master's default).
func (d *Driver) Decline(ctx context.Context, offerIDs []string, refuseSeconds float64) error {
	id, err := d.fid()
	if err != nil {
		return err
	}
	_, err = d.conn().Decline(ctx, &pb.DeclineRequest{FrameworkId: id, OfferIds: offerIDs, Filters: filters(refuseSeconds)})
	return err
}

// Revive clears filters and unsuppresses roles (all when none named).
func (d *Driver) Revive(ctx context.Context, roles ...string) error {
	id, err := d.fid()
	if err != nil {
		return err
	}
	_, err = d.conn().Revive(ctx, &pb.ReviveRequest{FrameworkId: id, Roles: roles})
	return err
}

// Suppress stops offers for roles (all when none named) until Revive.
func (d *Driver) Suppress(ctx context.Context, roles ...string) error {
	id, err := d.fid()
	if err != nil {
		return err
	}
	_, err = d.conn().Suppress(ctx, &pb.SuppressRequest{FrameworkId: id, Roles: roles})
	return err
}

// Kill asks for a task to be killed; a KILLED update follows.
func (d *Driver) Kill(ctx context.Context, taskID string) error {
	id, err := d.fid()
	if err != nil {
		return err
	}
	_, err = d.conn().Kill(ctx, &pb.KillRequest{FrameworkId: id, TaskId: taskID})
	return err
}

// Acknowledge acknowledges a status update (Run does it itself).
func (d *Driver) Acknowledge(ctx context.Context, agentID, taskID, uuid string) error {
	id, err := d.fid()
	if err != nil {
		return err
	}
	_, err = d.conn().Acknowledge(ctx, &pb.AcknowledgeRequest{FrameworkId: id, AgentId: agentID, TaskId: taskID, Uuid: uuid})
	return err
}

// Reconcile asks for the latest state of tasks (all when none named), sent
// as updates.
func (d *Driver) Reconcile(ctx context.Context, taskIDs ...string) error {
	id, err := d.fid()
	if err != nil {
		return err
	}
	_, err = d.conn().Reconcile(ctx, &pb.ReconcileRequest{FrameworkId: id, TaskIds: taskIDs})
	return err
}

// UpdateTask asks the master to resize a running task to res, its new
// total in the text syntax of package resources (same names, roles and
// revocability as now). Growth must come from offerIDs, offers of the
// task's agent (their unused part goes back, as after Accept); a shrink
// needs none. The outcome arrives as a status update of the task with
// reason masterlinkpb.ReasonResourcesUpdated (its Resources field holds
// the new total) or masterlinkpb.ReasonResourcesUpdateFailed (the task
// keeps its resources). A rejected call changes nothing: codes.NotFound
// (unknown task), FailedPrecondition (stale offer, task not running, an
// update in flight), InvalidArgument (bad resources, offer of another
// agent), ResourceExhausted (growth not in the offers).
func (d *Driver) UpdateTask(ctx context.Context, taskID, res string, offerIDs []string) error {
	id, err := d.fid()
	if err != nil {
		return err
	}
	_, err = d.conn().UpdateTask(ctx, &pb.UpdateTaskRequest{FrameworkId: id, TaskId: taskID, Resources: res, OfferIds: offerIDs})
	return err
}
