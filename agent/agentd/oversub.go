package agentd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/bpf"
	"github.com/brimnode/brim/estimator"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/qos"
)

// metricsShutdown bounds the metrics server's graceful stop.
const metricsShutdown = 5 * time.Second

// plugins are the opened estimator and controller, and later the run-queue
// source; close releases them. A reload swaps the estimator and the
// controller (swapPlugins) under mu.
type plugins struct {
	mu    sync.Mutex
	cfg   OversubConfig
	est   estimator.Estimator
	ctrl  qos.Controller
	agent *agent.Agent // the agent they run in, once built

	rq  monitor.RunQueueSource
	sig *monitor.RunQueueSignal

	// ioLimits says whether the agent's cgroups can throttle io, once
	// they exist: a controller that throttles io needs it.
	ioLimits func() error
}

// ioThrottler is a QoS controller that sends THROTTLE_IO corrections
// (the interference controller with io-throttle=): the agent resolves
// the disk to throttle for it, and checks at start and on reload that
// it can.
type ioThrottler interface{ IOThrottle() int64 }

// throttlesIO reports whether c sends THROTTLE_IO corrections.
func throttlesIO(c qos.Controller) bool {
	t, ok := c.(ioThrottler)
	return ok && t.IOThrottle() > 0
}

// checkIOThrottle fails a controller that throttles io on an agent whose
// cgroups cannot (canLimit's error): every such correction would fail,
// and each failure costs the controller a round before it escalates.
func checkIOThrottle(c qos.Controller, canLimit func() error) error {
	if !throttlesIO(c) || canLimit == nil {
		return nil
	}
	if err := canLimit(); err != nil {
		return bad("--qos-opt", "io-throttle=%d: %w", c.(ioThrottler).IOThrottle(), err)
	}
	return nil
}

// cgroupIOLimits says whether cg can throttle io: a throttling controller
// (blkio.throttle.*, io.max) and a disk to throttle (the state dir's).
func cgroupIOLimits(cg *cgroups.Isolator, stateDir string) func() error {
	return func() error {
		f := cg.Features()
		switch {
		case !f.IOThrottle:
			return fmt.Errorf("this host cannot throttle io (no blkio.throttle.* on cgroup v1, no io controller on v2): %w", qos.ErrNotSupported)
		case len(f.IODevices) == 0:
			return fmt.Errorf("no disk to throttle: the state dir %s is resolved at start only when a controller throttles io or --io-guard is on (restart the agent): %w", stateDir, qos.ErrNotSupported)
		}
		return nil
	}
}

// openPlugins builds the estimator (withEst) and the QoS controller
// (withCtrl) from the registries; the other stays nil. Errors are the
// operator's (*ConfigError).
func openPlugins(cfg OversubConfig, deps Deps, log *slog.Logger, withEst, withCtrl bool) (*plugins, error) {
	eopts, err := estimator.ParseOptions(cfg.EstimatorOpts)
	if err != nil {
		return nil, &ConfigError{Flag: "--estimator-opt", Err: fmt.Errorf("--estimator-opt: %w", err)}
	}
	qopts, err := qos.ParseOptions(cfg.QoSOpts)
	if err != nil {
		return nil, &ConfigError{Flag: "--qos-opt", Err: fmt.Errorf("--qos-opt: %w", err)}
	}
	p := &plugins{cfg: cfg}
	if withEst {
		if p.est, err = estimator.Open(deps.Estimators, cfg.Estimator, eopts, log); err != nil {
			if errors.Is(err, estimator.ErrUnknown) {
				return nil, bad("--estimator", "%q: unknown (want one of %s, or plugin:/path)", cfg.Estimator, strings.Join(deps.Estimators.Names(), ", "))
			}
			return nil, bad("--estimator", "%q: %w", cfg.Estimator, err)
		}
	}
	if withCtrl {
		if p.ctrl, err = qos.Open(deps.QoS, cfg.QoS, qopts, log); err != nil {
			closePlugin(p.est, log)
			if errors.Is(err, qos.ErrUnknown) {
				return nil, bad("--qos", "%q: unknown (want one of %s, or plugin:/path)", cfg.QoS, strings.Join(deps.QoS.Names(), ", "))
			}
			return nil, bad("--qos", "%q: %w", cfg.QoS, err)
		}
	}
	return p, nil
}

// oversub opens the run-queue latency source (eBPF, or schedstat with
// --no-bpf or when BPF cannot load here) and returns the agent's
// oversubscription options.
func (p *plugins) oversub(cg agent.CgroupActuator, log *slog.Logger) (*agent.Oversub, error) {
	rq, err := monitor.OpenRunQueueSource(p.cfg.NoBPF, bpf.Options{}, log)
	if err != nil {
		return nil, fmt.Errorf("run-queue latency: %w", err)
	}
	p.rq, p.sig = rq, monitor.NewRunQueueSignal(rq)
	return &agent.Oversub{
		MonitorInterval:   p.cfg.MonitorInterval,
		Signals:           []monitor.SignalSource{p.sig},
		Estimator:         p.est,
		EstimatorName:     p.cfg.Estimator,
		EstimatorInterval: p.cfg.EstimatorInterval,
		Controller:        p.ctrl,
		QoSName:           p.cfg.QoS,
		QoSInterval:       p.cfg.QoSInterval,
		Cgroups:           cg,
		RunQueueSource:    p.sig.Source(),
	}, nil
}

func (p *plugins) close(log *slog.Logger) {
	p.mu.Lock()
	defer p.mu.Unlock()
	closePlugin(p.est, log)
	closePlugin(p.ctrl, log)
	if p.rq != nil {
		if err := p.rq.Close(); err != nil {
			log.Warn("close run-queue source", "err", err)
		}
	}
}

func closePlugin(v any, log *slog.Logger) {
	if c, ok := v.(io.Closer); ok {
		if err := c.Close(); err != nil {
			log.Warn("close plugin", "err", err)
		}
	}
}

// metricsServer is the agent's metrics (and the run-queue source's) on
// --metrics-listen; nil without it.
type metricsServer struct {
	l   net.Listener
	srv *http.Server
}

// openMetrics registers the run-queue metrics with a's registry and
// listens on --metrics-listen.
func (p *plugins) openMetrics(a *agent.Agent) (*metricsServer, error) {
	reg := a.Metrics()
	if reg == nil {
		return nil, nil
	}
	if p.sig != nil {
		if err := reg.Register(p.sig.Metrics()); err != nil {
			return nil, fmt.Errorf("register run-queue metrics: %w", err)
		}
	}
	if p.cfg.MetricsListen == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", p.cfg.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", monitor.Handler(reg))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		select {
		case <-a.Ready():
			_, _ = io.WriteString(w, `{"status":"ready"}`+"\n")
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"status":"recovering"}`+"\n")
		}
	})
	return &metricsServer{l: l, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}, nil
}

// serve serves until ctx ends (nil) or the server fails.
func (m *metricsServer) serve(ctx context.Context, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- m.srv.Serve(m.l) }()
	log.Info("serving metrics", "addr", m.l.Addr().String(), "path", "/metrics")
	select {
	case err := <-errc:
		return fmt.Errorf("metrics server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), metricsShutdown)
	defer cancel()
	_ = m.srv.Shutdown(sctx)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics server: %w", err)
	}
	return nil
}

// cgroupIDs returns the ids of a container's cgroup that an OOM event may
// name: its memory and cpu directories on cgroup v1, the unified one on v2.
func cgroupIDs(p string) ([]uint64, error) {
	dirs := []string{filepath.Join("/sys/fs/cgroup/memory", p), filepath.Join("/sys/fs/cgroup/cpu", p)}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		dirs = []string{filepath.Join("/sys/fs/cgroup", p)}
	}
	ids := make([]uint64, 0, len(dirs))
	for _, d := range dirs {
		id, err := bpf.CgroupID(d)
		if err != nil {
			return nil, fmt.Errorf("cgroup id of %s: %w", d, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// oomWatcher attributes the eBPF monitor's OOM kill events to a's
// containers (counted in a's metrics and statuses); nil without the eBPF
// monitor (--no-bpf, or BPF unavailable), where the cgroup OOM counters
// read at exit remain the only source.
func (p *plugins) oomWatcher(a *agent.Agent, log *slog.Logger) *agent.OOMWatcher {
	m, ok := p.rq.(*bpf.Monitor)
	if !ok {
		return nil
	}
	w := agent.NewOOMWatcher(a, bpfOOM{m}, cgroupIDs, 0, log)
	if reg := a.Metrics(); reg != nil {
		if err := reg.Register(w); err != nil {
			log.Warn("register oom metrics", "err", err)
		}
	}
	return w
}

// bpfOOM reads the eBPF monitor's OOM kill events as the agent's.
type bpfOOM struct{ m *bpf.Monitor }

func (r bpfOOM) ReadOOM(ctx context.Context) (agent.OOMEvent, error) {
	ev, err := r.m.ReadOOM(ctx)
	if errors.Is(err, bpf.ErrClosed) {
		return agent.OOMEvent{}, io.EOF
	}
	if err != nil {
		return agent.OOMEvent{}, err
	}
	return agent.OOMEvent{CgroupID: ev.CgroupID, MemCgroupID: ev.MemCgroupID, Pid: ev.Pid, Comm: ev.Comm, Time: ev.Time}, nil
}
