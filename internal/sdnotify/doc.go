// Package sdnotify tells systemd how a brim daemon is doing: READY=1 once
// it serves, STATUS= lines, RELOADING=1/READY=1 around a reload,
// STOPPING=1, and WATCHDOG=1 pings driven by the health of the daemon's
// main loops.
//
// The watchdog is not a free-running ticker: every main loop registers a
// [Loop] and beats it each round; [Notifier.RunWatchdog] pings systemd only
// while every loop has beaten within its own deadline, so a wedged loop
// stops the pings and systemd restarts the daemon (WatchdogSec=).
//
// Without NOTIFY_SOCKET (not run by systemd, or Type=simple) every call
// is a no-op that returns nil. Messages go through coreos/go-systemd's
// daemon package.
package sdnotify
