package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/brimnode/brim/master"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
)

const (
	defaultMasterListen   = "127.0.0.1:5050"
	defaultMasterStateDir = "/var/lib/brim/master"
)

var _ = registerSubcommand(newMasterCommand)

// masterFlags are the master's flags, shared by `brim master` and `brim dev`.
type masterFlags struct {
	listen, stateDir    string
	credentials, acls   string
	authenticateAgents  bool
	allocationInterval  time.Duration
	heartbeatInterval   time.Duration
	maxMissedHeartbeats int
	offerTimeout        time.Duration
	failoverTimeout     time.Duration
	refuse              time.Duration
	sorter              string
	// tlsCert and tlsKey serve the port over TLS (brim master only).
	tlsCert, tlsKey string
}

// register adds the flags to cmd; --state-dir only with a default.
func (f *masterFlags) register(cmd *cobra.Command, stateDirDefault string) {
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", defaultMasterListen, "address of the gRPC (agents, frameworks) and HTTP (operators) API, one port")
	if stateDirDefault != "" {
		fl.StringVar(&f.stateDir, "state-dir", stateDirDefault, "state directory (the master's bbolt store lives in STATE-DIR/master.db)")
	}
	fl.StringVar(&f.credentials, "credentials", "", "operator credentials file (JSON: [{\"principal\":…, \"secret\":…}]); empty: the HTTP API needs no authentication")
	fl.BoolVar(&f.authenticateAgents, "authenticate-agents", false, "agents must register with a principal and secret of --credentials (brim agent --principal P --secret-file F)")
	fl.StringVar(&f.acls, "acls", "", "ACL file (JSON, see docs/master.md); empty: every authenticated principal may do everything")
	fl.DurationVar(&f.allocationInterval, "allocation-interval", master.DefaultAllocationInterval, "period of the allocation cycle")
	fl.DurationVar(&f.heartbeatInterval, "heartbeat-interval", master.DefaultHeartbeatInterval, "agents' heartbeat period")
	fl.IntVar(&f.maxMissedHeartbeats, "max-missed-heartbeats", master.DefaultMaxMissedHeartbeats, "missed heartbeats after which an agent is unreachable and its tasks LOST")
	fl.DurationVar(&f.offerTimeout, "offer-timeout", 0, "rescind offers not used within this time (0: never)")
	fl.DurationVar(&f.failoverTimeout, "failover-timeout", master.DefaultFailoverTimeout, "how long a disconnected framework keeps its tasks unless it asks for another timeout")
	fl.DurationVar(&f.refuse, "default-refuse", 5*time.Second, "how long declined resources are not offered again to the framework by default")
	fl.StringVar(&f.sorter, "sorter", "drf", "allocation order: drf, medrf or random")
}

// startMaster creates the master from the flags and serves it on its
// listener; it returns once the listener is open. The returned function
// waits for everything to stop after ctx ends.
func startMaster(ctx context.Context, f *masterFlags, log *slog.Logger) (*master.Master, net.Addr, func() error, error) {
	opts := master.Options{
		AllocationInterval:  f.allocationInterval,
		HeartbeatInterval:   f.heartbeatInterval,
		MaxMissedHeartbeats: f.maxMissedHeartbeats,
		OfferTimeout:        f.offerTimeout,
		FailoverTimeout:     f.failoverTimeout,
		AuthenticateAgents:  f.authenticateAgents,
		Log:                 log,
	}
	if f.authenticateAgents && f.credentials == "" {
		return nil, nil, nil, exitError{code: 2, msg: "--authenticate-agents needs --credentials (the principals and secrets agents authenticate with)"}
	}
	tlsCfg, err := serverTLS(f.tlsCert, f.tlsKey)
	if err != nil {
		return nil, nil, nil, err
	}
	opts.Allocator.DefaultRefuse = f.refuse
	opts.Allocator.Sorter = f.sorter
	if f.stateDir != "" {
		if !filepath.IsAbs(f.stateDir) {
			return nil, nil, nil, fmt.Errorf("--state-dir %q: must be an absolute path", f.stateDir)
		}
		if err := os.MkdirAll(f.stateDir, 0o700); err != nil {
			return nil, nil, nil, fmt.Errorf("create state dir: %w", err)
		}
		st, err := master.OpenBoltStore(filepath.Join(f.stateDir, "master.db"))
		if err != nil {
			return nil, nil, nil, err
		}
		opts.Store = st
	}
	var auth master.Authorizer
	var reloadable *master.ReloadableAuth
	if f.credentials != "" {
		a, err := master.NewReloadableAuth(f.credentials, f.acls)
		if err != nil {
			return nil, nil, nil, err
		}
		auth, reloadable = a, a
	}
	m, err := master.New(opts)
	if err != nil {
		return nil, nil, nil, err
	}
	l, err := net.Listen("tcp", f.listen)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("listen: %w", err)
	}
	if tlsCfg != nil {
		l = tls.NewListener(l, tlsCfg)
	}
	gs := grpc.NewServer()
	m.RegisterGRPC(gs)
	srv := &master.Server{GRPC: gs, HTTP: m.HTTPHandler(auth)}
	// One owner for the master's loops, its servers and the SIGHUP
	// reloader: the first to fail stops the others.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return m.Run(gctx) })
	g.Go(func() error { return srv.Serve(gctx, l) })
	// SIGHUP is caught from here on, not from whenever the goroutine
	// starts: it must never end the master.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	g.Go(func() error { reloadOnHangup(gctx, hup, reloadable, f, log); return nil })
	log.Info("master serving", "listen", l.Addr().String(), "state_dir", f.stateDir, "tls", tlsCfg != nil)
	wait := func() error {
		err := g.Wait()
		if c, ok := opts.Store.(interface{ Close() error }); ok {
			err = errors.Join(err, c.Close())
		}
		return err
	}
	return m, l.Addr(), wait, nil
}

// reloadOnHangup reads --credentials and --acls again on every SIGHUP on
// hup (systemd's ExecReload=kill -HUP $MAINPID) until ctx ends. A reload that
// fails is logged and keeps the files as last loaded; without
// --credentials there is nothing to reload, and SIGHUP is logged rather
// than ending the master.
func reloadOnHangup(ctx context.Context, hup chan os.Signal, a *master.ReloadableAuth, f *masterFlags, log *slog.Logger) {
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		if a == nil {
			log.Info("SIGHUP: no --credentials to reload")
			continue
		}
		if err := a.Reload(); err != nil {
			log.Error("SIGHUP: reload credentials; the previous ones stay in force", "credentials", f.credentials, "acls", f.acls, "err", err)
			continue
		}
		log.Info("SIGHUP: credentials reloaded", "credentials", f.credentials, "acls", f.acls, "principals", a.Principals())
	}
}

func newMasterCommand() *cobra.Command {
	var (
		f                   masterFlags
		logLevel, logFormat string
	)
	cmd := &cobra.Command{
		Use:   "master",
		Short: "Run the master: agents register, frameworks get DRF offers, operators use the HTTP API",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(cmd.ErrOrStderr(), logLevel, logFormat)
			if err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			_, _, wait, err := startMaster(cmd.Context(), &f, log)
			if err != nil {
				return err
			}
			return wait()
		},
	}
	f.register(cmd, defaultMasterStateDir)
	cmd.Flags().StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate (chain) to serve the port over TLS, gRPC and HTTP API alike (with --tls-key; default: no TLS)")
	cmd.Flags().StringVar(&f.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "text or json")
	markUsageErrors(cmd)
	return cmd
}
