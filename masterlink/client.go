package masterlink

import (
	"context"
	"errors"
	"fmt"
	"github.com/brimnode/brim/internal/atomicfile"
	"github.com/brimnode/brim/internal/masteraddr"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/brimnode/brim/internal/speclimit"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/resources"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Defaults of Options: Mesos's status update retry figures, a short
// reconnect backoff (a link that is back is used again within
// DefaultReconnectMax), and keepalives that find a black-holed link
// within DefaultKeepaliveTime + DefaultKeepaliveTimeout.
const (
	DefaultRetryMin         = 10 * time.Second
	DefaultRetryMax         = 10 * time.Minute
	DefaultReconnectMin     = 500 * time.Millisecond
	DefaultReconnectMax     = 5 * time.Second
	DefaultKeepaliveTime    = pb.KeepaliveTime
	DefaultKeepaliveTimeout = pb.KeepaliveTimeout
)

// Fixed parameters of the link.
const (
	// jitter is the share of a backoff delay taken off at random.
	jitter = 0.2
	// connectTimeout bounds one connection attempt (TCP and HTTP/2
	// handshakes; TLS too) whose packets go nowhere.
	connectTimeout = 10 * time.Second
	// defaultRegisterTimeout bounds the wait for the master's
	// Registered, including the wait for a connection: a session that
	// does not register by then is logged and started again.
	defaultRegisterTimeout = 30 * time.Second
)

// Task is a task the master asks the agent to run.
type Task struct {
	ID          string
	FrameworkID string
	Name        string
	Resources   resources.Resources
	Command     []string
	Env         []string
	Labels      map[string]string
	// User runs the task (empty: the agent's default user); UserNS puts
	// it in a user namespace.
	User   string
	UserNS bool
	// RunAsRoot: the master's run_as_root ACL allows the task to run as
	// root (RunTask.run_as_root); never set from a snapshot.
	RunAsRoot bool
	// Image runs the task on an image (TaskInfo.image), pulled as
	// ImagePull says, read-only unless ImageReadWrite.
	Image          string
	ImagePull      string
	ImageReadWrite bool
	// Lent: its revocable resources are capacity the master lends
	// (RunTask.lent): admitted against the agent's own free resources,
	// not its revocable pool. Never set from a snapshot (the agent keeps
	// it with the container).
	Lent bool
}

// TaskSnapshot is a task the agent runs (or ran), reported when it
// (re)registers. A terminal one carries its end (Reason, Message,
// ExitCode), as its final Status said it: a master that restarted shows
// it in its completed history.
type TaskSnapshot struct {
	Task     Task
	State    pb.TaskState
	Reason   string
	Message  string
	ExitCode *int
}

// Status is one state transition of a task, reported with Client.Update:
// framework FrameworkID's task TaskID (tasks of several frameworks may
// share an ID; an empty FrameworkID keys by the task ID alone, as
// runners older than it did).
type Status struct {
	TaskID      string
	FrameworkID string
	State       pb.TaskState
	Reason      string
	Message     string
	// ExitCode is set for tasks whose command exited.
	ExitCode *int
	// Resources are the task's new resources on a RESOURCES_UPDATED
	// status (the Client makes those itself, see TaskUpdater).
	Resources resources.Resources
}

// resizeAnswer reports whether a status answers a resource update.
func resizeAnswer(reason string) bool {
	return reason == pb.ReasonResourcesUpdated || reason == pb.ReasonResourcesUpdateFailed
}

// TaskRunner runs tasks for the Client: the agent, adapted in cmd/brim.
// It reports every state change of its tasks with Client.Update.
type TaskRunner interface {
	// LaunchTask starts a task; an error makes the Client report it
	// FAILED.
	LaunchTask(ctx context.Context, t Task) error
	// KillTask stops framework frameworkID's task taskID (empty
	// frameworkID: an older master's kill, by the task ID alone); it
	// later reports it KILLED. Another framework's task of that ID is
	// never touched.
	KillTask(ctx context.Context, frameworkID, taskID string) error
	// Tasks lists the tasks the runner knows.
	Tasks(ctx context.Context) ([]TaskSnapshot, error)
}

// TaskPreempter is the optional ability of a TaskRunner to kill a task
// the master preempts (KillTask.preempted): killed as KillTask does, it is
// reported KILLED with reason CONTAINER_PREEMPTED and message, which
// names what needed its resources. Without it the task is killed with
// KillTask (the master still tells its framework it was preempted).
type TaskPreempter interface {
	PreemptTask(ctx context.Context, frameworkID, taskID, message string) error
}

// TaskUpdater is the optional ability of a TaskRunner to resize a running
// task (framework frameworkID's taskID; empty frameworkID: by the task ID
// alone) to res (its new total), checkpointing the task's new resources so
// that Tasks reports them. The Client calls it for the master's update
// commands and answers the master with a status in the task's latest
// state: reason RESOURCES_UPDATED with the new resources, or
// RESOURCES_UPDATE_FAILED with the error (also without a TaskUpdater).
// It must be idempotent: the master sends an update again after a
// re-registration that does not show it applied.
type TaskUpdater interface {
	UpdateTask(ctx context.Context, frameworkID, taskID string, res resources.Resources) error
}

// Options configure a Client.
type Options struct {
	// Master is the master's address, host:port, or a comma-separated
	// list of the masters of a highly available cluster: the Client
	// registers with the leader, follows the leader a standby names
	// (masteraddr.NotLeader) and asks the next listed master when the
	// one it used is gone.
	Master string
	// Discover, when set, finds the masters again (etcd:// discovery):
	// called when every address in use has failed since the agent last
	// registered, its answer replaces the list. Nil: the list is fixed.
	Discover func(context.Context) ([]string, error)
	// StateDir keeps the agent ID the master gave and the status updates
	// not yet acknowledged (under StateDir/masterlink).
	StateDir string
	// AgentID is the ID to register with the first time (empty: the
	// master assigns one); afterwards the persisted ID is used.
	AgentID  string
	Hostname string
	// PerformanceScore is the machine's performance score for the
	// master's meDRF sorter (> 0; 0: none sent).
	PerformanceScore float64
	Resources        resources.Resources
	Revocable        resources.Resources
	Runner           TaskRunner
	// RetryMin and RetryMax bound the exponential backoff of status update
	// retries.
	RetryMin, RetryMax time.Duration
	// ReconnectMin and ReconnectMax bound the reconnect backoff, jittered:
	// both the gRPC channel's connection attempts and the Client's own
	// retries of a session that did not register (a refused one waits
	// ReconnectMax). A link that is back is used again within ReconnectMax.
	ReconnectMin, ReconnectMax time.Duration
	// KeepaliveTime and KeepaliveTimeout: after KeepaliveTime without
	// anything from the master the Client pings it, and drops the
	// connection when no answer comes within KeepaliveTimeout — so a link
	// that silently loses every packet (a black hole: no reset ever
	// comes) is found and reconnected. gRPC raises KeepaliveTime to at
	// least 10 s; the master must permit pings that often (ServerOptions).
	KeepaliveTime, KeepaliveTimeout time.Duration
	// Principal and Secret authenticate the agent to a master that
	// authenticates agents: every stream carries the per-RPC credentials
	// "authorization: Basic base64(principal:secret)" (masterlinkpb.BasicCredentials).
	// The dial is without TLS unless DialOptions add it: the secret then
	// crosses the network in clear text. Empty Principal: none sent.
	// Each stream reads Secret when it opens, so a new secret (Set) is
	// used from the next reconnection on.
	Principal string
	Secret    *Secret
	// DialOptions are added to the gRPC dial; default insecure.
	DialOptions []grpc.DialOption
	Log         *slog.Logger
}

// Client is the agent side of masterlink: it registers the agent (its ID
// persisted in the state dir), re-registers with its tasks after any
// break, sends heartbeats, runs the master's commands on the TaskRunner,
// and delivers status updates at least once: each is checkpointed before
// Update returns and resent with exponential backoff until acknowledged,
// one in flight per task, in order. Safe for concurrent use.
type Client struct {
	opts    Options
	log     *slog.Logger
	dir     string
	updates *atomicfile.Dir // the queues' checkpoints: dir/updates

	overMu sync.Mutex // orders oversubscription updates

	mu   sync.Mutex
	id   string
	out  *outbox
	over Oversubscription
	send func(*pb.AgentMessage) error // nil while disconnected
	wake chan struct{}
	// unsaved are the tasks (queueKey) whose queue in memory is newer
	// than its checkpoint (a write failed: a full disk); saveUnsaved
	// retries them.
	unsaved map[string]bool
	// launching are the master's RunTasks whose LaunchTask has not
	// returned, by queueKey: a Register lists them (withLaunching),
	// as the runner's Tasks may not show them yet.
	launching map[string]*Task
	connected bool
	wg        sync.WaitGroup

	registerTimeout time.Duration // defaultRegisterTimeout; shorter in tests
}

// New loads the client's state from opts.StateDir.
func New(opts Options) (*Client, error) {
	if opts.Master == "" || opts.StateDir == "" || opts.Runner == nil {
		return nil, errors.New("new masterlink client: master, state dir and runner are required")
	}
	if _, err := masteraddr.Parse(opts.Master); err != nil {
		return nil, fmt.Errorf("new masterlink client: %w", err)
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = DefaultRetryMin
	}
	if opts.RetryMax < opts.RetryMin {
		opts.RetryMax = max(DefaultRetryMax, opts.RetryMin)
	}
	if opts.ReconnectMin <= 0 {
		opts.ReconnectMin = DefaultReconnectMin
	}
	if opts.ReconnectMax < opts.ReconnectMin {
		opts.ReconnectMax = max(DefaultReconnectMax, opts.ReconnectMin)
	}
	if opts.KeepaliveTime <= 0 {
		opts.KeepaliveTime = DefaultKeepaliveTime
	}
	if opts.KeepaliveTimeout <= 0 {
		opts.KeepaliveTimeout = DefaultKeepaliveTimeout
	}
	if strings.Contains(opts.Principal, ":") {
		return nil, fmt.Errorf("new masterlink client: principal %q: must not contain ':'", opts.Principal)
	}
	if opts.Hostname == "" {
		opts.Hostname, _ = os.Hostname()
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	dir := filepath.Join(opts.StateDir, "masterlink")
	updates, err := atomicfile.NewDir(filepath.Join(dir, "updates"), updateSpares)
	if err != nil {
		return nil, fmt.Errorf("create masterlink state: %w", err)
	}
	c := &Client{opts: opts, log: log.With("component", "masterlink"), dir: dir, updates: updates, over: Oversubscription{Revocable: opts.Revocable},
		out: newOutbox(backoff{Min: opts.RetryMin, Max: opts.RetryMax, Jitter: jitter}, rand.Float64), wake: make(chan struct{}, 1),
		unsaved: map[string]bool{}, launching: map[string]*Task{}, registerTimeout: defaultRegisterTimeout}
	b, err := os.ReadFile(filepath.Join(dir, "agent-id"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read agent id: %w", err)
	}
	c.id = strings.TrimSpace(string(b))
	if c.id == "" {
		c.id = opts.AgentID
	}
	qs, err := loadQueues(filepath.Join(dir, "updates"))
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		c.out.put(q)
	}
	return c, nil
}

// AgentID returns the ID the master gave the agent ("" before the first
// registration).
func (c *Client) AgentID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

// Connected reports whether the client is registered on a live stream.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected
}

// Update checkpoints a status update and queues it for delivery. A repeat
// of the task's latest state is ignored, so runners may report again
// after a restart.
//
// A checkpoint that cannot be written (a full state dir) does not lose
// the update: it is queued and sent all the same, from memory, and Run
// writes the checkpoint again every CheckpointRetry until it succeeds
// (logged once per task and failure). Only an agent that dies before then
// loses it; the master then learns the task's fate from the agent's
// re-registration.
func (c *Client) Update(st Status) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	q, ok := c.out.enqueue(st, uuid.NewString(), time.Now())
	if !ok {
		return nil
	}
	c.out.put(q)
	c.saveLocked(q, "checkpoint status")
	c.poke()
	return nil
}

// CheckpointRetry is how often Run writes again the checkpoints of status
// updates whose write failed.
const CheckpointRetry = time.Second

// updateSpares is how many emptied checkpoint files the updates
// directory keeps for new queues (atomicfile.Dir).
const updateSpares = 256

// saveLocked checkpoints q, or marks it for saveUnsaved to retry.
func (c *Client) saveLocked(q *queue, what string) {
	if err := q.save(c.updates); err != nil {
		if !c.unsaved[q.key()] {
			c.log.Warn(what+": kept in memory, the checkpoint is retried", "task", q.TaskID, "framework", q.FrameworkID, "err", err)
		}
		c.unsaved[q.key()] = true
		return
	}
	if c.unsaved[q.key()] {
		c.log.Info(what+": checkpoint written after all", "task", q.TaskID, "framework", q.FrameworkID)
		delete(c.unsaved, q.key())
	}
}

// saveUnsaved retries the checkpoints that failed.
func (c *Client) saveUnsaved() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.unsaved {
		if q := c.out.queues[id]; q != nil {
			c.saveLocked(q, "checkpoint status")
		} else {
			delete(c.unsaved, id)
		}
	}
}

// retryCheckpoints runs saveUnsaved every CheckpointRetry until ctx ends,
// and once more then.
func (c *Client) retryCheckpoints(ctx context.Context) {
	t := time.NewTicker(CheckpointRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.saveUnsaved()
			return
		case <-t.C:
			c.saveUnsaved()
		}
	}
}

// Oversubscription is the agent's oversubscription status as the master
// shows it: the forwarded estimate and the QoS corrections.
type Oversubscription struct {
	// Revocable is what the master may offer as revocable.
	Revocable resources.Resources
	// InUse is what revocable containers held when Revocable was
	// computed: the pool's total is Revocable + InUse. InUseSet says it
	// was (an estimate was forwarded; InUse may be empty).
	InUse    resources.Resources
	InUseSet bool
	// Estimator and QoS name the agent's estimator and QoS controller;
	// Summary explains the latest estimate.
	Estimator, QoS, Summary string
	// Corrections are the corrections in force and the recent kills.
	Corrections []*pb.Correction
}

// registered is o as a Register carries it: nil for an agent that never
// set one (no estimator).
func (o Oversubscription) registered() *pb.Oversubscribed {
	if o.equal(Oversubscription{}) {
		return nil
	}
	return o.proto()
}

func (o Oversubscription) proto() *pb.Oversubscribed {
	return &pb.Oversubscribed{Revocable: o.Revocable.String(), RevocableInUse: o.InUse.String(), RevocableInUseSet: o.InUseSet, Corrections: o.Corrections,
		Estimator: o.Estimator, Summary: o.Summary, Qos: o.QoS}
}

func (o Oversubscription) equal(p Oversubscription) bool {
	if !o.Revocable.Equal(p.Revocable) || !o.InUse.Equal(p.InUse) || o.InUseSet != p.InUseSet || o.Estimator != p.Estimator || o.QoS != p.QoS ||
		o.Summary != p.Summary || len(o.Corrections) != len(p.Corrections) {
		return false
	}
	for i := range o.Corrections {
		if !proto.Equal(o.Corrections[i], p.Corrections[i]) {
			return false
		}
	}
	return true
}

// SetRevocable sends the agent's oversubscribed resources when they
// change.
func (c *Client) SetRevocable(res resources.Resources) error {
	return c.UpdateOversubscription(func(o *Oversubscription) { o.Revocable = res })
}

// SetOversubscription sends the agent's oversubscription status when it
// changes; the master shows it in its state and offers o.Revocable. While
// disconnected it is sent with the next Register.
func (c *Client) SetOversubscription(o Oversubscription) error {
	return c.UpdateOversubscription(func(p *Oversubscription) { *p = o })
}

// UpdateOversubscription changes the oversubscription status with f (given
// a copy of the current one) and sends the result when it differs. Updates
// are sent in the order they are made.
func (c *Client) UpdateOversubscription(f func(*Oversubscription)) error {
	c.overMu.Lock()
	defer c.overMu.Unlock()
	c.mu.Lock()
	o := c.over
	o.Corrections = slices.Clone(o.Corrections)
	f(&o)
	if c.over.equal(o) {
		c.mu.Unlock()
		return nil
	}
	c.over = o
	send := c.send
	c.mu.Unlock()
	if send == nil {
		return nil // sent with the next Register
	}
	if err := send(&pb.AgentMessage{Msg: &pb.AgentMessage_Oversubscribed{Oversubscribed: o.proto()}}); err != nil {
		return fmt.Errorf("send oversubscription: %w", err)
	}
	return nil
}

func (c *Client) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run connects to the master and serves the link until ctx is cancelled,
// reconnecting with backoff. It waits for the task launches it started.
//
// Reconnecting is bounded: the channel retries a connection with a
// jittered backoff from ReconnectMin up to ReconnectMax (never gRPC's
// default, which grows to 2 minutes: 45 s to come back after a 150 s
// cut), and a session waits for the connection rather than failing fast,
// so the link is used again within ReconnectMax of being back. Keepalive
// pings (KeepaliveTime, KeepaliveTimeout) find a link that loses every
// packet without a reset. A session that has not registered within 30 s
// (no connection, no answer) is logged and started again.
//
// A registration the master refuses (codes.Unauthenticated or
// PermissionDenied: missing or bad credentials, an ACL, an agent ID
// registered by another principal) is logged with the master's reason and
// retried after ReconnectMax, so a misconfigured agent never spins. When
// that happens before Run registered at all, Run returns an error wrapping
// ErrRejected at once instead, so that a misconfiguration shows when the
// agent starts.
func (c *Client) Run(ctx context.Context) error {
	dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if c.opts.Principal != "" {
		dial = append(dial, grpc.WithPerRPCCredentials(rotatingAuth{principal: c.opts.Principal, secret: c.opts.Secret}))
	}
	p := c.linkParams()
	dial = append(dial, grpc.WithConnectParams(p.connect), grpc.WithKeepaliveParams(p.keepalive),
		// Stated, not relied on: specs and registration pages stay far below.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(speclimit.MaxMsgBytes), grpc.MaxCallSendMsgSize(speclimit.MaxMsgBytes)))
	dial = append(dial, c.opts.DialOptions...)
	addrs, err := masteraddr.Parse(c.opts.Master)
	if err != nil {
		return fmt.Errorf("masterlink: %w", err)
	}
	masters := masteraddr.NewSet(addrs)
	leaders := masteraddr.NewLeaders(dial)
	defer func() { _ = leaders.Close() }()
	// With several masters, a session also watches who leads, through
	// another master, and ends when the one in use stops answering as the
	// leader while another is elected (masteraddr.WatchLeader).
	watch := func(ctx context.Context, cur string) error {
		if masters.Len() < 2 {
			<-ctx.Done()
			return ctx.Err()
		}
		return masteraddr.WatchLeader(ctx, masters, cur, leaders, c.log)
	}
	cpCtx, stopCheckpoints := context.WithCancel(context.Background())
	cpDone := make(chan struct{})
	go func() { defer close(cpDone); c.retryCheckpoints(cpCtx) }()
	defer func() { stopCheckpoints(); <-cpDone }() // after the launches' last updates (c.wg)
	defer c.wg.Wait()
	retry := p.retry
	attempt := 0
	everRegistered := false
	for {
		target := masters.Current()
		cc, err := grpc.NewClient(target, dial...)
		if err != nil {
			return fmt.Errorf("dial master %s: %w", target, err)
		}
		api := pb.NewAgentLinkClient(cc)
		for target == masters.Current() {
			registered, err := c.session(masteraddr.WithUnreachable(ctx, masters.Unreachable()), cc, api, masters.Len() == 1 && c.opts.Discover == nil, watch)
			if ctx.Err() != nil {
				_ = cc.Close() // the run is over; its error is the one to report
				return nil
			}
			everRegistered = everRegistered || registered
			if registered {
				attempt = 0
				masters.Reached()
			}
			wait := retry.delay(attempt, rand.Float64())
			var moved *masteraddr.LeaderMovedError
			switch leader, notLeader := masteraddr.Leader(err); {
			case errors.As(err, &moved):
				masters.Follow(leader)
				attempt, wait = -1, retry.delay(0, rand.Float64())
				c.log.Warn("leaving the master: another leads", "master", target, "err", err, "retry_in", wait)
			case notLeader:
				// A standby: go to the leader it names (the next
				// listed master while none is elected).
				masters.Follow(leader)
				if leader != "" { // the leader is known: try it soon
					attempt, wait = -1, retry.delay(0, rand.Float64())
				}
				c.log.Info("master is a standby; following the leader", "master", target, "leader", leader, "retry_in", wait)
			case !registered && rejected(err):
				if !everRegistered {
					_ = cc.Close()
					return fmt.Errorf("master %s refused the agent: %w: %w", target, ErrRejected, err)
				}
				wait = retry.Max
				c.log.Error("master refused the agent", "master", target, "err", err, "retry_in", wait)
			default:
				c.log.Warn("master link down", "master", target, "err", err, "retry_in", wait)
				// The leader may be gone: ask the next listed master
				// (the only one again when one is listed — or it, after
				// a leader it named), saying this one was unreachable
				// when the link broke.
				masters.Left(err)
				if c.opts.Discover != nil && masters.Exhausted() {
					masteraddr.Rediscover(ctx, c.opts.Discover, masters, c.log)
				}
			}
			select {
			case <-ctx.Done():
				_ = cc.Close()
				return nil
			case <-time.After(wait):
			}
			attempt++
		}
		_ = cc.Close()
	}
}

// linkParams are the link's reconnect and keepalive parameters.
type linkParams struct {
	retry     backoff // the Client's retries of a session
	connect   grpc.ConnectParams
	keepalive keepalive.ClientParameters
}

// linkParams derives the gRPC channel's parameters from the options.
// gRPC's backoff jitter is symmetric (±Jitter), so its cap is lowered to
// keep every delay within ReconnectMax.
func (c *Client) linkParams() linkParams {
	return linkParams{
		retry: backoff{Min: c.opts.ReconnectMin, Max: c.opts.ReconnectMax, Jitter: jitter},
		connect: grpc.ConnectParams{
			Backoff: grpcbackoff.Config{BaseDelay: c.opts.ReconnectMin, Multiplier: 1.6, Jitter: jitter,
				MaxDelay: max(c.opts.ReconnectMin, time.Duration(float64(c.opts.ReconnectMax)/(1+jitter)))},
			MinConnectTimeout: connectTimeout,
		},
		keepalive: keepalive.ClientParameters{Time: c.opts.KeepaliveTime, Timeout: c.opts.KeepaliveTimeout},
	}
}

// reportConnectErrors logs, while a session waits for the channel to
// connect, why it cannot: each time the channel fails (a new reason only
// once), a fail-fast probe reads the channel's last error — an unreachable
// master, a TLS certificate of another CA — so an operator sees it at once
// rather than when the registration times out. It returns when the channel
// is ready or ctx ends.
func (c *Client) reportConnectErrors(ctx context.Context, cc *grpc.ClientConn, api pb.AgentLinkClient) {
	last := ""
	for {
		st := cc.GetState()
		switch st {
		case connectivity.Ready:
			return
		case connectivity.TransientFailure:
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			probe, err := api.Connect(pctx) // fails at once in this state
			cancel()
			if err == nil {
				_ = probe.CloseSend() // connected meanwhile: the session's stream is the one used
				return
			}
			if msg := err.Error(); msg != last && ctx.Err() == nil {
				last = msg
				c.log.Warn("master link down", "master", c.opts.Master, "err", err, "state", st.String())
			}
		}
		if !cc.WaitForStateChange(ctx, st) {
			return
		}
	}
}

// errRegisterTimeout ends a session that did not register in time.
var errRegisterTimeout = errors.New("no registration in time")

// session runs one stream: register, then serve until it breaks.
// With waitForReady (one master listed, no discovery) it waits for the
// channel to connect; with several, or a discovery to ask again, it fails
// fast, so that Run asks the next one. From the start it runs watch
// (for the master at cc.Target()) beside the stream: the error it
// returns before the session ends (a *masteraddr.LeaderMovedError) ends
// the session, and is the session's error.
func (c *Client) session(ctx context.Context, cc *grpc.ClientConn, api pb.AgentLinkClient, waitForReady bool,
	watch func(context.Context, string) error) (bool, error) {
	sctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(nil) }
	// The watch runs from the start: a leader that freezes between
	// taking the stream and answering the registration must not hold the
	// agent until the keepalive or the register timeout gives up.
	var watching sync.WaitGroup
	defer watching.Wait()
	defer cancel()
	watching.Add(1)
	go func() {
		defer watching.Done()
		if err := watch(sctx, cc.Target()); sctx.Err() == nil {
			cancelCause(err)
		}
	}()
	// Wait for a connection (the channel's bounded backoff brings it as
	// soon as the master is reachable), but not forever.
	timer := time.AfterFunc(c.registerTimeout, func() {
		cancelCause(fmt.Errorf("%w (%s)", errRegisterTimeout, c.registerTimeout))
	})
	defer timer.Stop()
	wctx, stopWatch := context.WithCancel(sctx)
	watched := make(chan struct{})
	go func() { defer close(watched); c.reportConnectErrors(wctx, cc, api) }()
	stream, err := api.Connect(sctx, grpc.WaitForReady(waitForReady))
	stopWatch()
	<-watched
	if err != nil {
		return false, fmt.Errorf("connect: %w", sessionErr(sctx, err))
	}
	// The launches under way are read first: one that ends after this
	// shows in Tasks.
	c.mu.Lock()
	launching := make([]Task, 0, len(c.launching))
	for _, t := range c.launching {
		launching = append(launching, *t)
	}
	c.mu.Unlock()
	snaps, err := c.opts.Runner.Tasks(ctx)
	if err != nil {
		return false, fmt.Errorf("list tasks: %w", err)
	}
	snaps = withLaunching(snaps, launching)
	c.mu.Lock()
	reg := &pb.Register{AgentId: c.id, Hostname: c.opts.Hostname, Resources: c.opts.Resources.String(), Revocable: c.over.Revocable.String(),
		Oversubscription: c.over.registered(), PerformanceScore: c.opts.PerformanceScore}
	c.mu.Unlock()
	var sendMu sync.Mutex
	send := func(m *pb.AgentMessage) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(m)
	}
	// A terminal task whose end the framework acknowledged is marked so:
	// the master must not take it for a live one.
	acked := func(s TaskSnapshot) bool {
		return s.State.Terminal() && c.out.acknowledged(s.Task.FrameworkID, s.Task.ID)
	}
	for _, m := range registerMessages(reg, snaps, acked) {
		if err := send(m); err != nil {
			return false, fmt.Errorf("register: %w", sessionErr(sctx, err))
		}
	}
	first, err := stream.Recv()
	if err != nil {
		return false, fmt.Errorf("register: %w", sessionErr(sctx, err))
	}
	if !timer.Stop() {
		return false, fmt.Errorf("register: %w", errRegisterTimeout)
	}
	r := first.GetRegistered()
	if r == nil {
		return false, errors.New("register: master did not answer with registered")
	}
	if err := c.setID(r.AgentId); err != nil {
		return false, err
	}
	c.log.Info("registered with master", "master", cc.Target(), "agent", r.AgentId, "tasks", len(snaps))
	if len(r.KillTasks) > 0 {
		for _, k := range r.KillTasks {
			c.kill(ctx, k.FrameworkId, k.TaskId)
		}
	} else {
		for _, id := range r.Kill { // an older master: by task ID
			c.kill(ctx, "", id)
		}
	}
	c.mu.Lock()
	c.send, c.connected = send, true
	c.out.rewind() // resend every head on the new stream
	// A change made while the Register was on its way is sent now.
	var over *pb.Oversubscribed
	if p := c.over.registered(); !proto.Equal(p, reg.Oversubscription) {
		over = p
	}
	c.mu.Unlock()
	if over != nil {
		if err := send(&pb.AgentMessage{Msg: &pb.AgentMessage_Oversubscribed{Oversubscribed: over}}); err != nil {
			return true, fmt.Errorf("send oversubscription: %w", err)
		}
	}
	defer func() {
		c.mu.Lock()
		c.send, c.connected = nil, false
		c.mu.Unlock()
	}()
	c.poke()

	hb := time.Duration(r.HeartbeatIntervalNanos)
	if hb <= 0 {
		hb = 15 * time.Second
	}
	// Acknowledgements are checkpointed (a write and an fsync each) by a
	// goroutine of their own, so that the loop below never waits for the
	// disk: an agent busy launching read its stream slowly, the master's
	// queue for it filled with RunTasks and acknowledgements, and the
	// master ended the stream.
	acks := &ackQueue{ready: make(chan struct{}, 1)}
	defer func() { c.ackAll(acks.take()) }() // what came before the end
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); Heartbeats(sctx, send, hb) }()
	go func() { defer wg.Done(); c.deliver(sctx, send) }()
	go func() { defer wg.Done(); c.checkpointAcks(sctx, acks) }()
	defer wg.Wait()
	defer cancel()
	for {
		msg, err := stream.Recv()
		if err != nil {
			return true, sessionErr(sctx, err)
		}
		switch x := msg.Msg.(type) {
		case *pb.MasterMessage_Run:
			c.launch(ctx, x.Run.GetTask(), x.Run.GetRunAsRoot(), x.Run.GetLent())
		case *pb.MasterMessage_Kill:
			if x.Kill.Preempted {
				c.preempt(ctx, x.Kill.FrameworkId, x.Kill.TaskId, x.Kill.Message)
			} else {
				c.kill(ctx, x.Kill.FrameworkId, x.Kill.TaskId)
			}
		case *pb.MasterMessage_Ack:
			acks.push(ackOf{fw: x.Ack.FrameworkId, taskID: x.Ack.TaskId, id: x.Ack.Uuid})
		case *pb.MasterMessage_Update:
			c.update(ctx, x.Update)
		case *pb.MasterMessage_Exec:
			c.openExec(sctx, &wg, api, x.Exec)
		}
	}
}

// registerMessages are the messages that register the agent with its
// tasks: a Register with the first page of them and, when they take more
// than one page (speclimit.PageBytes), ReregisterTasks with the rest, the
// last marked. Each message stays near a page however many tasks run.
func registerMessages(reg *pb.Register, snaps []TaskSnapshot, acked func(TaskSnapshot) bool) []*pb.AgentMessage {
	tasks := make([]*pb.TaskSnapshot, len(snaps))
	for i, s := range snaps {
		tasks[i] = &pb.TaskSnapshot{Task: taskToProto(s.Task), State: s.State, Acknowledged: acked(s), Reason: s.Reason, Message: s.Message}
		if s.ExitCode != nil {
			tasks[i].HasExitCode, tasks[i].ExitCode = true, int32(*s.ExitCode)
		}
	}
	pages := speclimit.Pages(tasks, func(t *pb.TaskSnapshot) int { return proto.Size(t) }, speclimit.PageBytes)
	if len(pages) > 0 {
		reg.Tasks = pages[0]
	}
	reg.MoreTasks = len(pages) > 1
	out := []*pb.AgentMessage{{Msg: &pb.AgentMessage_Register{Register: reg}}}
	for i := 1; i < len(pages); i++ {
		out = append(out, &pb.AgentMessage{Msg: &pb.AgentMessage_ReregisterTasks{
			ReregisterTasks: &pb.ReregisterTasks{Tasks: pages[i], Last: i == len(pages)-1}}})
	}
	return out
}

func (c *Client) setID(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == c.id {
		return nil
	}
	if err := atomicfile.WriteFile(filepath.Join(c.dir, "agent-id"), []byte(id+"\n"), 0o600); err != nil {
		return fmt.Errorf("persist agent id: %w", err)
	}
	c.id = id
	return nil
}

// Heartbeats sends the master a heartbeat every interval until ctx ends
// or a send fails (the stream broke): an agent's side of the link's
// liveness, which the master's heartbeat timeout watches. The Client runs
// it on every session; masterbench's simulated agents run it too.
func Heartbeats(ctx context.Context, send func(*pb.AgentMessage) error, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := send(&pb.AgentMessage{Msg: &pb.AgentMessage_Heartbeat{Heartbeat: &pb.Heartbeat{}}}); err != nil {
				return
			}
		}
	}
}

// deliver sends what the outbox says is due, when it is due.
func (c *Client) deliver(ctx context.Context, send func(*pb.AgentMessage) error) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		c.mu.Lock()
		heads, next := c.out.due(time.Now())
		out := make([]*pb.TaskStatus, len(heads))
		for i := range heads {
			out[i] = heads[i].Update.proto(heads[i].TaskID, heads[i].FrameworkID, c.id)
		}
		c.mu.Unlock()
		for _, st := range out {
			if err := send(&pb.AgentMessage{Msg: &pb.AgentMessage_Status{Status: st}}); err != nil {
				return
			}
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		if !next.IsZero() {
			t.Reset(time.Until(next))
		}
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case <-t.C:
		}
	}
}

// ackQueue holds the acknowledgements received and not yet applied.
type ackQueue struct {
	mu    sync.Mutex
	acks  []ackOf
	ready chan struct{} // 1-buffered: something was pushed
}

// ackOf acknowledges the update id of framework fw's task taskID.
type ackOf struct{ fw, taskID, id string }

func (q *ackQueue) push(a ackOf) {
	q.mu.Lock()
	q.acks = append(q.acks, a)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *ackQueue) take() []ackOf {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.acks
	q.acks = nil
	return out
}

// checkpointAcks applies the acknowledgements of q as they come, and
// every forgetInterval forgets the tasks that ended (forgetEnded), until
// ctx ends.
func (c *Client) checkpointAcks(ctx context.Context, q *ackQueue) {
	tick := time.NewTicker(forgetInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.ready:
			c.ackAll(q.take())
		case <-tick.C:
			c.forgetEnded(ctx)
		}
	}
}

// forgetInterval is how often the Client forgets the tasks that ended.
const forgetInterval = time.Second

// forgetEnded drops the queues, and removes the checkpoints, of the tasks
// whose end the master acknowledged and that the runner no longer holds
// (their containers removed: by the agent's retention, or on request).
// Nothing reports of them any more, so neither their latest state (for
// dropping a repeated report) nor the mark of an acknowledged end (for
// the next registration) is wanted; kept, every task an agent ever ran
// stayed in memory and on disk. A task launched again meanwhile has
// updates pending, or a launch under way, and stays.
func (c *Client) forgetEnded(ctx context.Context) {
	c.mu.Lock()
	ended := 0
	for _, q := range c.out.queues {
		if q.Last.Terminal() && len(q.Pending) == 0 {
			ended++
		}
	}
	c.mu.Unlock()
	if ended == 0 {
		return
	}
	snaps, err := c.opts.Runner.Tasks(ctx)
	if err != nil {
		return // the next round
	}
	held := make(map[string]bool, len(snaps))
	for _, s := range snaps {
		held[s.Task.ID] = true // by ID alone: a snapshot of an older runner names no framework
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, q := range c.out.queues {
		if !q.Last.Terminal() || len(q.Pending) > 0 || held[q.TaskID] || c.launching[key] != nil || c.unsaved[key] {
			continue
		}
		if err := c.updates.Remove(q.fileName(), false); err != nil {
			c.log.Warn("forget an ended task: its checkpoint stays", "task", q.TaskID, "framework", q.FrameworkID, "err", err)
			continue
		}
		delete(c.out.queues, key)
	}
}

// ackAll drops the acknowledged updates, checkpoints their queues and
// lets the next updates go.
func (c *Client) ackAll(acks []ackOf) {
	if len(acks) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range acks {
		q, ok := c.out.ack(a.fw, a.taskID, a.id)
		if !ok {
			continue // a duplicate acknowledgement
		}
		c.saveLocked(q, "checkpoint acknowledgement")
	}
	c.poke()
}

func (c *Client) launch(ctx context.Context, ti *pb.TaskInfo, runAsRoot, lent bool) {
	if ti == nil {
		return
	}
	t, err := taskFromProto(ti)
	t.RunAsRoot, t.Lent = runAsRoot, lent
	key := queueKey(ti.FrameworkId, ti.TaskId)
	if err == nil {
		// Before the session can end: the next Register lists it. A
		// second RunTask of a launch under way keeps the first one's
		// record (the runner leaves such a duplicate as it is and returns
		// at once: replaced, the record went with it).
		c.mu.Lock()
		if c.launching[key] == nil {
			c.launching[key] = &t
		}
		// A run of this task that ended before: the master let go of it
		// (it launches an ID again only then), so a retry of its final
		// update must not reach the master as the new run's.
		if q, ok := c.out.relaunched(key); ok {
			c.log.Info("task launched again: the ended run's unacknowledged updates are dropped", "task", t.ID, "framework", t.FrameworkID)
			c.out.put(q)
			c.saveLocked(q, "checkpoint relaunch")
		}
		c.mu.Unlock()
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err == nil {
			err = c.opts.Runner.LaunchTask(ctx, t)
		}
		if err != nil {
			c.log.Warn("launch task", "task", ti.TaskId, "err", err)
			if uerr := c.Update(Status{TaskID: ti.TaskId, FrameworkID: ti.FrameworkId, State: pb.TaskState_TASK_FAILED, Reason: pb.ReasonLaunchFailed, Message: err.Error()}); uerr != nil {
				c.log.Error("report launch failure", "task", ti.TaskId, "err", uerr)
			}
		}
		c.mu.Lock()
		if c.launching[key] == &t {
			delete(c.launching, key)
		}
		c.mu.Unlock()
	}()
}

// withLaunching adds to snaps, the runner's tasks, the launches under way
// that it does not show (its container is not created yet) as STARTING,
// in place of an ended task of the same ID. Without them a master that
// took over while a RunTask of its predecessor was being launched did not
// know the task: it acknowledged the task's updates without forwarding
// them and answered its framework LOST while the task ran, or accepted
// the framework's second launch of it, which the agent failed as a
// duplicate (a flake of TestMasterHAKill9DuringLaunches).
func withLaunching(snaps []TaskSnapshot, launching []Task) []TaskSnapshot {
	for _, t := range launching {
		i := slices.IndexFunc(snaps, func(s TaskSnapshot) bool { return s.Task.ID == t.ID && s.Task.FrameworkID == t.FrameworkID })
		switch {
		case i < 0:
			snaps = append(snaps, TaskSnapshot{Task: t, State: pb.TaskState_TASK_STARTING})
		case snaps[i].State.Terminal():
			snaps[i] = TaskSnapshot{Task: t, State: pb.TaskState_TASK_STARTING}
		}
	}
	return snaps
}

// update runs a resource update on the runner and answers the master.
func (c *Client) update(ctx context.Context, u *pb.UpdateTask) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		res, err := resources.Parse(u.Resources)
		if err == nil {
			if up, ok := c.opts.Runner.(TaskUpdater); ok {
				err = up.UpdateTask(ctx, u.FrameworkId, u.TaskId, res)
			} else {
				err = errors.New("this agent cannot resize tasks")
			}
		}
		if err != nil && ctx.Err() != nil {
			return // the agent is shutting down: the master sends it again after re-registration
		}
		st := Status{TaskID: u.TaskId, FrameworkID: u.FrameworkId, Reason: pb.ReasonResourcesUpdated, Resources: res}
		if err != nil {
			c.log.Warn("update task", "task", u.TaskId, "framework", u.FrameworkId, "resources", u.Resources, "err", err)
			st = Status{TaskID: u.TaskId, FrameworkID: u.FrameworkId, Reason: pb.ReasonResourcesUpdateFailed, Message: fmt.Sprintf("update resources to %s: %v", u.Resources, err)}
		}
		if uerr := c.Update(st); uerr != nil {
			c.log.Error("report task update", "task", u.TaskId, "err", uerr)
		}
	}()
}

func (c *Client) kill(ctx context.Context, fw, id string) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := c.opts.Runner.KillTask(ctx, fw, id); err != nil {
			c.log.Warn("kill task", "task", id, "framework", fw, "err", err)
		}
	}()
}

// preempt kills a task the master preempts, reported with its reason
// when the runner can (TaskPreempter).
func (c *Client) preempt(ctx context.Context, fw, id, message string) {
	p, ok := c.opts.Runner.(TaskPreempter)
	if !ok {
		c.kill(ctx, fw, id)
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := p.PreemptTask(ctx, fw, id, message); err != nil {
			c.log.Warn("preempt task", "task", id, "framework", fw, "err", err)
		}
	}()
}

func taskToProto(t Task) *pb.TaskInfo {
	return &pb.TaskInfo{TaskId: t.ID, FrameworkId: t.FrameworkID, Name: t.Name, Resources: t.Resources.String(),
		Command: t.Command, Env: t.Env, Labels: t.Labels, User: t.User, Userns: t.UserNS,
		Image: t.Image, ImagePull: t.ImagePull, ImageReadWrite: t.ImageReadWrite}
}

func taskFromProto(ti *pb.TaskInfo) (Task, error) {
	res, err := resources.Parse(ti.Resources)
	if err != nil {
		return Task{}, fmt.Errorf("task %s: resources: %w", ti.TaskId, err)
	}
	return Task{ID: ti.TaskId, FrameworkID: ti.FrameworkId, Name: ti.Name, Resources: res, Command: ti.Command, Env: ti.Env, Labels: ti.Labels,
		User: ti.User, UserNS: ti.Userns, Image: ti.Image, ImagePull: ti.ImagePull, ImageReadWrite: ti.ImageReadWrite}, nil
}

// rejected reports whether err is the master's refusal of the agent's
// credentials or permissions.
func rejected(err error) bool {
	c := status.Code(err)
	return c == codes.Unauthenticated || c == codes.PermissionDenied
}

// sessionErr is err, or the cause that ended the session's context (the
// registration timeout) when there is one.
func sessionErr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}
