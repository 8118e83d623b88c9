package qos

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/brimnode/brim/internal/pluginhost"
	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/pluginpb"
	"google.golang.org/grpc"
)

// PluginConfig configures an out-of-process controller. Zero fields take
// the defaults.
type PluginConfig struct {
	// Args are passed to the plugin executable.
	Args []string
	// Timeout bounds one Corrections call; default 900 ms (under the 1 s
	// QoS round). A plugin that takes longer is treated as hung, killed
	// and restarted.
	Timeout time.Duration
	// StartTimeout bounds the plugin's start; default 10 s.
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the restart delay (doubling);
	// defaults 1 s and 1 min.
	MinBackoff, MaxBackoff time.Duration
	// History is the number of samples per container sent with each call;
	// default 10.
	History int
}

// Plugin is a QoS controller running as a separate program
// (hashicorp/go-plugin over gRPC, protocol pluginpb, run by
// internal/pluginhost). It is started on the first call and restarted
// with backoff when it crashes or hangs; while it is down, Corrections
// returns an error wrapping pluginhost.ErrUnavailable or
// pluginhost.ErrTimeout (wrap it with Fallback for noop). Safe for
// concurrent use; the caller closes it.
type Plugin struct {
	sup     *pluginhost.Supervisor[pluginpb.QoSControllerClient]
	history int
}

var _ Controller = (*Plugin)(nil)

// NewPlugin returns the controller served by the executable at path.
func NewPlugin(path string, cfg PluginConfig, log *slog.Logger) *Plugin {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 900 * time.Millisecond
	}
	if cfg.History <= 0 {
		cfg.History = 10
	}
	return &Plugin{
		history: cfg.History,
		sup: pluginhost.NewSupervisor(pluginhost.Config{
			Path: path, Args: cfg.Args, Name: pluginpb.QoSPlugin,
			Timeout: cfg.Timeout, StartTimeout: cfg.StartTimeout,
			MinBackoff: cfg.MinBackoff, MaxBackoff: cfg.MaxBackoff,
		}, pluginpb.NewQoSControllerClient, log),
	}
}

// Corrections implements Controller by calling the plugin.
func (p *Plugin) Corrections(ctx context.Context, u monitor.Usage) ([]Correction, error) {
	req := &pluginpb.CorrectionsRequest{Usage: pluginpb.FromUsage(&u, p.history)}
	var resp *pluginpb.CorrectionsResponse
	err := p.sup.Call(ctx, func(ctx context.Context, c pluginpb.QoSControllerClient) error {
		var err error
		resp, err = c.Corrections(ctx, req)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("corrections: %w", err)
	}
	out := make([]Correction, 0, len(resp.GetCorrections()))
	for _, c := range resp.GetCorrections() {
		t := Type(c.GetType())
		if t < Throttle || t > Kill {
			return nil, fmt.Errorf("corrections: plugin returned type %v: %w", c.GetType(), ErrInvalidOption)
		}
		tr := c.GetTrigger()
		out = append(out, Correction{
			Type: t, ContainerID: c.GetContainerId(), CPUQuota: c.GetCpuQuotaMilli(), Reason: c.GetReason(),
			Trigger: Trigger{Signal: tr.GetSignal(), Victim: tr.GetVictim(), Value: tr.GetValue(), Baseline: tr.GetBaseline(), Threshold: tr.GetThreshold()},
		})
	}
	return out, nil
}

// Restarts returns how many times the plugin process was restarted.
func (p *Plugin) Restarts() int { return p.sup.Restarts() }

// Close kills the plugin process.
func (p *Plugin) Close() error { return p.sup.Close() }

// Serve serves c as a brim QoS controller plugin (go-plugin's protocol) and
// returns when the agent kills the process. Call it from the plugin's main.
func Serve(c Controller) {
	pluginhost.Serve(pluginpb.QoSPlugin, func(s *grpc.Server) {
		pluginpb.RegisterQoSControllerServer(s, &server{impl: c})
	})
}

type server struct {
	pluginpb.UnimplementedQoSControllerServer
	impl Controller
}

func (s *server) Corrections(ctx context.Context, req *pluginpb.CorrectionsRequest) (*pluginpb.CorrectionsResponse, error) {
	cs, err := s.impl.Corrections(ctx, req.GetUsage().ToMonitor())
	if err != nil {
		return nil, err
	}
	out := &pluginpb.CorrectionsResponse{Corrections: make([]*pluginpb.Correction, len(cs))}
	for i, c := range cs {
		out.Corrections[i] = &pluginpb.Correction{
			Type: pluginpb.Correction_Type(c.Type), ContainerId: c.ContainerID, CpuQuotaMilli: c.CPUQuota, Reason: c.Reason,
			Trigger: &pluginpb.Trigger{Signal: c.Trigger.Signal, Victim: c.Trigger.Victim, Value: c.Trigger.Value,
				Baseline: c.Trigger.Baseline, Threshold: c.Trigger.Threshold},
		}
	}
	return out, nil
}
