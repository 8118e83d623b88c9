package qos

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/brimnode/brim/monitor"
)

// The interference controller's graded response is a ladder, one step
// function per level (like etcd-io/raft's step per state). Every round
// observes (observe), steps with the current level's function, and brings
// every correctable revocable container to the level then in force
// (bring) — unless the step ended the round (a KILL, a step down).
//
//	          persistent                     cooled              held, cooled,
//	          degradation                                        not improving
//	┌──────┐  THROTTLE   ┌──────────┐  FREEZE  ┌────────┐  (no correction)  ┌──────┐
//	│ none │ ──────────► │ throttle │ ───────► │ freeze │ ────────────────► │ kill │ ─┐ cooled, not improving:
//	└──────┘             └──────────┘          └────────┘                   └──────┘ ◄┘ KILL the most active
//	   ▲   UNTHROTTLE all     │  ▲    THAW all      │                          │
//	   └──────────────────────┘  └──────────────────┴──────────────────────────┘
//	      healthy for RecoverAfter, cooled (one level per RecoverAfter)
//
// Every step up waits a cool-down since the last change; past FREEZE it
// also waits while the worst signal keeps improving (improving), and the
// first KILL waits FreezeHold. While a level is in force the signals use
// the exit factor (hysteresis): a value between exit and enter thresholds
// neither escalates nor counts as healthy.
var ladder = [...]func(*Interference, *observation) ([]Correction, bool){
	LevelNone:     (*Interference).stepNone,
	LevelThrottle: (*Interference).stepThrottle,
	LevelFreeze:   (*Interference).stepFreeze,
	LevelKill:     (*Interference).stepKill,
}

// observation is what a round saw.
type observation struct {
	now time.Time
	// worst is the most degraded signal (value over threshold), nil when
	// none is; ratio its value over its threshold.
	worst *Trigger
	ratio float64
	// stamp is the time of the observation behind worst, else of the
	// newest observation of any signal: what the persistence window
	// counts.
	stamp time.Time
	// be are the correctable revocable containers, most active first;
	// acts the activity of every revocable container not being killed.
	be   []*monitor.ContainerUsage
	acts map[string]activity
	// cooled: a cool-down has passed since the last change of level.
	cooled bool
}

// observe reads u: it prunes the state of containers gone, compares every
// victim's signals with its baselines (learning them at LevelNone from
// quiet values), and does the bookkeeping common to every level.
func (ic *Interference) observe(u *monitor.Usage) observation {
	o := observation{now: u.Timestamp}
	ic.prune(u)
	o.be, o.acts = ic.correctable(u)

	var newest time.Time // the newest observation of any signal
	suspect := false     // a value in the hysteresis band while revocable work is active
	for i := range u.Containers {
		c := &u.Containers[i]
		if c.Revocable {
			continue
		}
		bs := ic.baselines[c.ID]
		if bs == nil {
			bs = map[string]*baseline{}
			ic.baselines[c.ID] = bs
		}
		for sig, v := range Signals(c) {
			if st := stamp(c, sig); st.After(newest) {
				newest = st
			}
			b := bs[sig]
			if b == nil {
				b = &baseline{}
				bs[sig] = b
			}
			factor := ic.cfg.EnterFactor
			if ic.level > LevelNone {
				factor = ic.cfg.ExitFactor
			}
			thr := max(b.mean*factor, b.mean+ic.cfg.Floors[sig])
			if b.n >= ic.cfg.Warmup && v > thr {
				if r := v / thr; o.worst == nil || r > o.ratio {
					o.worst = &Trigger{Signal: sig, Victim: c.ID, Value: v, Baseline: b.mean, Threshold: thr}
					o.ratio, o.stamp = r, stamp(c, sig)
				}
				continue
			}
			// While revocable work is active, a value in the hysteresis
			// band (above the exit threshold, not yet degraded) may be
			// interference: learning it lets the baseline drift up to the
			// contended level when the degradation is intermittent.
			quiet := len(o.be) == 0 || b.n < ic.cfg.Warmup || v <= max(b.mean*ic.cfg.ExitFactor, b.mean+ic.cfg.Floors[sig])
			if ic.level == LevelNone && quiet {
				b.learn(v, ic.cfg.Alpha, ic.cfg.Warmup)
			}
			suspect = suspect || !quiet
		}
	}
	if o.worst == nil {
		o.stamp = newest
	}
	o.cooled = ic.lastChange.IsZero() || o.now.Sub(ic.lastChange) >= ic.cfg.Cooldown
	if ic.level > LevelNone || len(o.be) == 0 {
		// Nothing revocable is at work (whatever hurts the victims,
		// corrections cannot help: do not arm the response for work that
		// arrives later), or the response is under way.
		ic.forget()
	}
	ic.suspect = suspect && ic.level == LevelNone
	if o.worst != nil {
		ic.healthySince = time.Time{}
	}
	return o
}

// stepNone: no correction in force. A degradation persistent over the
// window (Persist of the last Persist+1 observations) throttles.
func (ic *Interference) stepNone(o *observation) ([]Correction, bool) {
	if len(o.be) == 0 {
		return nil, true
	}
	ic.record(o.worst != nil, o.stamp)
	if o.worst == nil || !ic.persistent() {
		return nil, false // healthy, or not yet persistent: maybe noise
	}
	ic.forget()
	ic.become(LevelThrottle, o.now, *o.worst)
	return nil, false
}

// stepThrottle: revocable work throttled. Still degraded a cool-down
// later: freeze.
func (ic *Interference) stepThrottle(o *observation) ([]Correction, bool) {
	if o.worst == nil {
		return ic.stepDown(o)
	}
	if o.cooled && len(o.be) > 0 {
		ic.become(LevelFreeze, o.now, *o.worst)
		ic.ref, ic.frozeAt = o.ratio, o.now
	}
	return nil, false
}

// stepFreeze: revocable work frozen. Still degraded after FreezeHold and
// a cool-down, and no longer improving: the kill level (its first KILL a
// cool-down later).
func (ic *Interference) stepFreeze(o *observation) ([]Correction, bool) {
	if o.worst == nil {
		return ic.stepDown(o)
	}
	if len(o.be) == 0 || !o.cooled || o.now.Sub(ic.frozeAt) < ic.cfg.FreezeHold || ic.improving(o) {
		return nil, false
	}
	ic.become(LevelKill, o.now, *o.worst)
	ic.ref = o.ratio
	return nil, false
}

// stepKill: killing. Still degraded a cool-down after the last change,
// and no longer improving: KILL the most active correctable container
// (youngest first when activity is unknown), alone.
func (ic *Interference) stepKill(o *observation) ([]Correction, bool) {
	if o.worst == nil {
		return ic.stepDown(o)
	}
	if len(o.be) == 0 || !o.cooled || ic.improving(o) {
		return nil, false
	}
	ic.cause, ic.lastChange, ic.ref = *o.worst, o.now, o.ratio
	c := o.be[0]
	why := "the youngest"
	if a := o.acts[c.ID]; a.known {
		why = fmt.Sprintf("the most active (cpu %.2f, io+memory stall %.2f)", a.cpu, a.stall)
	}
	delete(ic.throttled, c.ID)
	delete(ic.frozen, c.ID)
	delete(ic.frozenAct, c.ID)
	ic.killed[c.ID] = true
	return []Correction{{Type: Kill, ContainerID: c.ID, Trigger: *o.worst,
		Reason: fmt.Sprintf("%s still degraded with revocable work frozen: preempting %s revocable container", o.worst.Victim, why)}}, true
}

// improving reports whether, past FREEZE, the worst signal is still
// improving — its value over its threshold dropped by Improvement since
// the last step or check (a frozen writer's dirty pages flushing) — and
// then restarts the cool-down and takes the value as the new reference.
func (ic *Interference) improving(o *observation) bool {
	if ic.cfg.Improvement <= 0 || o.ratio > (1-ic.cfg.Improvement)*ic.ref {
		return false
	}
	ic.ref, ic.lastChange = o.ratio, o.now
	return true
}

// stepDown: with corrections in force and every victim healthy (below the
// exit threshold), once they have been for RecoverAfter and a cool-down
// has passed, one step down: THAW every frozen container (from FREEZE or
// the kill level, to THROTTLE), or UNTHROTTLE every throttled one (to
// none). A step down ends the round.
func (ic *Interference) stepDown(o *observation) ([]Correction, bool) {
	if ic.healthySince.IsZero() {
		ic.healthySince = o.now
	}
	if o.now.Sub(ic.healthySince) < ic.cfg.RecoverAfter || !o.cooled {
		return nil, false
	}
	rec := Trigger{Signal: SignalRecovered, Victim: ic.cause.Victim, Baseline: ic.cause.Baseline, Threshold: ic.cause.Threshold}
	var out []Correction
	if ic.level >= LevelFreeze {
		for _, id := range sortedKeys(ic.frozen) {
			out = append(out, Correction{Type: Thaw, ContainerID: id, Trigger: rec, Reason: "victims healthy: thawing"})
		}
		clear(ic.frozen)
		clear(ic.frozenAct)
		ic.level = LevelThrottle
	} else {
		for _, id := range sortedKeys(ic.throttled) {
			out = append(out, Correction{Type: Unthrottle, ContainerID: id, Trigger: rec, Reason: "victims healthy: lifting the throttle"})
		}
		clear(ic.throttled)
		ic.level = LevelNone
	}
	ic.lastChange, ic.healthySince = o.now, o.now
	return out, true
}

// become moves the ladder up to level for cause.
func (ic *Interference) become(level int, now time.Time, cause Trigger) {
	ic.level, ic.lastChange, ic.cause = min(level, LevelKill), now, cause
}

// bring brings every correctable revocable container to the current
// level (also those that appeared or woke up since the last step): the
// THROTTLE and FREEZE it lacks. Oldest first, whatever their activity:
// stable output.
func (ic *Interference) bring(o *observation) []Correction {
	var out []Correction
	byAge := slices.Clone(o.be)
	slices.SortStableFunc(byAge, func(x, y *monitor.ContainerUsage) int {
		if c := x.StartedAt.Compare(y.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(y.ID, x.ID)
	})
	for _, c := range byAge {
		if ic.level >= LevelThrottle && !ic.throttled[c.ID] {
			q := max(int64(float64(c.Limits.MilliCPUs)*ic.cfg.ThrottleFraction), ic.cfg.MinQuota)
			out = append(out, Correction{Type: Throttle, ContainerID: c.ID, CPUQuota: q, Trigger: ic.cause,
				Reason: fmt.Sprintf("%s degraded: throttling best-effort work", ic.cause.Victim)})
			ic.throttled[c.ID] = true
		}
		if ic.level >= LevelFreeze && !ic.frozen[c.ID] {
			out = append(out, Correction{Type: Freeze, ContainerID: c.ID, Trigger: ic.cause,
				Reason: fmt.Sprintf("%s still degraded with best-effort work throttled: freezing it", ic.cause.Victim)})
			ic.frozen[c.ID] = true
			ic.frozenAct[c.ID] = o.acts[c.ID]
		}
	}
	return out
}

// record records a new observation at LevelNone (one with a later stamp
// than the last: a report seen by two rounds counts once).
func (ic *Interference) record(degraded bool, stamp time.Time) {
	if !ic.lastStamp.IsZero() && !stamp.After(ic.lastStamp) {
		return
	}
	ic.recent = append(ic.recent, degraded)
	if n := max(ic.cfg.Persist, 1) + 1; len(ic.recent) > n {
		ic.recent = ic.recent[len(ic.recent)-n:]
	}
	ic.lastStamp = stamp
}

// persistent reports whether the degradation seen now is persistent: the
// latest observation and Persist of the last Persist+1 were degraded (a
// single noisy window is not; an intermittent degradation, with one
// healthy window among the degraded ones, is).
func (ic *Interference) persistent() bool {
	if len(ic.recent) == 0 || !ic.recent[len(ic.recent)-1] {
		return false
	}
	n := 0
	for _, d := range ic.recent {
		if d {
			n++
		}
	}
	return n >= max(ic.cfg.Persist, 1)
}

// forget drops the observations toward the first correction.
func (ic *Interference) forget() { ic.recent, ic.lastStamp = ic.recent[:0], time.Time{} }
