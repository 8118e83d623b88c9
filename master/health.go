package master

import (
	"time"
)

// Agent health: an agent is unreachable once it has been silent for
// MaxMissedHeartbeats heartbeats — of the time the master could listen.
// A master that stops listening itself (a SIGSTOP, a pause of the whole
// machine, its lock held by a store call stuck on a dying etcd member)
// hears nothing meanwhile, and on waking found every agent silent past
// the limit: it declared them unreachable in one millisecond and their
// tasks LOST, after a 2.36 s freeze that no election followed (issue
// 30, chaos master-stop and etcd-cut). So:
//
//   - The checks time the master's own hearing: a gap between two
//     checks of more than two check periods is time the master was
//     deaf (the checks run on the loop that allocates and take the lock
//     that every agent message takes: when they cannot run, no
//     heartbeat is heard either). Deaf time does not count against
//     anyone: agents' silence, frameworks' failover timeouts, the
//     re-registration window and the STAGING grace all move on by it.
//   - A stall of half the agent timeout or more may have outlasted
//     agents' links (their keepalive closes a stream that does not
//     answer): every agent gets the re-registration window from the
//     end of the stall, as agents get after a failover (Mesos's
//     agent_reregister_timeout); a live agent's heartbeats, on its
//     stream or a new one, show it is there long before.
//   - Agents that all went silent at once (their last messages within
//     one heartbeat of each other), two or more, point at the master
//     (its link, its process) rather than at each of them: they get the
//     re-registration window once, and are declared unreachable only if
//     still silent after it (Mesos rate-limits agent removals for the
//     same reason: --agent_removal_rate_limit).
//   - A highly available master whose term may have ended (Tenure)
//     declares nothing: it resumed after its lease ran out and will step
//     down; its writes are fenced, and so are its in-memory verdicts.

// Tenure is an optional ability of a highly available master's term
// (Options.Tenure): Held reports whether the leadership still holds by
// the term's own clock — false from the moment it may have ended (a
// leader thawed after its lease ran out), before the term's Done
// closes. Safe for concurrent use.
type Tenure interface {
	Held() bool
}

// checkEvery is the period of the health checks (Run).
func (m *Master) checkEvery() time.Duration {
	return min(m.opts.HeartbeatInterval/2, time.Second)
}

// agentTimeout is how long an agent may be silent, in time the master
// listened, before it is unreachable.
func (m *Master) agentTimeout() time.Duration {
	return m.opts.HeartbeatInterval * time.Duration(m.opts.MaxMissedHeartbeats)
}

// held reports whether this master may act as the leader now (always
// without a Tenure: one master).
func (m *Master) held() bool {
	return m.opts.Tenure == nil || m.opts.Tenure.Held()
}

// hearLocked times the master's hearing up to the check at now: a gap
// since the previous check longer than two check periods is deaf time,
// which moves every deadline measured from an earlier moment on by as
// much; a stall of half the agent timeout or more also gives every
// agent the re-registration window from now. It returns the deaf time.
func (m *Master) hearLocked(now time.Time) time.Duration {
	last := m.lastCheck
	m.lastCheck = now
	every := m.checkEvery()
	if last.IsZero() || now.Sub(last) <= 2*every {
		return 0
	}
	deaf := now.Sub(last) - every
	for _, ag := range m.agents {
		ag.lastSeen = ag.lastSeen.Add(deaf)
	}
	for _, f := range m.frameworks {
		if f.out == nil {
			f.disconnectedAt = f.disconnectedAt.Add(deaf)
		}
	}
	for t, since := range m.unseenStaging {
		m.unseenStaging[t] = since.Add(deaf)
	}
	m.awaitUntil = m.awaitUntil.Add(deaf)
	if deaf < m.agentTimeout()/2 {
		m.log.Info("the master could not listen for a while: it does not count against agents or frameworks", "deaf", deaf.Round(time.Millisecond))
		return deaf
	}
	grace := m.reregistrationWindow()
	for _, ag := range m.agents {
		if !ag.unreachable {
			ag.graceFrom = now
		}
	}
	if len(m.awaited) > 0 && m.awaitUntil.Before(now.Add(grace)) {
		m.awaitUntil = now.Add(grace)
	}
	m.log.Warn("the master could not listen for a while (it was stopped or stalled): its agents get a grace to show they are there",
		"deaf", deaf.Round(time.Millisecond), "grace", grace, "agents", len(m.agents))
	return deaf
}

// checkAgentsLocked declares unreachable the agents silent past the
// agent timeout and past any grace — unless every agent went silent at
// once (silentTogether): then they get a grace first.
func (m *Master) checkAgentsLocked(now time.Time) {
	limit, grace := m.agentTimeout(), m.reregistrationWindow()
	var due []*agentEntry
	live := 0
	for _, ag := range m.agents {
		if ag.unreachable {
			continue
		}
		live++
		if now.Sub(ag.lastSeen) > limit && now.Sub(ag.graceFrom) > grace {
			due = append(due, ag)
		}
	}
	if len(due) == 0 {
		return
	}
	if len(due) == live && m.silentTogether(due) {
		for _, ag := range due {
			ag.graceFrom = now
		}
		m.log.Warn("every agent went silent at once: the master's own link or process is the likelier cause; a grace before declaring them unreachable",
			"agents", len(due), "grace", grace)
		return
	}
	for _, ag := range due {
		m.log.Warn("agent unreachable", "agent", ag.id, "silent", now.Sub(ag.lastSeen).Round(time.Millisecond))
		m.markUnreachableLocked(ag)
	}
}

// silentTogether reports whether agents (two or more) went silent within
// one heartbeat interval of each other and none was given a grace since
// it was last heard (a grace is given once per silence).
func (m *Master) silentTogether(agents []*agentEntry) bool {
	if len(agents) < 2 {
		return false
	}
	first, last := agents[0].lastSeen, agents[0].lastSeen
	for _, ag := range agents {
		if !ag.graceFrom.Before(ag.lastSeen) {
			return false // given one since it was last heard
		}
		if ag.lastSeen.Before(first) {
			first = ag.lastSeen
		}
		if ag.lastSeen.After(last) {
			last = ag.lastSeen
		}
	}
	return last.Sub(first) <= m.opts.HeartbeatInterval
}
