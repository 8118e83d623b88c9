package master

import "time"

// The re-registration window: a master that starts — or is elected —
// with a registry knows its agents but not their tasks, which come back
// with each agent's re-registration. Until every agent of the registry
// is back or the window (Options.ReregistrationTimeout) has passed, a
// task it does not know may be on one of them: reconciliation does not
// call it LOST but remembers the question, and answers it once the
// window closes — LOST, reason RECONCILIATION, if the task is still
// unknown (its agent never came back), as Mesos does after its
// agent_reregister_timeout.

// reregistrationWindow is how long the master waits for the agents of
// the previous run: Options.ReregistrationTimeout, by default the agent
// heartbeat timeout but at least MinReregistrationWindow.
func (m *Master) reregistrationWindow() time.Duration {
	if m.opts.ReregistrationTimeout > 0 {
		return m.opts.ReregistrationTimeout
	}
	return max(m.opts.HeartbeatInterval*time.Duration(m.opts.MaxMissedHeartbeats), MinReregistrationWindow)
}

// MinReregistrationWindow is the shortest default re-registration window:
// twice the agents' longest reconnect backoff (masterlink's
// DefaultReconnectMax, held equal by TestMinReregistrationWindow: the
// domain links no link code), so that an agent that waits out a whole
// backoff after the master comes back is not called LOST. (With a 2 s
// heartbeat timeout, the window was shorter than that backoff: a master
// restart alone made running tasks LOST, then come back; chaos seed
// 2611.)
const MinReregistrationWindow = 2 * 5 * time.Second

// deferReconcileLocked remembers that framework fw asked for task while
// agents were awaited.
func (m *Master) deferReconcileLocked(fw, task string) {
	ids := m.deferred[fw]
	if ids == nil {
		ids = map[string]bool{}
		m.deferred[fw] = ids
	}
	ids[task] = true
}

// answerDeferredLocked answers the deferred reconciliations once the
// window closed: LOST for every task still unknown to a framework still
// there (a task its agent brought back was reported at its
// re-registration).
func (m *Master) answerDeferredLocked() {
	for fw, ids := range m.deferred {
		f := m.frameworks[fw]
		if f == nil {
			continue
		}
		var answers []ToFramework
		for id := range ids {
			if f.tasks[id] == nil {
				m.answerLostLocked(fw, id)
				answers = append(answers, &TaskStatus{TaskID: id, FrameworkID: fw, State: TaskLost, Reason: ReasonReconciliation,
					Message:           "unknown task: no agent reported it after the master's start or failover",
					TimestampUnixNano: time.Now().UnixNano()})
			}
		}
		if len(answers) > 0 {
			// Before the framework hears LOST.
			m.persistFrameworkThenLocked(fw, func() { m.toFrameworkLocked(fw, answers...) })
		}
	}
	clear(m.deferred)
}
