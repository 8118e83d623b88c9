package agent

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// checkpointRetry is how often records that could not be written are
// tried again (see saveLocked).
const checkpointRetry = 2 * time.Second

// CheckpointStatus says whether the checkpoint on disk is up to date.
type CheckpointStatus struct {
	// Unsaved counts the records only in memory, the containers' and
	// the network isolator's (Options.RecordsUnsaved): a write failed
	// and is retried every few seconds.
	Unsaved int
	// Full is true while the state dir's disk has less than
	// minFreeBytes left, or the last write failed for lack of space (or
	// quota) there.
	Full bool
	// FreeBytes is the space left on the state dir's disk, -1 unknown.
	FreeBytes int64
	// Err is the last failed write's error, "" once every record is
	// written.
	Err string
}

// saveLocked writes c's record. A write that fails (a full disk) is not
// the container's failure: the record stays in memory, the agent goes on
// managing the container, reports the state dir (Info, metrics, a log
// line) and writes the record when it can (retryUnsaved). A quarantined
// container has no record of its own.
func (a *Agent) saveLocked(c *Container) {
	if c.Quarantine != "" {
		return
	}
	err := a.store.put(c)
	if err != nil {
		a.unsaved[c.ID] = true
	} else {
		delete(a.unsaved, c.ID)
	}
	a.noteSaveLocked(err)
}

// noteSaveLocked records the outcome of a checkpoint write, logging when
// writes start failing and when every record is written again.
func (a *Agent) noteSaveLocked(err error) {
	switch {
	case err != nil:
		if a.saveErr == nil {
			a.log.Error("state dir: cannot write the checkpoint; containers are managed as before, their records are kept in memory and written once the disk allows",
				"state_dir", a.opts.StateDir, "full", diskFull(err), "unsaved", len(a.unsaved), "err", err)
		}
		a.saveErr = err
	case a.saveErr != nil && len(a.unsaved) == 0:
		a.log.Info("state dir: checkpoint written again", "state_dir", a.opts.StateDir)
		a.saveErr = nil
	}
}

// retryUnsaved writes the records a failed write left in memory; it
// stops at the first that fails again (the disk is still full).
func (a *Agent) retryUnsaved() {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := make([]string, 0, len(a.unsaved))
	for id := range a.unsaved {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		c := a.containers[id]
		if c == nil {
			delete(a.unsaved, id)
			continue
		}
		if a.saveLocked(c); a.unsaved[id] {
			return
		}
	}
	if a.saveErr != nil && len(a.unsaved) == 0 {
		// Only a launch's first record failed (the launch was refused):
		// a probe tells whether the disk has room again.
		a.noteSaveLocked(a.store.probe())
	}
}

// minFreeBytes is the space below which the state dir counts as full: a
// few checkpoint records (a record is about 1 KiB).
const minFreeBytes = 64 << 10

// checkpointLocked is Info's CheckpointStatus.
func (a *Agent) checkpointLocked() CheckpointStatus {
	st := CheckpointStatus{Unsaved: len(a.unsaved), FreeBytes: freeBytes(a.opts.StateDir)}
	st.Full = st.FreeBytes >= 0 && st.FreeBytes < minFreeBytes
	if a.saveErr != nil {
		st.Err = a.saveErr.Error()
		st.Full = st.Full || diskFull(a.saveErr)
	}
	if a.opts.RecordsUnsaved == nil {
		return st
	}
	others := a.opts.RecordsUnsaved()
	for _, id := range slices.Sorted(maps.Keys(others)) {
		err := others[id]
		st.Unsaved++
		if st.Err == "" {
			st.Err = err.Error()
		}
		st.Full = st.Full || diskFull(err)
	}
	return st
}

// checkpointMetrics are brim_agent_state_dir_full and
// brim_agent_checkpoint_unsaved.
func (a *Agent) checkpointMetrics() []prometheus.Collector {
	status := func() CheckpointStatus {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.checkpointLocked()
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "brim_agent_state_dir_full",
			Help: "1 while the agent cannot write its checkpoint for lack of space on the state dir's disk.",
		}, func() float64 {
			if status().Full {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "brim_agent_checkpoint_unsaved",
			Help: "Containers whose latest checkpoint record is only in memory (a write failed; retried).",
		}, func() float64 { return float64(status().Unsaved) }),
	}
}

// warmMetrics are the runtime's warm sandboxes: brim_agent_warm_sandboxes
// (ready, filling), brim_agent_warm_sandbox_memory_bytes and
// brim_agent_launches_total (warm, cold).
func warmMetrics(wr warmReporter) []prometheus.Collector {
	gauge := func(name, help string, labels prometheus.Labels, f func(WarmSandboxes) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return f(wr.WarmSandboxes()) })
	}
	counter := func(labels prometheus.Labels, f func(WarmSandboxes) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "brim_agent_launches_total",
			Help: "Launches of the shapes warm sandboxes serve, by whether they took one (warm) or found none (cold).", ConstLabels: labels},
			func() float64 { return f(wr.WarmSandboxes()) })
	}
	const sbHelp = "Warm sandboxes: containers made ahead of launches, by state (ready, filling: being made)."
	return []prometheus.Collector{
		gauge("brim_agent_warm_sandboxes", sbHelp, prometheus.Labels{"state": "ready"}, func(w WarmSandboxes) float64 { return float64(w.Ready) }),
		gauge("brim_agent_warm_sandboxes", sbHelp, prometheus.Labels{"state": "filling"}, func(w WarmSandboxes) float64 { return float64(w.Filling) }),
		gauge("brim_agent_warm_sandbox_memory_bytes", "Memory the ready warm sandboxes hold (proportional set size of their shims and inits).",
			nil, func(w WarmSandboxes) float64 { return float64(w.MemoryBytes) }),
		counter(prometheus.Labels{"sandbox": "warm"}, func(w WarmSandboxes) float64 { return float64(w.Warm) }),
		counter(prometheus.Labels{"sandbox": "cold"}, func(w WarmSandboxes) float64 { return float64(w.Cold) }),
	}
}
