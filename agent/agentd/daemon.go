package agentd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/agent/agentserver"
	"github.com/brimnode/brim/agent/taskrunner"
	"github.com/brimnode/brim/containerizer"
	"github.com/brimnode/brim/estimator"
	"github.com/brimnode/brim/internal/sdnotify"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/isolator/network"
	"github.com/brimnode/brim/masterlink"
	"github.com/brimnode/brim/qos"
	"golang.org/x/sync/errgroup"
)

// Deps are what cmd builds for the daemon: the plugin registries (the only
// place that names the built-ins) and the logger.
type Deps struct {
	Estimators *estimator.Registry
	QoS        *qos.Registry
	Log        *slog.Logger
	// Level is Log's level, changed on SIGHUP; nil: the log level is not
	// reloadable.
	Level *slog.LevelVar
	// Reload reads Config.ConfigFile again on SIGHUP (cmd knows how: it
	// holds the flags, which still win over the file).
	Reload func() (Reloadable, error)
}

// Daemon is an assembled, not yet running agent. Run it once; Close
// releases a Daemon that will not run. Not safe for concurrent use.
type Daemon struct {
	cfg     Config
	res     resolved
	deps    Deps
	log     *slog.Logger
	plugins *plugins
	// secret is the agent's secret towards the master; a reload sets a
	// new one.
	secret *masterlink.Secret
}

// New checks cfg and opens the estimator and
// QoS controller, creating nothing on the host. Errors are *ConfigError
// for a bad setting, else a failed check of the state dir.
func New(cfg Config, deps Deps) (*Daemon, error) {
	if deps.Estimators == nil || deps.QoS == nil {
		return nil, errors.New("agentd: the estimator and QoS registries are required")
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The daemon's own lines; each part it builds names its own component
	// (one per line: internal/logging.OneComponent).
	log = log.With("component", "agentd")
	res, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if err := checkNetworkState(cfg.StateDir, cfg.Network.Enabled); err != nil {
		return nil, err
	}
	p, err := openPlugins(cfg.Oversub, deps, log, true, true)
	if err != nil {
		return nil, err
	}
	return &Daemon{cfg: cfg, res: res, deps: deps, log: log, plugins: p, secret: masterlink.NewSecret(cfg.Link.Secret)}, nil
}

// Close releases the estimator and QoS controller of a Daemon that did
// not Run (Run releases them itself).
func (d *Daemon) Close() {
	if d.plugins != nil {
		d.plugins.close(d.log)
		d.plugins = nil
	}
}

// Run builds the agent and serves it until ctx ends (nil) or one of its
// servers fails, which stops the others: the local API, the metrics
// server, the OOM watcher, the master link (with Config.Link.Master) and
// the SIGHUP reloader. Containers keep running after it returns. Errors
// wrap agent.ErrAgentRunning when another agent holds the socket or the
// state dir, masterlink.ErrRejected when the master refuses the agent.
func (d *Daemon) Run(ctx context.Context) (err error) {
	if d.plugins == nil {
		return errors.New("agentd: Run after Close or a second Run")
	}
	defer d.Close()
	cfg, log := d.cfg, d.log
	// Before the socket exists: from then on a SIGHUP is the reload's.
	hup, stopHup := notifyHangup()
	defer stopHup()
	// Take the socket first: a second agent fails before it creates
	// anything.
	l, err := agentserver.Listen(cfg.Socket)
	if err != nil {
		return err
	}
	defer func() { _ = l.Close() }() // Serve closes it too (and reports); this is for early returns
	raiseFileLimit(log)
	qosIO := throttlesIO(d.plugins.ctrl)
	cgCfg, err := cgroupConfig(cfg.Safety.cgroupsConfig(cgroups.Config{Parent: d.res.cgParent, DefaultPids: cfg.Security.DefaultPids}, cfg.StateDir, qosIO), log)
	if err != nil {
		return err
	}
	cg, err := cgroups.New(cgCfg)
	if err != nil {
		if len(cgCfg.IOPaths) > 0 {
			return fmt.Errorf("cgroup isolator (--io-guard and --qos-opt io-throttle= throttle the state dir's disk): %w", err)
		}
		return fmt.Errorf("cgroup isolator: %w", err)
	}
	d.plugins.ioLimits = cgroupIOLimits(cg, cfg.StateDir)
	if err := checkIOThrottle(d.plugins.ctrl, d.plugins.ioLimits); err != nil {
		return err
	}
	// Before recovery: an agent that took another's containers for
	// orphans would destroy them.
	parentLock, err := cg.LockParent()
	if err != nil {
		return err
	}
	defer parentLock.Close()
	recordCgroupParent(cfg.StateDir, d.res.cgParent, log)
	recordRunDir(cfg.StateDir, cfg.RunDir, log)
	over, err := d.plugins.oversub(cg, log)
	if err != nil {
		return err
	}
	cfg.Safety.guards(over, cg)
	isos := []isolator.Isolator{cg}
	var recordsUnsaved func() map[string]error
	if cfg.Network.Enabled {
		// Before the containerizer: its warm shims must start after the
		// netns dir is a shared mount. Close, never Uninstall: the
		// containers outlive the agent.
		netIso, err := network.New(d.res.network)
		if err != nil {
			return fmt.Errorf("network isolator: %w", err)
		}
		defer func() { _ = netIso.Close() }() // best effort at exit; containers keep their network
		for _, err := range netIso.NotHeld() {
			log.Warn("port mapping: a process of the host took its port while no agent held it; outside traffic still goes to the container, loopback to the process", "err", err)
		}
		warnEphemeralOverlap(log, d.res.network.PortRange)
		isos = append(isos, netIso)
		recordsUnsaved = netIso.Unsaved
	}
	imgMetrics := newImageMetrics()
	images, err := d.openImages(imgMetrics)
	if err != nil {
		return err
	}
	defer func() { _ = images.Close() }() // its lock; the cache stays
	cz, err := containerizer.New(containerizer.Config{
		StateDir:  cfg.StateDir,
		RunDir:    cfg.RunDir,
		Isolators: isos,
		KillGrace: cfg.KillGrace,
		HidePaths: cfg.Security.hidePaths(cfg.Socket, d.res.network.NetNSDir),
		Log:       log,
		// The agent resolves every container's size and count; the rate
		// is the containerizer's (0 there is its default: "none" is -1).
		LogMaxSize: d.res.logs.MaxSize, LogMaxFiles: d.res.logs.MaxFiles, LogRate: containerizerLogRate(d.res.logs.Rate),
		Images:        images,
		WarmSandboxes: containerizerWarmSandboxes(cfg.Warm.Sandboxes), WarmSandboxIdle: cfg.Warm.Idle,
		WarmSandboxMemory: d.res.warmMem,
		NoRecycleShims:    !cfg.Warm.RecycleShims,
		NoShimPrepare:     !cfg.Warm.PrepareShims,
	})
	if err != nil {
		return fmt.Errorf("containerizer: %w", err)
	}
	// Last, once the agent is closed: its warm sandboxes and warm shims
	// go, its containers stay.
	defer func() { _ = cz.Close() }()
	userns, err := cfg.Security.usernsRange()
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Options{
		StateDir:       cfg.StateDir,
		RecordsUnsaved: recordsUnsaved,
		Runtime:        runtimeAdapter{cz},
		Resources:      d.res.total,
		Network:        cfg.Network.Enabled,
		PortRange:      d.res.network.PortRange,
		KillGrace:      cfg.KillGrace,
		Retention:      d.res.retention,
		LogMaxSize:     d.res.logs.MaxSize,
		LogMaxFiles:    d.res.logs.MaxFiles,
		Log:            log,
		Version:        cfg.Version,
		CgroupParent:   d.res.cgParent,
		Oversub:        over,
		DefaultUser:    cfg.Security.DefaultUser,
		AllowRoot:      cfg.Security.AllowRoot,
		UserNS:         cfg.Security.UserNS,
		UserNSRange:    userns,
		Images:         images,
		ImageCacheMax:  cfg.Image.CacheMaxMiB << 20,
		UpperLimitMiB:  cfg.Image.UpperLimitMiB,
		PullTimeout:    cfg.Image.PullTimeout,
		CPUMode:        d.res.cpuMode,
		Cgroups:        cg,
	})
	if err != nil {
		return err
	}
	if reg := a.Metrics(); reg != nil {
		if err := reg.Register(imgMetrics); err != nil {
			_ = a.Close() // failing with err; Close only releases the state dir
			return fmt.Errorf("register image metrics: %w", err)
		}
	}
	d.plugins.mu.Lock()
	d.plugins.agent = a
	d.plugins.mu.Unlock()
	metrics, err := d.plugins.openMetrics(a)
	if err != nil {
		_ = a.Close() // failing with err; Close only releases the state dir
		return err
	}
	oom := d.plugins.oomWatcher(a, log)
	return d.serve(ctx, a, l, metrics, oom, hup, func(gctx context.Context, g *errgroup.Group) {
		g.Go(func() error { return collectImages(gctx, images, cfg.Image.GCInterval, log) })
		g.Go(func() error { return watchDisks(gctx, a, cz, cfg.Image.DiskInterval, log) })
	})
}

// serve runs the daemon's servers in one group: the first to fail ends
// the group's context, which stops the others.
func (d *Daemon) serve(ctx context.Context, a *agent.Agent, l net.Listener, metrics *metricsServer, oom *agent.OOMWatcher, hup <-chan os.Signal, loops ...func(context.Context, *errgroup.Group)) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, start := range loops { // the image cache's collection, the disk watcher
		start(gctx, g)
	}
	// Serve starts the agent (recovers the containers), then answers on
	// l until gctx ends; it closes l and a.
	g.Go(func() error {
		return agentserver.Serve(gctx, a, l, agentserver.Options{
			IdleTimeout: d.cfg.SocketIdleTimeout, MaxConns: d.cfg.SocketMaxConns, Log: d.log})
	})
	if metrics != nil {
		g.Go(func() error { return metrics.serve(gctx, d.log) })
	}
	if oom != nil {
		g.Go(func() error {
			// Not fatal: without it the cgroup OOM counters read at exit
			// remain.
			if err := oom.Run(gctx); err != nil && !errors.Is(err, context.Canceled) {
				d.log.Warn("oom watcher ended", "err", err)
			}
			return nil
		})
	}
	if lc := d.cfg.Link; lc.Master != "" {
		g.Go(func() error {
			score := lc.PerfScore
			if score == 0 {
				score = MeasurePerfScore(gctx, perfBenchTime)
				d.log.Info("measured the machine performance score (meDRF)", "score", score, "bench", perfBenchTime)
			}
			err := taskrunner.Run(gctx, a, taskrunner.LinkConfig{
				PerformanceScore: score,
				Master:           lc.Master, Discover: lc.Discover, StateDir: d.cfg.StateDir, Resources: d.res.total,
				RetryMin: lc.RetryMin, RetryMax: lc.RetryMax, Principal: lc.Principal, Secret: d.secret,
				DialOptions: lc.DialOptions,
			}, d.log)
			if err == nil && gctx.Err() == nil {
				err = errLinkEnded // an agent of a master does not serve without its link
			}
			return err
		})
	}
	n := sdnotify.New(d.log)
	g.Go(func() error { return d.reloadOnHangup(gctx, hup, a.Ready(), n) })
	g.Go(func() error { return d.notifyReady(gctx, a, n) })
	if iv, err := sdnotify.WatchdogInterval(); err != nil {
		d.log.Warn("systemd watchdog off", "err", err)
	} else if iv > 0 {
		g.Go(func() error { n.RunWatchdog(gctx, iv); return nil })
		g.Go(func() error { return d.watchdog(gctx, a, n, iv) })
	}
	return g.Wait()
}

// containerizerWarmSandboxes maps --warm-sandboxes 0 (none) to the
// containerizer's -1 (0 there is its default).
func containerizerWarmSandboxes(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// containerizerLogRate maps --log-rate 0 (no bound) to the containerizer's
// "no bound", a negative rate (its 0 means its default).
func containerizerLogRate(rate int64) int64 {
	if rate == 0 {
		return -1
	}
	return rate
}

// errLinkEnded: the master link returned while the agent was running.
var errLinkEnded = errors.New("master link ended")

// SetMaster sets the master the agent links to, before Run: `brim dev`
// learns its own master's address once that listens, after New.
func (d *Daemon) SetMaster(addr string) { d.cfg.Link.Master = addr }

// raiseFileLimit raises the agent's open-file limit and logs how many
// containers it can follow.
func raiseFileLimit(log *slog.Logger) {
	n, err := agent.RaiseFileLimit()
	if err != nil {
		log.Warn("open-file limit", "err", err)
		return
	}
	log.Info("open-file limit", "nofile", n, "containers_max", n/agent.FDsPerContainer)
}
