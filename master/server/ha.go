package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/brimnode/brim/internal/sdnotify"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/transport"
	"github.com/brimnode/brim/masterlink"
)

// ErrLostLeadership ends a highly available master whose leadership
// ended under it (its etcd session expired: a partition, a long pause).
// It wraps master.ErrNotLeader. The process exits non-zero and its
// supervisor starts it again, as a standby (Mesos's masters do the same).
var ErrLostLeadership = fmt.Errorf("lost the leadership: the etcd session ended: %w", master.ErrNotLeader)

// startHA is Start for a master with an Elector: it serves at once as a
// standby — /health answers 503 naming the leader, the operator API
// redirects there (307), gRPC calls get masteraddr.NotLeader — and
// campaigns. Once elected it loads the registry through the term's
// fenced store into a new Master and serves it; when the term ends it
// stops serving at once and Wait returns ErrLostLeadership.
func startHA(ctx context.Context, cfg Config, log *slog.Logger) (_ *Running, err error) {
	if cfg.StateDir != "" {
		return nil, errors.New("a state dir (bbolt store) and an etcd store exclude each other")
	}
	auth, reloadable, err := loadAuth(cfg)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	advertise, err := advertiseAddr(cfg.Advertise, l.Addr())
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	scheme := "http"
	if cfg.TLS != nil {
		l = tls.NewListener(l, cfg.TLS)
		scheme = "https"
	}
	ender, canEnd := cfg.Elector.(master.LeaderEnder)
	endDead := canEnd && !cfg.WaitOutDeadLeader
	gt := transport.NewGate(transport.GateOptions{Self: advertise, Scheme: scheme, DeadHold: deadLeaderHold(cfg.Elector), EndDeadLeaders: endDead})
	gs := grpc.NewServer(masterlink.ServerOptions()...)
	gt.RegisterGRPC(gs)
	srv := &transport.Server{GRPC: gs, HTTP: gt}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Serve(gctx, l) })
	g.Go(func() error {
		for leader := range cfg.Elector.Observe(gctx) {
			gt.SetLeader(leader)
		}
		return nil
	})
	if endDead {
		g.Go(func() error { gt.EndDeadLeaders(gctx, ender, log); return nil })
	}
	n := sdnotify.New(log)
	if cfg.Reload != nil {
		g.Go(func() error { reloadOn(gctx, cfg.Reload, reloadable, cfg, log, n); return nil })
	}
	iv, err := sdnotify.WatchdogInterval()
	if err != nil {
		log.Warn("systemd watchdog off", "err", err)
	} else if iv > 0 {
		// A standby's main loop is its gate (every request passes it); a
		// leader's are also its allocation cycles (lead).
		g.Go(func() error { n.RunWatchdog(gctx, iv); return nil })
		g.Go(func() error { gateWatchdog(gctx, gt, n, iv); return nil })
	}
	g.Go(func() error { return lead(gctx, cfg, auth, advertise, gt, n, iv, log) })
	if err := n.Ready("standby on " + l.Addr().String()); err != nil {
		log.Warn("notify systemd", "err", err)
	}
	log.Info("master serving as a standby; campaigning", "listen", l.Addr().String(), "advertise", advertise, "tls", cfg.TLS != nil)
	return &Running{Addr: l.Addr(), g: g, gate: gt, Advertise: advertise}, nil
}

// lead campaigns, then runs a Master for the term it won until the term
// or ctx ends. With a watchdog interval (iv > 0) the term's allocation
// cycles feed systemd's watchdog too.
func lead(ctx context.Context, cfg Config, auth transport.Authorizer, advertise string, gt *transport.Gate, n *sdnotify.Notifier, iv time.Duration, log *slog.Logger) error {
	t, err := cfg.Elector.Campaign(ctx, advertise)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("campaign for the leadership: %w", err)
	}
	elected := time.Now()
	resign := func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.Resign(rctx); err != nil {
			log.Warn("resign the leadership", "err", err)
		}
	}
	opts := cfg.Options
	opts.Store = t.Store()
	if h, ok := t.(master.Tenure); ok {
		opts.Tenure = h
	}
	m, err := master.New(opts)
	if err != nil {
		resign()
		return fmt.Errorf("lead: %w", err)
	}
	api := transport.New(m, transport.Options{Auth: auth, AuthenticateAgents: cfg.AuthenticateAgents, Log: log})
	api.SetReady(true)
	tctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(tctx) }() // owned here: waited for below
	watched := make(chan struct{})
	go func() { // owned here: waited for below
		defer close(watched)
		if iv > 0 {
			allocationWatchdog(tctx, m, cfg.AllocationInterval, n, iv)
		}
	}()
	awaited := m.Metrics().AgentsAwaited // Run and registrations change it
	gt.Lead(api)
	log.Info("elected leader: serving", "advertise", advertise, "load_took", time.Since(elected).Round(time.Millisecond),
		"agents_awaited", awaited)
	if err := n.Ready("leader on " + advertise); err != nil {
		log.Warn("notify systemd", "err", err)
	}
	stop := func() {
		gt.Depose()
		cancel()
		if err := <-done; err != nil {
			log.Warn("master loop", "err", err)
		}
		<-watched
	}
	select {
	case <-t.Done():
		stop()
		log.Error("lost the leadership: stopped serving", "err", ErrLostLeadership)
		return ErrLostLeadership
	case <-ctx.Done():
		stop()
		resign()
		return nil
	case err := <-done:
		gt.Depose()
		cancel()
		<-watched
		resign()
		return err
	}
}

// advertiseAddr is where other masters send clients to reach this one:
// the given address, or the listener's when it names a host.
func advertiseAddr(advertise string, l net.Addr) (string, error) {
	if advertise != "" {
		if _, port, err := net.SplitHostPort(advertise); err != nil || port == "" {
			return "", fmt.Errorf("--advertise %q: want HOST:PORT", advertise)
		}
		return advertise, nil
	}
	ta, ok := l.(*net.TCPAddr)
	if !ok || ta.IP.IsUnspecified() {
		return "", fmt.Errorf("--listen %s names no host that others can reach: give --advertise HOST:PORT", l)
	}
	return ta.String(), nil
}

// Leading is the master this process leads with, nil while it is a
// standby (or always for a master without an Elector: see Master).
func (r *Running) Leading() *master.Master {
	if r.gate == nil {
		return r.Master
	}
	return r.gate.Leading()
}

// defaultDeadHold is the gate's dead-leader hold for an Elector that
// does not tell its session TTL: etcdstore's default TTL and a half.
const defaultDeadHold = 15 * time.Second

// deadLeaderHold is how long a standby keeps naming no leader to a
// client that could not reach the leader it names: the session TTL and
// a half (etcd expires a lease up to about half a second late).
func deadLeaderHold(e master.Elector) time.Duration {
	if t, ok := e.(master.SessionTTLer); ok && t.SessionTTL() > 0 {
		return t.SessionTTL() * 3 / 2
	}
	return defaultDeadHold
}

// gateWatchdog beats the "gate" loop while the gate's lock can be taken
// (a wedged gate stops every request), so that systemd's watchdog pings
// stop when it wedges.
func gateWatchdog(ctx context.Context, g *transport.Gate, n *sdnotify.Notifier, interval time.Duration) {
	loop := n.Loop("gate", 2*interval)
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		g.Alive()
		loop.Beat()
	}
}
