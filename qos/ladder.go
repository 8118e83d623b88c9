package qos

import (
	"fmt"
	"maps"
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
	// worst is the most degraded signal (value over threshold) that may
	// trigger, nil when none is; ratio its value over its threshold.
	worst *Trigger
	ratio float64
	// resources are what worst points at: its own resource, or for the
	// application's latency the resources whose signals of the same
	// victim are above their exit thresholds (none: any).
	resources []string
	// stamp is the time of the observation behind worst, else of the
	// newest observation of any signal: what the persistence window
	// counts.
	stamp time.Time
	// be are the correctable revocable containers, most active first;
	// acts the activity of every revocable container not being killed;
	// suspects those of be that compete on resources (worst's cause).
	be       []*monitor.ContainerUsage
	acts     map[string]activity
	suspects []*monitor.ContainerUsage
	blame    string // how suspects were chosen
	fallback bool   // nobody competes: every correctable container is a suspect
	// cooled: a cool-down has passed since the last change of level.
	cooled bool
	// masked: a victim's signal was above its threshold but marked as
	// noise (a failed cause test): no trigger, and not healthy either.
	masked bool
}

// observe reads u: it prunes the state of containers gone, compares every
// victim's busy signals with its baselines (learning them at LevelNone
// from quiet values: scanVictim, scanSignal), attributes the worst
// degradation to suspects, and does the bookkeeping common to every
// level (conclude).
func (ic *Interference) observe(u *monitor.Usage) observation {
	o := observation{now: u.Timestamp}
	ic.prune(u)
	o.be, o.acts = ic.correctable(u)
	var s roundScan
	for i := range u.Containers {
		if c := &u.Containers[i]; !c.Revocable {
			ic.scanVictim(c, &o, &s)
		}
	}
	ic.conclude(&o, &s)
	return o
}

// roundScan is what observe gathers over every victim of a round.
type roundScan struct {
	newest  time.Time // the newest observation of any signal
	suspect bool      // a value in the hysteresis band while revocable work is active
}

// victimScan is what observe gathers over one victim's signals.
type victimScan struct {
	c   *monitor.ContainerUsage
	bs  map[string]*baseline
	app bool // the victim reports its own latency
	// elevated are the resources with a signal above its exit threshold.
	elevated map[string]bool
	// cand is the victim's most degraded triggering signal, ratio its
	// value over its threshold.
	cand  *Trigger
	ratio float64
}

// scanVictim reads the busy signals of victim c (the application's
// latency even when idle: an idle second says nothing about
// interference otherwise) and makes its worst degradation o's when it is
// worse than any seen.
func (ic *Interference) scanVictim(c *monitor.ContainerUsage, o *observation, s *roundScan) {
	v := victimScan{c: c, bs: ic.baselines[c.ID], elevated: map[string]bool{}}
	if v.bs == nil {
		v.bs = map[string]*baseline{}
		ic.baselines[c.ID] = v.bs
	}
	sigs := Signals(c)
	_, v.app = sigs[SignalAppLatency]
	busy := ic.busy(c)
	for _, sig := range slices.Sorted(maps.Keys(sigs)) {
		if sig != SignalAppLatency && !busy {
			continue // an idle second says nothing about interference
		}
		if st := stamp(c, sig); st.After(s.newest) {
			s.newest = st
		}
		ic.scanSignal(&v, sig, sigs[sig], o, s)
	}
	if v.cand != nil && (o.worst == nil || v.ratio > o.ratio) {
		o.worst, o.ratio, o.stamp = v.cand, v.ratio, stamp(c, v.cand.Signal)
		o.resources = nil
		if r := signalResource[v.cand.Signal]; r != "" {
			o.resources = []string{r}
		} else {
			o.resources = slices.Sorted(maps.Keys(v.elevated))
		}
	}
}

// scanSignal compares value x of v's signal sig with its thresholds: a
// degraded value is a candidate trigger (unless it is noise), any other
// may be learned into the baseline (learnQuiet).
func (ic *Interference) scanSignal(v *victimScan, sig string, x float64, o *observation, s *roundScan) {
	b := v.bs[sig]
	if b == nil {
		b = &baseline{}
		v.bs[sig] = b
	}
	enter, exit, trusted := ic.thresholds(sig, b)
	thr := enter
	if ic.level > LevelNone {
		thr = exit
	}
	if r := signalResource[sig]; trusted && x > exit && r != "" {
		v.elevated[r] = true
	}
	// The application's own latency, when it reports one, is the
	// victim's only trigger; the others only attribute.
	trigger := !v.app || sig == SignalAppLatency
	// A signal marked as noise still triggers on a value well above the
	// one the cause test saw: a disk writer thawed as "not the cause" of
	// an fsyncing LC's 6.5 ms (busy vCPUs slowed its disk as much)
	// flooded it at 35-50 ms for the rest of the run, masked as noise.
	mark, noisy := ic.noise[noiseKey(v.c.ID, sig)]
	noisy = noisy && x <= mark.level*ic.cfg.EnterFactor
	if trusted && x > thr {
		o.masked = o.masked || (trigger && noisy)
		if r := x / thr; trigger && !noisy && (v.cand == nil || r > v.ratio) {
			v.cand = &Trigger{Signal: sig, Victim: v.c.ID, Value: x, Baseline: b.value, Threshold: thr}
			v.ratio = r
		}
		return
	}
	ic.learnQuiet(b, sig, x, exit, trusted, noisy, len(o.be) > 0)
	s.suspect = s.suspect || (len(o.be) > 0 && trusted && x > exit && trigger)
}

// learnQuiet learns value x of signal sig into baseline b at LevelNone
// when it is quiet: nothing revocable is at work, the baseline is not
// trusted yet, or x is at most baseline × exit-factor (the exit
// threshold for an absolute SLO or a signal marked as noise).
//
// While revocable work is active, a value in the hysteresis band (above
// the exit threshold, not yet degraded) may be interference: learning it
// would let the baseline drift up to the contended level when the
// degradation is intermittent. So would a value under the signal's floor
// but above baseline × exit-factor: the floor keeps noise from
// triggering, it does not make the value normal (with an 8 ms floor on a
// 1.4 ms p99, contended 5–9 ms windows were learned and the threshold
// crept up with them). Only a signal a cause test found not to be the
// revocable work's doing (noise) learns up to the exit threshold. (An
// absolute SLO has no baseline to drift: its exit threshold stands.)
func (ic *Interference) learnQuiet(b *baseline, sig string, x, exit float64, trusted, noisy, working bool) {
	if ic.level != LevelNone {
		return
	}
	learnMax := exit
	if slo := sig == SignalAppLatency && ic.cfg.SLOP99 > 0; !slo && !noisy {
		learnMax = min(exit, b.value*ic.cfg.ExitFactor)
	}
	if !working || !trusted || x <= learnMax {
		b.learn(x, &ic.cfg, ic.cfg.Floors[sig])
	}
}

// conclude ends a round's observation: the suspects of the worst
// degradation (attribute), whether a cool-down has passed, and the
// bookkeeping of degraded and healthy runs common to every level.
func (ic *Interference) conclude(o *observation, s *roundScan) {
	if o.worst == nil {
		o.stamp = s.newest
	} else {
		o.suspects, o.blame, o.fallback = ic.attribute(o.be, o.acts, o.resources)
	}
	o.cooled = ic.lastChange.IsZero() || o.now.Sub(ic.lastChange) >= ic.cfg.Cooldown
	if ic.level > LevelNone || len(o.be) == 0 {
		// Nothing revocable is at work (whatever hurts the victims,
		// corrections cannot help: do not arm the response for work that
		// arrives later), or the response is under way.
		ic.forget()
	}
	ic.suspect = s.suspect && ic.level == LevelNone
	if o.worst == nil {
		ic.degradedSince = time.Time{}
		return
	}
	ic.healthySince = time.Time{}
	if ic.degradedSince.IsZero() {
		ic.degradedSince = o.now
	}
}

// heldSince is when the current test of the suspects started: the later
// of the last change (a freeze) and the start of the current run of
// degraded observations — a victim healthy in between says nothing
// against them.
func (ic *Interference) heldSince(from time.Time) time.Time {
	if ic.degradedSince.After(from) {
		return ic.degradedSince
	}
	return from
}

func noiseKey(victim, sig string) string { return victim + "/" + sig }

// stepNone: no correction in force. A degradation persistent over the
// window (Persist of the last Persist+1 observations) that some revocable
// work competes for throttles it — or, when the signal is not about cpu
// (io, memory), freezes it at once (a cpu quota does not stop a disk
// writer). A degradation nobody revocable competes for is left alone.
func (ic *Interference) stepNone(o *observation) ([]Correction, bool) {
	if len(o.be) == 0 {
		return nil, true
	}
	degraded := o.worst != nil && len(o.suspects) > 0
	ic.record(degraded, o.stamp)
	if !degraded {
		ic.endEpisode(o)
		return nil, false
	}
	severe := ic.cfg.Severe > 0 && o.ratio >= ic.cfg.Severe
	if !ic.persistent() && !severe {
		return nil, false // not yet persistent: maybe noise
	}
	ic.forget()
	ic.onset = *o.worst
	target := LevelThrottle
	ioOnly := slices.Equal(o.resources, []string{ResourceIO})
	if len(o.resources) > 0 && !slices.Contains(o.resources, ResourceCPU) && (!ioOnly || ic.cfg.IOThrottle == 0) {
		target = LevelFreeze
	}
	ic.ioCause = ioOnly && ic.cfg.IOThrottle > 0
	clear(ic.cleared)
	for _, c := range o.be {
		if !slices.Contains(o.suspects, c) {
			ic.cleared[c.ID] = true
		}
	}
	return ic.escalate(o, target)
}

// endEpisode: at LevelNone and healthy for a whole back-off since the
// last step down, the episode ends: its strikes, confirmation and
// suspects are forgotten.
func (ic *Interference) endEpisode(o *observation) {
	if o.worst != nil {
		return
	}
	if ic.healthySince.IsZero() {
		ic.healthySince = o.now
	}
	if (ic.confirmed || ic.strikes > 0 || ic.readmitted) && o.now.Sub(ic.healthySince) >= ic.backoff() {
		ic.confirmed, ic.readmitted, ic.strikes = false, false, 0
		clear(ic.suspects)
		clear(ic.cleared)
	}
}

// escalate moves the ladder up to target for o's degradation, blaming
// its suspects. A degradation after a re-admission is a strike; a cause
// confirmed earlier that strikes KillAfter times is killed (the most
// active suspect) instead of frozen again.
func (ic *Interference) escalate(o *observation, target int) ([]Correction, bool) {
	if target >= LevelFreeze {
		// Freeze only what competes now (and what is frozen already):
		// a container blamed by an earlier round's fallback, which
		// competes for nothing now, stays merely throttled.
		for id := range ic.suspects {
			if !ic.frozen[id] {
				delete(ic.suspects, id)
			}
		}
	}
	for _, c := range o.suspects {
		ic.suspects[c.ID] = true
	}
	if ic.readmitted {
		ic.strikes++
		ic.readmitted = false
	}
	// Never kill on a fallback attribution (nobody identified as
	// competing): freeze, and let the cause test tell.
	if target >= LevelFreeze && ic.confirmed && ic.cfg.KillAfter > 0 && ic.strikes >= ic.cfg.KillAfter && len(o.suspects) > 0 && !o.fallback {
		return ic.kill(o)
	}
	ic.become(target, o.now, *o.worst)
	ic.ref, ic.blame = o.ratio, o.blame
	return nil, false
}

// stepThrottle: suspects throttled. Still degraded a cool-down later:
// freeze them.
func (ic *Interference) stepThrottle(o *observation) ([]Correction, bool) {
	if o.worst == nil {
		return ic.stepDown(o)
	}
	if o.cooled && len(o.suspects) > 0 {
		return ic.escalate(o, LevelFreeze)
	}
	if len(o.suspects) == 0 && o.cooled && o.now.Sub(ic.heldSince(ic.lastChange)) >= ic.cfg.FreezeHold {
		// Degraded for FreezeHold with nothing revocable competing
		// for it any more (the throttled work went idle): not theirs.
		return ic.notTheCause(o)
	}
	for _, c := range o.suspects {
		ic.suspects[c.ID] = true // newcomers competing for it: brought to the level
	}
	return nil, false
}

// stepFreeze (and stepKill, after a kill): suspects frozen. Still
// degraded with every suspect frozen for FreezeHold, a cool-down after
// the last change and no longer improving: the cause test failed — they
// are not the cause (notTheCause).
func (ic *Interference) stepFreeze(o *observation) ([]Correction, bool) {
	if o.worst == nil {
		return ic.stepDown(o)
	}
	for _, c := range o.suspects {
		ic.suspects[c.ID] = true // bring freezes a newcomer; the hold starts again
	}
	if !o.cooled || o.now.Sub(ic.heldSince(ic.frozeAt)) < ic.cfg.FreezeHold || ic.improving(o) {
		return nil, false
	}
	for id := range ic.suspects {
		if !ic.frozen[id] && !ic.killed[id] && slices.ContainsFunc(o.be, func(c *monitor.ContainerUsage) bool { return c.ID == id }) {
			return nil, false // not every suspect is frozen yet
		}
	}
	if ic.relief || ic.relieved(o) {
		// The freeze cut the degradation, though not below the exit
		// threshold: the suspects were a cause, at least in part. They
		// stay frozen until the victim is healthy; what remains is not
		// theirs, and nothing else competes for it. A later slow
		// window does not undo what the freeze showed.
		ic.confirmed, ic.relief = true, true
		return nil, false
	}
	return ic.notTheCause(o)
}

// relieved reports whether the signal that caused the freeze (ic.cause,
// set when the ladder reached FREEZE) or the episode's first correction
// (ic.onset) has come down below (1 - Relief) of its value then.
func (ic *Interference) relieved(o *observation) bool {
	if ic.cfg.Relief <= 0 {
		return false
	}
	// Against the freeze's own cause and the degradation that started
	// the episode: an io throttle that cut a p99 from 60 ms to 7 ms
	// before the freeze showed the suspect's part already, though the
	// freeze then did not halve the 7 ms (the colocation experiment
	// thawed a disk writer as "not the cause" that way).
	for _, c := range []Trigger{ic.cause, ic.onset} {
		if o.worst.Signal == c.Signal && o.worst.Victim == c.Victim && o.worst.Value < c.Value*(1-ic.cfg.Relief) {
			return true
		}
	}
	return false
}

// stepKill: LevelKill is no longer entered (a KILL returns to the
// throttle level); kept so that the level numbers stay stable.
func (ic *Interference) stepKill(o *observation) ([]Correction, bool) { return ic.stepFreeze(o) }

// kill kills the most active suspect of o (a cause confirmed by earlier
// freezes), alone. The other suspects stay throttled (the throttle level)
// and the evidence starts over: if the victim stays degraded they are
// frozen and tested again, never killed on the old evidence.
func (ic *Interference) kill(o *observation) ([]Correction, bool) {
	c := o.suspects[0]
	why := "the youngest"
	if a := o.acts[c.ID]; a.known {
		why = fmt.Sprintf("the most active (cpu %.2f, io stall %.2f, memory stall %.2f)", a.cpu, a.io, a.mem)
	}
	reason := fmt.Sprintf("%s degraded again after %d re-admissions of work whose freeze ended it: preempting %s suspect", o.worst.Victim, ic.strikes, why)
	ic.become(LevelThrottle, o.now, *o.worst)
	ic.confirmed, ic.readmitted, ic.strikes = false, false, 0
	delete(ic.throttled, c.ID)
	delete(ic.ioThrottled, c.ID)
	delete(ic.frozen, c.ID)
	delete(ic.frozenAct, c.ID)
	delete(ic.suspects, c.ID)
	ic.killed[c.ID] = true
	return []Correction{{Type: Kill, ContainerID: c.ID, Trigger: *o.worst, Reason: reason}}, true
}

// notTheCause ends a failed cause test: THAW and UNTHROTTLE every
// corrected container, mark the worst signal of its victim as noise for
// NoiseHold (it triggers nothing meanwhile), and start over at LevelNone.
func (ic *Interference) notTheCause(o *observation) ([]Correction, bool) {
	w := *o.worst
	t := Trigger{Signal: SignalNotCause, Victim: w.Victim, Value: w.Value, Baseline: w.Baseline, Threshold: w.Threshold}
	held := "with every suspect frozen for " + o.now.Sub(ic.heldSince(ic.frozeAt)).String()
	if ic.level == LevelThrottle {
		held = "with no suspect competing for " + o.now.Sub(ic.heldSince(ic.lastChange)).String()
	}
	why := fmt.Sprintf("%s still degraded (%s) %s: not their doing; %s of %s counts as noise for %s",
		w.Victim, w.Signal, held, w.Signal, w.Victim, ic.cfg.NoiseHold)
	var out []Correction
	for _, id := range sortedKeys(ic.frozen) {
		out = append(out, Correction{Type: Thaw, ContainerID: id, Trigger: t, Reason: why + ": thawing"})
	}
	for _, id := range sortedKeys(ic.throttled) {
		out = append(out, Correction{Type: Unthrottle, ContainerID: id, Trigger: t, Reason: why + ": lifting the throttle"})
	}
	for _, id := range sortedKeys(ic.ioThrottled) {
		out = append(out, Correction{Type: UnthrottleIO, ContainerID: id, Trigger: t, Reason: why + ": lifting the io throttle"})
	}
	if ic.cfg.NoiseHold > 0 {
		ic.noise[noiseKey(w.Victim, w.Signal)] = noiseMark{until: o.now.Add(ic.cfg.NoiseHold), level: w.Value}
	}
	clear(ic.frozen)
	clear(ic.frozenAct)
	clear(ic.throttled)
	clear(ic.ioThrottled)
	clear(ic.suspects)
	clear(ic.cleared)
	ic.level, ic.lastChange, ic.healthySince, ic.degradedSince = LevelNone, o.now, time.Time{}, time.Time{}
	ic.confirmed, ic.readmitted, ic.strikes, ic.relief, ic.onset = false, false, 0, false, Trigger{}
	return out, true
}

// backoff is the healthy time before the next re-admission:
// RecoverAfter doubled per strike, at most MaxReadmit.
func (ic *Interference) backoff() time.Duration {
	d := ic.cfg.RecoverAfter
	for range ic.strikes {
		if d >= ic.cfg.MaxReadmit/2 {
			return ic.cfg.MaxReadmit
		}
		d *= 2
	}
	return min(d, ic.cfg.MaxReadmit)
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
	if o.now.Sub(ic.healthySince) < ic.backoff() || !o.cooled {
		return nil, false
	}
	// The corrections ended the degradation: the suspects were the cause.
	ic.confirmed, ic.readmitted = true, true
	rec := Trigger{Signal: SignalRecovered, Victim: ic.cause.Victim, Baseline: ic.cause.Baseline, Threshold: ic.cause.Threshold}
	var out []Correction
	if ic.level >= LevelFreeze {
		for _, id := range sortedKeys(ic.frozen) {
			out = append(out, Correction{Type: Thaw, ContainerID: id, Trigger: rec,
				Reason: fmt.Sprintf("victims healthy for %s: re-admitting (thawing)", ic.backoff())})
			if a, ok := ic.frozenAct[id]; ok {
				ic.readmittedAct[id] = readmission{act: a, at: o.now}
			}
		}
		clear(ic.frozen)
		clear(ic.frozenAct)
		ic.level = LevelThrottle
	} else {
		for _, id := range sortedKeys(ic.throttled) {
			out = append(out, Correction{Type: Unthrottle, ContainerID: id, Trigger: rec,
				Reason: fmt.Sprintf("victims healthy for %s: re-admitting (lifting the throttle)", ic.backoff())})
		}
		for _, id := range sortedKeys(ic.ioThrottled) {
			out = append(out, Correction{Type: UnthrottleIO, ContainerID: id, Trigger: rec,
				Reason: fmt.Sprintf("victims healthy for %s: re-admitting (lifting the io throttle)", ic.backoff())})
		}
		clear(ic.throttled)
		clear(ic.ioThrottled)
		ic.level = LevelNone
	}
	// The next step up is judged on its own degradation: the relief
	// seen against this episode's onset said nothing about it.
	ic.lastChange, ic.healthySince, ic.relief, ic.onset = o.now, o.now, false, Trigger{}
	return out, true
}

// become moves the ladder up to level for cause.
func (ic *Interference) become(level int, now time.Time, cause Trigger) {
	ic.level, ic.lastChange, ic.cause = min(level, LevelKill), now, cause
	ic.relief = false
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
		if !ic.suspects[c.ID] {
			continue // not competing for what the victim lacks: left running
		}
		if ic.level >= LevelThrottle && ic.ioLimitable(o.acts[c.ID]) && !ic.ioThrottled[c.ID] {
			out = append(out, Correction{Type: ThrottleIO, ContainerID: c.ID, IOBytesPerSec: ic.cfg.IOThrottle, Trigger: ic.cause,
				Reason: fmt.Sprintf("%s degraded (%s): limiting the suspects' io (%s)", ic.cause.Victim, ic.cause.Signal, ic.blame)})
			ic.ioThrottled[c.ID] = true
		}
		if ic.level >= LevelThrottle && !ic.ioCause && !ic.throttled[c.ID] {
			out = append(out, Correction{Type: Throttle, ContainerID: c.ID, CPUQuota: ic.throttleQuota(c), Trigger: ic.cause,
				Reason: fmt.Sprintf("%s degraded (%s): throttling the suspects (%s)", ic.cause.Victim, ic.cause.Signal, ic.blame)})
			ic.throttled[c.ID] = true
		}
		if ic.level >= LevelFreeze && !ic.frozen[c.ID] {
			out = append(out, Correction{Type: Freeze, ContainerID: c.ID, Trigger: ic.cause,
				Reason: fmt.Sprintf("%s still degraded (%s): freezing the suspects (%s)", ic.cause.Victim, ic.cause.Signal, ic.blame)})
			ic.frozen[c.ID] = true
			ic.frozenAct[c.ID] = o.acts[c.ID]
			ic.frozeAt = o.now
		}
	}
	return out
}

// throttleQuota is the ladder's cpu quota for c: ThrottleFraction of its
// allocation, at least MinQuota.
func (ic *Interference) throttleQuota(c *monitor.ContainerUsage) int64 {
	return max(int64(float64(c.Limits.MilliCPUs)*ic.cfg.ThrottleFraction), ic.cfg.MinQuota)
}

// ioLimitable reports whether the throttle level limits a suspect's io
// (with io-throttle set): the suspects of an io-only degradation, and any
// suspect competing for io (a: stalled on it, or of unknown activity) — a
// disk writer blamed through a cpu or latency signal, whose flood the cpu
// quota does not slow. The limit
// stays through the thaw (the throttle level), so a re-admitted writer
// comes back at the limit, not as a flood.
func (ic *Interference) ioLimitable(a activity) bool {
	if ic.cfg.IOThrottle <= 0 {
		return false
	}
	return ic.ioCause || ic.competes(a, ResourceIO, false)
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
