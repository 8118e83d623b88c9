package agentd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Reloadable is the settings file of --config, read at start and again on
// every SIGHUP: {"log-level": "debug"}. A field left out keeps its flag's
// value. Only the log level is reloadable: the estimator and QoS
// controller keep the options they were opened with.
type Reloadable struct {
	LogLevel string `json:"log-level,omitempty"`
}

// LoadReloadable reads and checks the settings file at p. Unknown fields
// are refused, so a typo does not pass for a reload.
func LoadReloadable(p string) (Reloadable, error) {
	var r Reloadable
	b, err := os.ReadFile(p)
	if err != nil {
		return r, fmt.Errorf("read %s: %w", p, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("parse %s: %w", p, err)
	}
	if r.LogLevel != "" {
		if _, err := r.level(); err != nil {
			return r, fmt.Errorf("%s: %w", p, err)
		}
	}
	return r, nil
}

func (r Reloadable) level() (slog.Level, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(r.LogLevel)); err != nil {
		return 0, fmt.Errorf("log-level %q: want debug, info, warn or error", r.LogLevel)
	}
	return lv, nil
}

// apply sets what r sets.
func (r Reloadable) apply(level *slog.LevelVar) {
	if r.LogLevel != "" && level != nil {
		lv, _ := r.level() // checked by LoadReloadable
		level.Set(lv)
	}
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
func (d *Daemon) reloadOnHangup(ctx context.Context, hup <-chan os.Signal) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			d.reload()
		}
	}
}

// reload applies the settings file. A file that does not load is logged
// and the settings in force stay; without a file, SIGHUP is logged.
func (d *Daemon) reload() {
	if d.cfg.ReloadFile == "" {
		d.log.Info("SIGHUP: no --config to reload")
		return
	}
	r, err := LoadReloadable(d.cfg.ReloadFile)
	if err != nil {
		d.log.Error("SIGHUP: reload settings; the previous ones stay in force", "config", d.cfg.ReloadFile, "err", err)
		return
	}
	r.apply(d.deps.Level)
	args := []any{"config", d.cfg.ReloadFile}
	if d.deps.Level != nil {
		args = append(args, "log-level", d.deps.Level.Level().String())
	}
	d.log.Info("SIGHUP: settings reloaded", args...)
}
