package agent

import "time"

// Ready returns a channel that Start closes once it has recovered the
// containers and started oversubscription: from then on the agent knows
// every container a previous agent left, so a master link may report them
// (Nomad's client waits on allocrunner restore the same way). It is never
// closed when recovery fails (Start then returns the error) nor for an agent
// that only calls Recover. Safe for concurrent use; nobody else closes it.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// markReady closes the Ready channel, once.
func (a *Agent) markReady() {
	select {
	case <-a.ready:
	default:
		close(a.ready)
	}
}

// LastSample is the time of the monitor's latest round, and false without
// oversubscription (no monitor runs). The daemon's watchdog uses it to
// tell a running monitor from a wedged one.
func (a *Agent) LastSample() (time.Time, bool) {
	if a.over == nil {
		return time.Time{}, false
	}
	return a.over.mon.Usage().Timestamp, true
}
