package agentd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/brimnode/brim/internal/sdnotify"
)

// Reloadable is what a reload may change while the agent runs: the log
// level. The estimator and QoS controller keep the options they were
// opened with until a restart (they have no reconfigure API).
type Reloadable struct {
	LogLevel string // empty: unchanged
}

func (r Reloadable) level() (slog.Level, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(r.LogLevel)); err != nil {
		return 0, fmt.Errorf("log-level %q: want debug, info, warn or error", r.LogLevel)
	}
	return lv, nil
}

// apply sets what r sets; a value that does not parse changes nothing.
func (r Reloadable) apply(level *slog.LevelVar) error {
	if r.LogLevel == "" || level == nil {
		return nil
	}
	lv, err := r.level()
	if err != nil {
		return err
	}
	level.Set(lv)
	return nil
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
		d.reload()
		if isReady {
			if err := n.Ready("reloaded"); err != nil {
				d.log.Warn("notify systemd", "err", err)
			}
		}
	}
}

// reload re-reads the configuration (Deps.Reload) and applies what is
// reloadable. A configuration that does not load is logged and the
// settings in force stay; without --config, SIGHUP is logged.
func (d *Daemon) reload() {
	if d.cfg.ConfigFile == "" || d.deps.Reload == nil {
		d.log.Info("SIGHUP: no --config to reload")
		return
	}
	r, err := d.deps.Reload()
	if err == nil {
		err = r.apply(d.deps.Level)
	}
	if err != nil {
		d.log.Error("SIGHUP: reload settings; the previous ones stay in force", "config", d.cfg.ConfigFile, "err", err)
		return
	}
	args := []any{"config", d.cfg.ConfigFile}
	if d.deps.Level != nil {
		args = append(args, "log-level", d.deps.Level.Level().String())
	}
	d.log.Info("SIGHUP: settings reloaded", args...)
}
