package agentd

import (
	"context"
	"fmt"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/internal/sdnotify"
)

// notifyReady tells systemd the agent serves once recovery is done
// (READY=1 only after every shim was reattached and orphans handled),
// and STOPPING=1 when ctx ends. Without NOTIFY_SOCKET it does nothing.
func (d *Daemon) notifyReady(ctx context.Context, a *agent.Agent, n *sdnotify.Notifier) error {
	select {
	case <-ctx.Done():
		return nil
	case <-a.Ready():
	}
	in := a.Info()
	status := fmt.Sprintf("serving: %d containers running, %d exited", in.Running, in.Exited)
	if d.cfg.Link.Master != "" {
		status += "; master " + d.cfg.Link.Master
	}
	if err := n.Ready(status); err != nil {
		d.log.Warn("notify systemd", "err", err)
	}
	d.log.Info("agent ready", "status", status)
	<-ctx.Done()
	if err := n.Stopping(); err != nil {
		d.log.Warn("notify systemd", "err", err)
	}
	return nil
}

// watchdog pings systemd (WatchdogSec=) while the agent's main loops make
// progress: "agent" beats after each round trip through the agent's state
// (its lock: a wedged launch, exit or QoS action that holds it stops the
// pings), "monitor" (with oversubscription) while the monitor's rounds are
// recent. interval is half of WatchdogSec; 0 disables the watchdog.
func (d *Daemon) watchdog(ctx context.Context, a *agent.Agent, n *sdnotify.Notifier, interval time.Duration) error {
	if interval <= 0 {
		return nil
	}
	// systemd arms the watchdog once READY=1 is sent: loops start then.
	select {
	case <-ctx.Done():
		return nil
	case <-a.Ready():
	}
	deadline := 2 * interval // WatchdogSec
	core := n.Loop("agent", deadline)
	var monitor *sdnotify.Loop
	if _, ok := a.LastSample(); ok {
		// A monitor round may wait on a slow cgroup read: give it a few
		// of its own periods beyond the watchdog's.
		monitor = n.Loop("monitor", deadline+5*d.cfg.Oversub.MonitorInterval)
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	var lastSample time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		_ = a.Info() // blocks while the agent's lock is held
		core.Beat()
		if monitor != nil {
			if at, _ := a.LastSample(); at.After(lastSample) {
				lastSample = at
				monitor.Beat()
			}
		}
	}
}
