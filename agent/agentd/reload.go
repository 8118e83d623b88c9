package agentd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/brimnode/brim/internal/sdnotify"
)

// Reloadable is what a reload may change while the agent runs. Zero
// fields leave the setting in force. Everything else in the file needs a
// restart: Restart names the settings whose new values were not applied.
type Reloadable struct {
	LogLevel string
	// Plugins are the estimator and QoS controller with their options.
	// A plugin whose name and options are unchanged keeps running; a
	// changed one is opened anew and replaces the old, which is closed.
	// The QoS controller is not replaced while corrections are in force
	// (the reload fails, and nothing of it applies).
	Plugins *PluginConfig
	// Principal must be the principal in force (a new one needs a
	// restart); Secret is its secret, sent from the next connection on.
	Principal, Secret string
	// Restart names changed settings that a reload cannot apply.
	Restart []string
}

// PluginConfig is the part of OversubConfig a reload may change.
type PluginConfig struct {
	Estimator     string
	EstimatorOpts []string
	QoS           string
	QoSOpts       []string
}

func (r Reloadable) level() (slog.Level, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(r.LogLevel)); err != nil {
		return 0, fmt.Errorf("log-level %q: want debug, info, warn or error", r.LogLevel)
	}
	return lv, nil
}

// notifyHangup catches SIGHUP from now on (its default action would end
// the agent and leave its socket); stop releases it.
func notifyHangup() (hup <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP)
	return c, func() { signal.Stop(c) }
}

// reloadOnHangup re-reads the settings file on every SIGHUP until ctx
// ends (systemd's ExecReload=kill -HUP $MAINPID).
// systemd hears RELOADING=1 before and READY=1 after, whether the new
// configuration took or the old one stays.
// (A reload before the agent is ready says nothing: READY=1 is the
// recovery's to send.)
func (d *Daemon) reloadOnHangup(ctx context.Context, hup <-chan os.Signal, ready <-chan struct{}, n *sdnotify.Notifier) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
		}
		isReady := false
		select {
		case <-ready:
			isReady = true
		default:
		}
		if isReady {
			if err := n.Reloading(); err != nil {
				d.log.Warn("notify systemd", "err", err)
			}
		}
		d.reload(ctx)
		if isReady {
			if err := n.Ready("reloaded"); err != nil {
				d.log.Warn("notify systemd", "err", err)
			}
		}
	}
}

// reload re-reads the configuration (Deps.Reload) and applies what is
// reloadable, all of it or, on an error, none of it: a configuration that
// does not load, a plugin that does not open, a QoS controller change
// while corrections are in force are logged and the settings in force
// stay. Without --config, SIGHUP is logged.
func (d *Daemon) reload(ctx context.Context) {
	if d.cfg.ConfigFile == "" || d.deps.Reload == nil {
		d.log.Info("SIGHUP: no --config to reload")
		return
	}
	r, err := d.deps.Reload()
	if err == nil {
		err = d.apply(ctx, r)
	}
	if err != nil {
		d.log.Error("SIGHUP: reload settings; the previous ones stay in force", "config", d.cfg.ConfigFile, "err", err)
		return
	}
	args := []any{"config", d.cfg.ConfigFile}
	if d.deps.Level != nil {
		args = append(args, "log-level", d.deps.Level.Level().String())
	}
	d.plugins.mu.Lock()
	args = append(args, "estimator", d.plugins.cfg.Estimator, "qos", d.plugins.cfg.QoS)
	d.plugins.mu.Unlock()
	d.log.Info("SIGHUP: settings reloaded", args...)
	if len(r.Restart) > 0 {
		d.log.Warn("SIGHUP: changed settings that need a restart were not applied", "settings", strings.Join(r.Restart, ", "))
	}
}

// apply applies r: every check first, then the plugin swap (which may
// still be refused), then the rest.
func (d *Daemon) apply(ctx context.Context, r Reloadable) error {
	var lv slog.Level
	if r.LogLevel != "" && d.deps.Level != nil {
		var err error
		if lv, err = r.level(); err != nil {
			return err
		}
	}
	if r.Principal != "" && r.Principal != d.cfg.Link.Principal {
		return bad("--principal", "%q: the agent authenticates as %q; a new principal needs a restart", r.Principal, d.cfg.Link.Principal)
	}
	if r.Secret != "" && d.cfg.Link.Principal == "" {
		return bad("--secret-file", "a secret without --principal")
	}
	if r.Plugins != nil {
		if err := d.swapPlugins(ctx, *r.Plugins); err != nil {
			return err
		}
	}
	if r.LogLevel != "" && d.deps.Level != nil {
		d.deps.Level.Set(lv)
	}
	if r.Secret != "" {
		d.secret.Set(r.Secret)
	}
	return nil
}

// swapPlugins opens the estimator and QoS controller of pc that differ
// from those running and swaps them into the agent; the replaced ones are
// closed. On an error nothing changes (what was opened is closed).
func (d *Daemon) swapPlugins(ctx context.Context, pc PluginConfig) error {
	p := d.plugins
	p.mu.Lock()
	defer p.mu.Unlock()
	next := p.cfg
	next.Estimator, next.EstimatorOpts, next.QoS, next.QoSOpts = pc.Estimator, pc.EstimatorOpts, pc.QoS, pc.QoSOpts
	if err := next.validate(); err != nil {
		return err
	}
	newEst := !sameSpec(p.cfg.Estimator, p.cfg.EstimatorOpts, next.Estimator, next.EstimatorOpts)
	newCtrl := !sameSpec(p.cfg.QoS, p.cfg.QoSOpts, next.QoS, next.QoSOpts)
	if !newEst && !newCtrl {
		return nil
	}
	if p.agent == nil {
		return errors.New("the agent is not running yet")
	}
	opened, err := openPlugins(next, d.deps, d.log, newEst, newCtrl)
	if err != nil {
		return err
	}
	if err := checkIOThrottle(opened.ctrl, p.ioLimits); err != nil {
		opened.close(d.log)
		return err
	}
	if newCtrl {
		// The QoS loop takes it between rounds; it runs once the agent
		// has recovered.
		sctx, cancel := context.WithTimeout(ctx, swapWait)
		err := p.agent.SwapController(sctx, opened.ctrl, next.QoS)
		cancel()
		if err != nil {
			opened.close(d.log)
			return fmt.Errorf("--qos %q: %w", next.QoS, err)
		}
		closePlugin(p.ctrl, d.log)
		p.ctrl = opened.ctrl
	}
	if newEst {
		if err := p.agent.SwapEstimator(opened.est, next.Estimator); err != nil {
			// Only without oversubscription, which this agent has.
			closePlugin(opened.est, d.log)
			return fmt.Errorf("--estimator %q: %w", next.Estimator, err)
		}
		closePlugin(p.est, d.log)
		p.est = opened.est
	}
	p.cfg = next
	return nil
}

// swapWait bounds the wait for the QoS loop to take a new controller.
const swapWait = 10 * time.Second

// sameSpec reports whether two plugin specs (name and options) are equal.
func sameSpec(name string, opts []string, name2 string, opts2 []string) bool {
	return strings.TrimSpace(name) == strings.TrimSpace(name2) && slices.Equal(opts, opts2)
}
