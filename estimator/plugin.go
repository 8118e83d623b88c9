package estimator

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/brimnode/brim/internal/pluginhost"
	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/pluginpb"
	"github.com/brimnode/brim/resources"
	"google.golang.org/grpc"
)

// PluginConfig configures an out-of-process estimator. Zero fields take
// the defaults.
type PluginConfig struct {
	// Args are passed to the plugin executable.
	Args []string
	// Timeout bounds one Estimate call; default 5 s. A plugin that takes
	// longer is treated as hung, killed and restarted.
	Timeout time.Duration
	// StartTimeout bounds the plugin's start; default 10 s.
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the restart delay after a crash,
	// hang or failed start (doubling); defaults 1 s and 1 min.
	MinBackoff, MaxBackoff time.Duration
	// History is the number of samples per container sent with each call
	// (the newest); default 60.
	History int
}

// Plugin is an estimator running as a separate program (hashicorp/go-plugin
// over gRPC, protocol pluginpb, run by internal/pluginhost). It is started
// on the first call and restarted with backoff when it crashes or hangs;
// while it is down, Estimate returns an error wrapping
// pluginhost.ErrUnavailable or pluginhost.ErrTimeout (wrap it with
// Fallback to offer nothing instead). Safe for concurrent use; the caller
// closes it.
type Plugin struct {
	sup     *pluginhost.Supervisor[pluginpb.EstimatorClient]
	history int
}

var _ Estimator = (*Plugin)(nil)

// NewPlugin returns the estimator served by the executable at path. The
// process starts on the first Estimate.
func NewPlugin(path string, cfg PluginConfig, log *slog.Logger) *Plugin {
	if cfg.History <= 0 {
		cfg.History = 60
	}
	return &Plugin{
		history: cfg.History,
		sup: pluginhost.NewSupervisor(pluginhost.Config{
			Path: path, Args: cfg.Args, Name: pluginpb.EstimatorPlugin,
			Timeout: cfg.Timeout, StartTimeout: cfg.StartTimeout,
			MinBackoff: cfg.MinBackoff, MaxBackoff: cfg.MaxBackoff,
		}, pluginpb.NewEstimatorClient, log),
	}
}

// Estimate implements Estimator by calling the plugin.
func (p *Plugin) Estimate(ctx context.Context, u monitor.Usage) (Estimate, error) {
	req := &pluginpb.EstimateRequest{Usage: pluginpb.FromUsage(&u, p.history)}
	var resp *pluginpb.EstimateResponse
	err := p.sup.Call(ctx, func(ctx context.Context, c pluginpb.EstimatorClient) error {
		var err error
		resp, err = c.Estimate(ctx, req)
		return err
	})
	if err != nil {
		return Estimate{}, fmt.Errorf("estimate: %w", err)
	}
	r, err := resources.Parse(resp.GetRevocable())
	if err != nil {
		return Estimate{}, fmt.Errorf("estimate: plugin returned bad resources: %w", err)
	}
	return Estimate{Revocable: MarkRevocable(r), Explanation: explanationFromPB(resp.GetExplanation())}, nil
}

// Restarts returns how many times the plugin process was restarted.
func (p *Plugin) Restarts() int { return p.sup.Restarts() }

// Close kills the plugin process.
func (p *Plugin) Close() error { return p.sup.Close() }

// Serve serves e as a brim estimator plugin on stdin/stdout (go-plugin's
// protocol) and returns when the agent kills the process. Call it from
// the plugin's main.
func Serve(e Estimator) {
	pluginhost.Serve(pluginpb.EstimatorPlugin, func(s *grpc.Server) {
		pluginpb.RegisterEstimatorServer(s, &server{impl: e})
	})
}

type server struct {
	pluginpb.UnimplementedEstimatorServer
	impl Estimator
}

func (s *server) Estimate(ctx context.Context, req *pluginpb.EstimateRequest) (*pluginpb.EstimateResponse, error) {
	est, err := s.impl.Estimate(ctx, req.GetUsage().ToMonitor())
	if err != nil {
		return nil, err
	}
	nonrev := make(resources.Resources, len(est.Revocable))
	for i, r := range est.Revocable {
		r.Revocable = false
		nonrev[i] = r
	}
	return &pluginpb.EstimateResponse{Revocable: nonrev.String(), Explanation: explanationToPB(est.Explanation)}, nil
}

func explanationToPB(e Explanation) *pluginpb.Explanation {
	out := &pluginpb.Explanation{Summary: e.Summary, Terms: make([]*pluginpb.Term, len(e.Terms))}
	for i, t := range e.Terms {
		out.Terms[i] = &pluginpb.Term{Name: t.Name, Value: t.Value, Unit: t.Unit, Note: t.Note}
	}
	return out
}

func explanationFromPB(e *pluginpb.Explanation) Explanation {
	out := Explanation{Estimator: "plugin", Summary: e.GetSummary()}
	for _, t := range e.GetTerms() {
		out.Terms = append(out.Terms, Term{Name: t.Name, Value: t.Value, Unit: t.Unit, Note: t.Note})
	}
	return out
}
