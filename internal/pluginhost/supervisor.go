package pluginhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os/exec"
	"sync"
	"time"

	"github.com/brimnode/brim/pluginpb"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrUnavailable is returned when the plugin is not running (waiting
	// for its restart backoff, or it could not be started).
	ErrUnavailable = errors.New("plugin unavailable")
	// ErrTimeout is returned when a call to the plugin exceeded its limit.
	ErrTimeout = errors.New("plugin call timed out")
)

// Config configures a Supervisor. Zero durations take defaults.
type Config struct {
	// Path is the plugin executable; Args are its arguments.
	Path string
	Args []string
	// Name is the plugin's name in the set (pluginpb.EstimatorPlugin,
	// pluginpb.QoSPlugin).
	Name string
	// Timeout bounds every call; default 5 s. A call that exceeds it is
	// treated as a hang: the process is killed and restarted.
	Timeout time.Duration
	// StartTimeout bounds the plugin's start; default 10 s.
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the delay before a restart after a
	// failure (doubling per consecutive failure); defaults 1 s and 1 min.
	// Each delay is jittered down by up to BackoffJitter of it, so that
	// the plugins of many agents (or of one agent, restarted) do not come
	// back in step.
	MinBackoff, MaxBackoff time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Rand returns the jitter's random number in [0, 1); default
	// math/rand/v2's Float64.
	Rand func() float64
}

// BackoffJitter is the share of a restart delay that is random: a delay
// d is drawn from [(1−BackoffJitter)·d, d].
const BackoffJitter = 0.2

// restartDelay is the delay before the restart after the n-th
// consecutive failure (from 1), given r in [0, 1): min·2ⁿ⁻¹ capped at
// max, less up to BackoffJitter of it.
func restartDelay(minD, maxD time.Duration, n int, r float64) time.Duration {
	d := minD << min(n-1, 20)
	if d > maxD || d <= 0 {
		d = maxD
	}
	return d - time.Duration(float64(d)*BackoffJitter*r)
}

// Supervisor runs one plugin process and calls it through its gRPC client
// C (pluginpb.EstimatorClient, pluginpb.QoSControllerClient). It starts
// the process lazily, restarts it with exponential backoff after a crash,
// a hang or a failed start, and logs every such event. Safe for concurrent
// use (calls are serialised); Close kills the process.
type Supervisor[C any] struct {
	cfg       Config
	newClient func(grpc.ClientConnInterface) C
	log       *slog.Logger

	mu        sync.Mutex
	client    *plugin.Client
	raw       C
	failures  int
	nextStart time.Time
	restarts  int
	started   bool
	closed    bool
}

// NewSupervisor returns a supervisor for cfg that reaches the plugin
// through newClient (pluginpb.NewEstimatorClient, …); nothing starts until
// the first Call.
func NewSupervisor[C any](cfg Config, newClient func(grpc.ClientConnInterface) C, log *slog.Logger) *Supervisor[C] {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(time.Minute, cfg.MinBackoff)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Supervisor[C]{cfg: cfg, newClient: newClient, log: log.With("plugin", cfg.Path)}
}

// Restarts returns how many times the process was (re)started after the
// first start.
func (s *Supervisor[C]) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// Running reports whether the plugin process is running.
func (s *Supervisor[C]) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client != nil && !s.client.Exited()
}

// Call runs fn with the plugin's client and a context bounded by the call timeout. It starts the
// process if it is not running and its backoff has passed, else returns an
// error wrapping ErrUnavailable. If the process has exited, or fn fails
// with a timeout (ErrTimeout) or a transport error, the process is killed
// and a restart is scheduled with backoff. An error the plugin returned
// itself is passed through and keeps the process.
func (s *Supervisor[C]) Call(ctx context.Context, fn func(ctx context.Context, client C) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("call %s: %w: closed", s.cfg.Path, ErrUnavailable)
	}
	if s.client != nil && s.client.Exited() {
		s.failLocked("plugin process exited")
	}
	if s.client == nil {
		if now := s.cfg.Now(); now.Before(s.nextStart) {
			return fmt.Errorf("call %s: %w: restart in %s", s.cfg.Path, ErrUnavailable, s.nextStart.Sub(now).Round(time.Millisecond))
		}
		if err := s.startLocked(); err != nil {
			s.failLocked("start plugin: " + err.Error())
			return fmt.Errorf("start %s: %w: %w", s.cfg.Path, ErrUnavailable, err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	err := fn(cctx, s.raw)
	if err == nil {
		s.failures = 0
		return nil
	}
	if ctx.Err() != nil { // the caller gave up: not the plugin's fault
		return err
	}
	switch code := status.Code(err); {
	case cctx.Err() != nil || code == codes.DeadlineExceeded:
		s.failLocked(fmt.Sprintf("call timed out after %s", s.cfg.Timeout))
		return fmt.Errorf("call %s: %w: %w", s.cfg.Path, ErrTimeout, err)
	case code == codes.Unavailable || code == codes.Canceled || s.client.Exited():
		s.failLocked("plugin connection failed: " + err.Error())
		return fmt.Errorf("call %s: %w: %w", s.cfg.Path, ErrUnavailable, err)
	}
	return fmt.Errorf("call %s: %w", s.cfg.Path, err)
}

// Close kills the plugin process; later calls fail with ErrUnavailable.
func (s *Supervisor[C]) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.killLocked()
	return nil
}

// killLocked kills the process, if one runs.
func (s *Supervisor[C]) killLocked() {
	if s.client != nil {
		s.client.Kill()
		var zero C
		s.client, s.raw = nil, zero
	}
}

func (s *Supervisor[C]) startLocked() error {
	c := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  pluginpb.Handshake,
		Plugins:          plugin.PluginSet{s.cfg.Name: &grpcPlugin{client: func(c *grpc.ClientConn) any { return s.newClient(c) }}},
		Cmd:              exec.Command(s.cfg.Path, s.cfg.Args...),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     s.cfg.StartTimeout,
		Logger:           newHCLogger(s.log),
	})
	rpc, err := c.Client()
	if err != nil {
		c.Kill()
		return err
	}
	d, err := rpc.Dispense(s.cfg.Name)
	if err != nil {
		c.Kill()
		return fmt.Errorf("dispense %s: %w", s.cfg.Name, err)
	}
	raw, ok := d.(C)
	if !ok {
		c.Kill()
		return fmt.Errorf("dispense %s: got a %T", s.cfg.Name, d)
	}
	if s.started {
		s.restarts++
	}
	s.started = true
	s.client, s.raw = c, raw
	s.log.Info("plugin started", "restarts", s.restarts)
	return nil
}

// failLocked kills the process and schedules the next start.
func (s *Supervisor[C]) failLocked(why string) {
	s.killLocked()
	s.failures++
	d := restartDelay(s.cfg.MinBackoff, s.cfg.MaxBackoff, s.failures, s.cfg.Rand())
	s.nextStart = s.cfg.Now().Add(d)
	s.log.Warn("plugin failed; restarting with backoff", "reason", why, "failures", s.failures, "backoff", d)
}

// newHCLogger routes go-plugin's hclog output (including the plugin's
// stderr) into log.
func newHCLogger(log *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "go-plugin",
		Level:      hclog.Debug,
		JSONFormat: true,
		Output:     &slogWriter{log: log},
	})
}

type slogWriter struct{ log *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimSpace(p), []byte("\n")) {
		var e map[string]any
		if err := json.Unmarshal(line, &e); err != nil {
			w.log.Debug(string(line))
			continue
		}
		lvl := slog.LevelDebug
		switch e["@level"] {
		case "info":
			lvl = slog.LevelInfo
		case "warn":
			lvl = slog.LevelWarn
		case "error":
			lvl = slog.LevelError
		}
		msg, _ := e["@message"].(string)
		attrs := make([]any, 0, 2*len(e))
		for k, v := range e {
			// "plugin" is go-plugin's name for the plugin's path, which
			// the Supervisor's logger gives every line already: twice
			// would be one key twice on a JSON line.
			if k == "@level" || k == "@message" || k == "@timestamp" || k == "plugin" {
				continue
			}
			attrs = append(attrs, k, v)
		}
		w.log.Log(context.Background(), lvl, msg, attrs...)
	}
	return len(p), nil
}

var _ io.Writer = (*slogWriter)(nil)
