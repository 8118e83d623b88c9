package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/brimnode/brim/internal/sdnotify"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/boltstore"
	"github.com/brimnode/brim/master/transport"
	"github.com/brimnode/brim/masterlink"
)

// Config is a whole master: its Options, where it keeps its state, who may
// use it and where it listens. Start assembles and runs it (brim master,
// and the master of brim dev).
type Config struct {
	master.Options
	// Listen is the one port's address (gRPC and the HTTP API).
	Listen string
	// StateDir, when set, holds STATE-DIR/master.db (Options.Store is
	// opened there); it must be absolute. Empty: nothing persists.
	StateDir string
	// Fresh starts an empty store when STATE-DIR/master.db is empty or
	// damaged, moving it aside (StoreOptions.Fresh); without it Start
	// refuses such a file.
	Fresh bool
	// BackupInterval, when positive, backs the store up into
	// STATE-DIR/backups at start and then at this period, keeping the
	// newest BackupKeep (at least 1). 0: no backups.
	BackupInterval time.Duration
	BackupKeep     int
	// Credentials and ACLs are files (transport.NewReloadableAuth);
	// without Credentials the HTTP API and frameworks need no
	// authentication.
	Credentials, ACLs string
	// AuthenticateAgents makes agents register with credentials of
	// Credentials (transport.Options.AuthenticateAgents).
	AuthenticateAgents bool
	// TLS, when set, serves the port over TLS (transport.LoadTLS);
	// Certificate, when set, is re-read on Reload.
	TLS         *tls.Config
	Certificate *transport.Certificate
	// Reload, when set, re-reads Credentials and ACLs on every receive
	// (brim master: SIGHUP). A reload that fails is logged and keeps the
	// files as last loaded.
	Reload <-chan os.Signal
	// Elector, when set, makes the master highly available (ha.go): it
	// serves as a standby until elected, then with the term's fenced
	// store (StateDir must be empty). Advertise is the address it is
	// reached at, named by standbys (default: the listener's).
	Elector   master.Elector
	Advertise string
	// WaitOutDeadLeader, with an Elector that can end a leader's session
	// (LeaderEnder), keeps this standby from doing so: a leader whose
	// address refuses connections is then replaced only when its session
	// expires, a TTL after its last refresh (transport.Gate's
	// EndDeadLeaders).
	WaitOutDeadLeader bool
}

// Running is a started master. Wait for it after its context ends.
type Running struct {
	// Master is the running master (nil with an Elector: see Leading).
	Master *master.Master
	// Addr is the address it listens on.
	Addr net.Addr
	// Advertise is the address a highly available master is reached at.
	Advertise string
	g         *errgroup.Group
	store     master.Store
	gate      *transport.Gate // highly available: what it serves; nil otherwise
}

// Start opens cfg's store, loads its credentials, listens and runs the
// master's loops, its servers and the reloader until ctx ends or one of
// them fails (which stops the others). It returns once the port is open;
// on an error nothing is left open.
func Start(ctx context.Context, cfg Config) (_ *Running, err error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The master's own lines; its parts name their own component (one
	// per line: internal/logging.OneComponent).
	log = log.With("component", "master")
	if cfg.Elector != nil {
		return startHA(ctx, cfg, log)
	}
	var closers []func() error
	var bolt *boltstore.Store
	defer func() {
		if err != nil {
			for _, c := range closers {
				_ = c()
			}
		}
	}()
	if cfg.StateDir != "" {
		if !filepath.IsAbs(cfg.StateDir) {
			return nil, fmt.Errorf("--state-dir %q: must be an absolute path", cfg.StateDir)
		}
		if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
			return nil, fmt.Errorf("create state dir: %w", err)
		}
		st, err := boltstore.OpenWith(filepath.Join(cfg.StateDir, "master.db"), boltstore.Options{Fresh: cfg.Fresh})
		if err != nil {
			return nil, err
		}
		closers = append(closers, st.Close)
		cfg.Store = st
		bolt = st
		if aside := st.MovedAside(); aside != "" {
			log.Warn("--fresh: the store was empty or damaged; starting with an empty one", "kept_as", aside)
		}
	}
	auth, reloadable, err := loadAuth(cfg)
	if err != nil {
		return nil, err
	}
	m, err := master.New(cfg.Options)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if cfg.TLS != nil {
		l = tls.NewListener(l, cfg.TLS)
	}
	api := transport.New(m, transport.Options{Auth: auth, AuthenticateAgents: cfg.AuthenticateAgents, Log: log})
	gs := grpc.NewServer(masterlink.ServerOptions()...) // permits the agents' keepalive pings
	api.RegisterGRPC(gs)
	srv := &transport.Server{GRPC: gs, HTTP: api.Handler()}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return m.Run(gctx) })
	g.Go(func() error { return srv.Serve(gctx, l) })
	if bolt != nil && cfg.BackupInterval > 0 {
		g.Go(func() error {
			bolt.RunBackups(gctx, filepath.Join(cfg.StateDir, boltstore.BackupDir), cfg.BackupInterval, cfg.BackupKeep, log)
			return nil
		})
	}
	n := sdnotify.New(log)
	if cfg.Reload != nil {
		g.Go(func() error { reloadOn(gctx, cfg.Reload, reloadable, cfg, log, n); return nil })
	}
	api.SetReady(true)
	status := "serving on " + l.Addr().String()
	if err := n.Ready(status); err != nil {
		log.Warn("notify systemd", "err", err)
	}
	g.Go(func() error {
		<-gctx.Done()
		if err := n.Stopping(); err != nil {
			log.Warn("notify systemd", "err", err)
		}
		return nil
	})
	if iv, err := sdnotify.WatchdogInterval(); err != nil {
		log.Warn("systemd watchdog off", "err", err)
	} else if iv > 0 {
		g.Go(func() error { n.RunWatchdog(gctx, iv); return nil })
		g.Go(func() error { allocationWatchdog(gctx, m, cfg.AllocationInterval, n, iv); return nil })
	}
	log.Info("master serving", "listen", l.Addr().String(), "state_dir", cfg.StateDir, "tls", cfg.TLS != nil)
	return &Running{Master: m, Addr: l.Addr(), g: g, store: cfg.Store}, nil
}

// Wait waits for everything Start started to stop (after its context
// ended, or one part failed) and closes the store; it returns the first
// failure and the store's close error.
func (r *Running) Wait() error {
	err := r.g.Wait()
	if c, ok := r.store.(interface{ Close() error }); ok {
		err = errors.Join(err, c.Close())
	}
	return err
}

// reloadOn reads the credentials and ACLs again on every receive on
// reload until ctx ends. Without credentials there is nothing to reload.
func reloadOn(ctx context.Context, reload <-chan os.Signal, a *transport.ReloadableAuth, cfg Config, log *slog.Logger, n *sdnotify.Notifier) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload:
		}
		if err := n.Reloading(); err != nil {
			log.Warn("notify systemd", "err", err)
		}
		reloadAuth(a, cfg, log)
		if cfg.Certificate != nil {
			if err := cfg.Certificate.Reload(); err != nil {
				log.Error("SIGHUP: reload the TLS certificate; the previous one stays in force", "err", err)
			} else {
				log.Info("SIGHUP: TLS certificate reloaded")
			}
		}
		if err := n.Ready("reloaded"); err != nil {
			log.Warn("notify systemd", "err", err)
		}
	}
}

func reloadAuth(a *transport.ReloadableAuth, cfg Config, log *slog.Logger) {
	if a == nil {
		log.Info("SIGHUP: no --credentials to reload")
		return
	}
	if err := a.Reload(); err != nil {
		log.Error("SIGHUP: reload credentials; the previous ones stay in force", "credentials", cfg.Credentials, "acls", cfg.ACLs, "err", err)
		return
	}
	log.Info("SIGHUP: credentials reloaded", "credentials", cfg.Credentials, "acls", cfg.ACLs, "principals", a.Principals())
}

// loadAuth reads cfg's credentials and ACLs (none without Credentials).
func loadAuth(cfg Config) (transport.Authorizer, *transport.ReloadableAuth, error) {
	if cfg.Credentials == "" {
		return nil, nil, nil
	}
	a, err := transport.NewReloadableAuth(cfg.Credentials, cfg.ACLs)
	if err != nil {
		return nil, nil, err
	}
	return a, a, nil
}

// allocationWatchdog beats the "allocation" loop while allocation cycles
// complete (each takes the master's lock: a wedged domain stops them),
// so that systemd's watchdog pings stop when the master wedges.
func allocationWatchdog(ctx context.Context, m *master.Master, allocationInterval time.Duration, n *sdnotify.Notifier, interval time.Duration) {
	if allocationInterval <= 0 {
		allocationInterval = master.DefaultAllocationInterval
	}
	loop := n.Loop("allocation", max(2*interval, 3*allocationInterval))
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	last := -1
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if cycles, _, _, _, _ := m.CycleStats(); cycles != last {
			last = cycles
			loop.Beat()
		}
	}
}
