package sdnotify

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier sends a daemon's state to systemd and owns its watchdog. It is
// safe for concurrent use.
type Notifier struct {
	log *slog.Logger
	// send is daemon.SdNotify, replaced in no test: tests listen on a real
	// NOTIFY_SOCKET instead.
	send func(state string) error

	mu    sync.Mutex
	loops map[string]*Loop
}

// New returns a Notifier for the socket named by $NOTIFY_SOCKET.
func New(log *slog.Logger) *Notifier {
	return &Notifier{
		log:   log,
		send:  func(state string) error { _, err := daemon.SdNotify(false, state); return err },
		loops: map[string]*Loop{},
	}
}

func (n *Notifier) notify(state string) error {
	if err := n.send(state); err != nil {
		return fmt.Errorf("sd_notify %q: %w", state, err)
	}
	return nil
}

// Ready says the daemon serves (after recovery), with a status line.
func (n *Notifier) Ready(status string) error {
	return n.notify(daemon.SdNotifyReady + "\nSTATUS=" + status)
}

// Status sets the free-form status line `systemctl status` shows.
func (n *Notifier) Status(status string) error { return n.notify("STATUS=" + status) }

// Reloading says a reload started; call Ready when it is over, whether
// the new configuration took or the old one stays.
func (n *Notifier) Reloading() error {
	return n.notify(fmt.Sprintf("%s\nMONOTONIC_USEC=%d", daemon.SdNotifyReloading, monotonicUsec()))
}

// Stopping says the daemon is shutting down.
func (n *Notifier) Stopping() error { return n.notify(daemon.SdNotifyStopping) }

// Loop is one main loop whose health the watchdog checks. A loop beats at
// least once per deadline while it is healthy, idle or not.
type Loop struct {
	name     string
	deadline time.Duration

	mu   sync.Mutex
	last time.Time
}

// Loop registers a main loop that promises to beat at least every
// deadline. It starts healthy. Registering a name twice returns the same
// loop.
func (n *Notifier) Loop(name string, deadline time.Duration) *Loop {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l, ok := n.loops[name]; ok {
		return l
	}
	l := &Loop{name: name, deadline: deadline, last: time.Now()}
	n.loops[name] = l
	return l
}

// Beat records that the loop made progress.
func (l *Loop) Beat() {
	l.mu.Lock()
	l.last = time.Now()
	l.mu.Unlock()
}

func (l *Loop) stale(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return now.Sub(l.last) > l.deadline
}

// Stale returns the names of the loops that missed their deadline at now,
// sorted; empty when the daemon is healthy.
func (n *Notifier) Stale(now time.Time) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for name, l := range n.loops {
		if l.stale(now) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// WatchdogInterval is how often to ping: half of WatchdogSec, or 0 when
// systemd asked for no watchdog.
func WatchdogInterval() (time.Duration, error) {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return 0, fmt.Errorf("read WATCHDOG_USEC: %w", err)
	}
	return d / 2, nil
}

// RunWatchdog pings systemd every interval while no loop is stale, until
// ctx ends. A stale loop is logged once when it goes stale; the pings
// resume when every loop beats again. interval <= 0 returns at once.
func (n *Notifier) RunWatchdog(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var wasStale []string
	for {
		stale := n.Stale(time.Now())
		switch {
		case len(stale) == 0:
			if wasStale != nil {
				n.log.Info("watchdog: every main loop beats again; pinging systemd")
			}
			if err := n.notify(daemon.SdNotifyWatchdog); err != nil {
				n.log.Warn("watchdog ping", "err", err)
			}
		case !slices.Equal(stale, wasStale):
			n.log.Error("watchdog: main loops stalled; not pinging systemd", "loops", stale)
		}
		wasStale = stale
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
