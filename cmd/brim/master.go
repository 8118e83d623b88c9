package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/masterlink"
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
	gs := grpc.NewServer(masterlink.ServerOptions()...) // permits the agents' keepalive pings
	m.RegisterGRPC(gs)
	// One port, like Mesos's 5050: connections that open with the HTTP/2
	// preface (gRPC clients: agents, frameworks) go to the gRPC server on
	// its own transport; the others (HTTP/1.1: operators, curl) to the
	// HTTP API. grpc.Server.ServeHTTP would need no sniffing but costs
	// ~100 KiB per stream: 2 GiB at 20,000 agents.
	sp := newSplitListener(l)
	hs := &http.Server{Handler: m.HTTPHandler(auth), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 3)
	stopReload := reloadOnHangup(ctx, reloadable, f, log)
	go func() { errc <- m.Run(ctx) }()
	go sp.run()
	go func() { errc <- ignoreClosed(gs.Serve(sp.grpc)) }()
	go func() { errc <- ignoreClosed(hs.Serve(sp.http)) }()
	log.Info("master serving", "listen", l.Addr().String(), "state_dir", f.stateDir, "tls", tlsCfg != nil)
	wait := func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sp.Close()
		gs.Stop()
		_ = hs.Shutdown(sctx)
		hs.Close()
		stopReload()
		err := errors.Join(<-errc, <-errc, <-errc)
		if c, ok := opts.Store.(interface{ Close() error }); ok {
			err = errors.Join(err, c.Close())
		}
		return err
	}
	return m, l.Addr(), wait, nil
}

// reloadOnHangup reads --credentials and --acls again on every SIGHUP
// (systemd's ExecReload=kill -HUP $MAINPID) until ctx ends or the
// returned function is called, which waits for it. A reload that fails is
// logged and keeps the files as last loaded; without --credentials there
// is nothing to reload, and SIGHUP is logged rather than ending the
// master.
func reloadOnHangup(ctx context.Context, a *master.ReloadableAuth, f *masterFlags, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
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
	}()
	return func() { cancel(); <-done }
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

func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// http2Preface opens every HTTP/2 connection with prior knowledge.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// splitListener sorts a listener's connections by their first bytes: the
// HTTP/2 preface to grpc, anything else to http. Close closes all three.
type splitListener struct {
	l          net.Listener
	grpc, http *chanListener
	done       chan struct{}
	once       sync.Once
}

func newSplitListener(l net.Listener) *splitListener {
	done := make(chan struct{})
	return &splitListener{l: l, done: done,
		grpc: &chanListener{ch: make(chan net.Conn), done: done, addr: l.Addr()},
		http: &chanListener{ch: make(chan net.Conn), done: done, addr: l.Addr()}}
}

func (s *splitListener) Close() error {
	s.once.Do(func() { close(s.done) })
	return s.l.Close()
}

func (s *splitListener) run() {
	for {
		c, err := s.l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.Close()
			return
		}
		go s.route(c)
	}
}

// route peeks at a connection's first bytes (bounded by a deadline so a
// silent client holds nothing) and hands it on.
func (s *splitListener) route(c net.Conn) {
	br := bufio.NewReaderSize(c, len(http2Preface))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	// Only a connection starting with "P" (the preface, or POST) needs
	// more than one byte to decide; every HTTP/1.1 request is longer than
	// the preface.
	head, err := br.Peek(1)
	if err == nil && head[0] == http2Preface[0] {
		head, err = br.Peek(len(http2Preface))
	}
	_ = c.SetReadDeadline(time.Time{})
	to := s.http
	if err == nil && string(head) == http2Preface {
		to = s.grpc
	} else if len(head) == 0 {
		c.Close()
		return
	}
	select {
	case to.ch <- &peekedConn{Conn: c, r: br}:
	case <-s.done:
		c.Close()
	}
}

// peekedConn reads first what was peeked.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// chanListener is a net.Listener fed by splitListener.
type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
	addr net.Addr
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error   { return nil } // the splitListener owns the socket
func (l *chanListener) Addr() net.Addr { return l.addr }
