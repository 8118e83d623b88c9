package taskrunner

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/estimator"
	"github.com/brimnode/brim/masterlink"
	pb "github.com/brimnode/brim/masterlink/masterlinkpb"
	"github.com/brimnode/brim/qos"
	"github.com/brimnode/brim/resources"
	"google.golang.org/grpc"
)

// oversubPollInterval is how often the link checks the QoS corrections in
// force for a change to send to the master.
const oversubPollInterval = time.Second

// LinkConfig is how an agent links to its master.
type LinkConfig struct {
	// Master is the master's host:port, or a comma-separated list.
	Master string
	// Discover finds the masters again when every listed one has failed
	// (masterlink.Options); nil: the list is fixed.
	Discover func(context.Context) ([]string, error)
	// StateDir holds the link's own state (the agent's state dir).
	StateDir string
	// Resources is what the agent offers.
	Resources agent.Resources
	// RetryMin and RetryMax bound the backoff of status update retries
	// (masterlink.Options).
	RetryMin, RetryMax time.Duration
	// Principal and Secret authenticate the agent; empty Principal: none.
	// Secret may change while the link runs (masterlink.Secret).
	Principal string
	Secret    *masterlink.Secret
	// DialOptions are extra options to reach the master (TLS).
	DialOptions []grpc.DialOption
	// PerformanceScore is the machine's score for the master's meDRF
	// sorter (> 0; 0: none sent).
	PerformanceScore float64
}

// offered renders the agent's resources for the master.
func offered(total agent.Resources) (resources.Resources, error) {
	text := fmt.Sprintf("cpus:%s;mem:%d", agent.FormatMilli(total.MilliCPUs), total.MemMiB)
	if total.NetMbit > 0 {
		text += fmt.Sprintf(";net_bw:%d", total.NetMbit)
	}
	if total.DiskMiB > 0 {
		text += fmt.Sprintf(";disk:%d", total.DiskMiB)
	}
	res, err := resources.Parse(text)
	if err != nil {
		return resources.Resources{}, fmt.Errorf("agent resources: %w", err)
	}
	return res, nil
}

// Run links a to the master once a has recovered (a.Ready), runs the
// master's tasks on it, and serves the link until ctx ends (nil) or the
// master refuses the agent (an error wrapping masterlink.ErrRejected, with
// the master's gRPC status in its chain). It never stops a or its
// containers. When a's recovery fails, Run waits for ctx.
func Run(ctx context.Context, a *agent.Agent, cfg LinkConfig, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	res, err := offered(cfg.Resources)
	if err != nil {
		return err
	}
	select {
	case <-a.Ready():
	case <-ctx.Done():
		return nil
	}
	// A link that ends (the master refused the agent) ends the watchers
	// and the oversubscription sender: Close cancels r.ctx, which they use.
	r := New(ctx, a, log)
	defer r.Close()
	link, err := masterlink.New(masterlink.Options{
		Master: cfg.Master, Discover: cfg.Discover, StateDir: cfg.StateDir, AgentID: a.ID(), Resources: res, Runner: r,
		RetryMin: cfg.RetryMin, RetryMax: cfg.RetryMax, Principal: cfg.Principal, Secret: cfg.Secret,
		DialOptions: cfg.DialOptions, PerformanceScore: cfg.PerformanceScore, Log: log,
	})
	if err != nil {
		return err
	}
	r.SetUpdater(link)
	r.Adopt()
	// The estimator's revocable resources reach the master through the link
	// (no-op when the agent runs without oversubscription), and so do the
	// QoS corrections in force.
	if _, ok := a.Oversubscription(); ok {
		a.SetForward(func(_ context.Context, est estimator.Estimate) error {
			// What this runner's tasks held in the snapshot est was
			// computed against (local revocable containers are neither
			// in est nor the master's to add back).
			inUse := a.ForwardedInUse(func(id string) bool {
				c, err := a.Get(id)
				return err == nil && c.Labels[LabelTask] != ""
			})
			return link.UpdateOversubscription(func(o *masterlink.Oversubscription) {
				o.Revocable, o.InUse, o.InUseSet, o.Summary = est.Revocable, inUse, true, est.Explanation.Summary
			})
		})
		defer a.SetForward(nil)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.sendOversubscription(r.ctx, link)
		}()
	}
	return link.Run(ctx)
}

// sendOversubscription sends the agent's estimator and QoS controller names
// and its corrections to the master whenever they change, until ctx ends.
func (r *Runner) sendOversubscription(ctx context.Context, link *masterlink.Client) {
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
		if id := c.Labels[LabelTask]; id != "" {
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
