package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/brimnode/brim/master"
	"github.com/spf13/cobra"
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
	allocationInterval  time.Duration
	heartbeatInterval   time.Duration
	maxMissedHeartbeats int
	offerTimeout        time.Duration
	failoverTimeout     time.Duration
	refuse              time.Duration
	sorter              string
}

// register adds the flags to cmd; --state-dir only with a default.
func (f *masterFlags) register(cmd *cobra.Command, stateDirDefault string) {
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", defaultMasterListen, "address of the gRPC (agents, frameworks) and HTTP (operators) API, one port")
	if stateDirDefault != "" {
		fl.StringVar(&f.stateDir, "state-dir", stateDirDefault, "state directory (the master's bbolt store lives in STATE-DIR/master.db)")
	}
	fl.StringVar(&f.credentials, "credentials", "", "operator credentials file (JSON: [{\"principal\":…, \"secret\":…}]); empty: the HTTP API needs no authentication")
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
		Log:                 log,
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
	if f.credentials != "" {
		a, err := master.LoadAuth(f.credentials, f.acls)
		if err != nil {
			return nil, nil, nil, err
		}
		auth = a
	}
	m, err := master.New(opts)
	if err != nil {
		return nil, nil, nil, err
	}
	l, err := net.Listen("tcp", f.listen)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("listen: %w", err)
	}
	gs := grpc.NewServer()
	m.RegisterGRPC(gs)
	api := m.HTTPHandler(auth)
	// One port, like Mesos's 5050: HTTP/2 requests with a gRPC content type
	// go to the gRPC server (prior-knowledge h2c, as gRPC clients speak),
	// everything else to the operator API.
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
				gs.ServeHTTP(w, r)
				return
			}
			api.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	hs.Protocols = new(http.Protocols)
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
	// Agents and frameworks each hold one long-lived stream; a proxy or a
	// test may multiplex many on one connection.
	hs.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1 << 16}
	errc := make(chan error, 2)
	go func() { errc <- m.Run(ctx) }()
	go func() {
		err := hs.Serve(l)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		errc <- err
	}()
	log.Info("master serving", "listen", l.Addr().String(), "state_dir", f.stateDir)
	wait := func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gs.Stop()
		_ = hs.Shutdown(sctx)
		hs.Close()
		err := errors.Join(<-errc, <-errc)
		if c, ok := opts.Store.(interface{ Close() error }); ok {
			err = errors.Join(err, c.Close())
		}
		return err
	}
	return m, l.Addr(), wait, nil
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
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "text or json")
	markUsageErrors(cmd)
	return cmd
}
