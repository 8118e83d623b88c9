package qos

import (
	"fmt"
	"slices"
	"time"

	"github.com/brimnode/brim/monitor"
)

// SignalSlowStart is the trigger of the corrections of a slow start:
// revocable work admitted under an io limit that doubles while the
// victims stay healthy (InterferenceConfig.SlowStart).
const SignalSlowStart = "slow-start"

// SlowStartSteps is how many times a slow start doubles its io limit
// before lifting it: from io-throttle to 16 × io-throttle.
const SlowStartSteps = 4

// ramp is the slow start of one revocable container: the io limit it
// runs under now, how many times it has doubled, and since when it has
// held with the container at work and every victim healthy.
type ramp struct {
	io      int64     // bytes/s
	n       int       // doublings so far
	since   time.Time // start of the current run of working, healthy rounds
	changed time.Time // the limit's last change
	held    bool      // the ladder corrects the container: the ramp waits
}

// slowStart admits revocable io gradually (Heracles grows the
// best-effort share step by step while the latency-critical work keeps
// its SLO). Revocable work that is new (a container younger than
// SlowStart) or has been idle for SlowStart is parked under the
// io-throttle rate — an idle container loses nothing by it — so that a
// disk writer that starts to work starts small. While it works and
// every victim is healthy the limit doubles every SlowStart /
// SlowStartSteps, and after SlowStartSteps doublings it is lifted. A
// victim above its exit threshold holds every ramp where it is and
// halves (at most once a step) the limit of a ramping container stalled
// on io: multiplicative increase and decrease around what the LC
// tolerates, below the ladder's enter threshold. A correction of the
// ladder on a ramping container holds its ramp too, and the ramp's limit
// is put back once the ladder has lifted its own. A reactive controller
// sees a window only once it is over:
// without a slow start the onset of a disk writer's flood cost the LC
// 4–13× its solo p99 for the 1–2 s before the first correction
// (colocation experiment). Nothing is parked while no latency-critical
// work runs.
//
// Only io: cpu work runs in cpu.idle, and its harm to a cpu-bound LC
// through the caches comes and goes with what it computes (1.0–2.5×
// with the same stress-ng worker, unlimited); parking it under a cpu
// quota as well cut the node's cpu to 37–81 % in the colocation
// experiment, and a freeze of the writer then no longer relieved an LC
// still slowed by the parked cpu work, so the cause test let the writer
// go as "not the cause".
func (ic *Interference) slowStart(u *monitor.Usage, o *observation) []Correction {
	if ic.cfg.SlowStart <= 0 || ic.cfg.IOThrottle <= 0 {
		return nil
	}
	rr := rampRound{
		now: o.now, at: u.Timestamp, step: ic.cfg.SlowStart / SlowStartSteps,
		victims: slices.ContainsFunc(u.Containers, func(c monitor.ContainerUsage) bool { return !c.Revocable }),
		// A victim above its exit threshold — degraded, in the
		// hysteresis band, or degraded but masked as noise by a failed
		// cause test — holds every ramp, and halves the limit of a
		// ramping container stalled on io (once a step): the ladder acts
		// only from the enter threshold (2x), and a writer ramped to
		// 32-64 MiB/s held the LC at 1.5-2.6x for 9 s below it. After a
		// failed cause test the ramp once climbed through a masked 6 ms
		// p99 and let the writer out.
		healthy: o.worst == nil && !o.masked && !ic.suspect,
	}
	var out []Correction
	byAge := youngestRevocable(u)
	slices.Reverse(byAge)
	for _, c := range byAge {
		first := !ic.seen[c.ID]
		ic.seen[c.ID] = true
		a := o.acts[c.ID]
		ic.trackIdle(c.ID, a, o.now)
		if corr, ok := ic.stepRamp(c, first, a, &rr); ok {
			out = append(out, corr)
		}
	}
	return out
}

// rampRound is what every container's slow start sees in one round.
type rampRound struct {
	now, at time.Time     // the observation's time; the usage's timestamp
	step    time.Duration // SlowStart / SlowStartSteps
	victims bool          // latency-critical work runs
	healthy bool          // every victim below its exit threshold
}

// trackIdle keeps since when revocable container id (activity a) has
// been idle and uncorrected.
func (ic *Interference) trackIdle(id string, a activity, now time.Time) {
	if a.known && !a.active && !ic.underCorrection(id) {
		if ic.idleSince[id].IsZero() {
			ic.idleSince[id] = now
		}
		return
	}
	delete(ic.idleSince, id)
}

// stepRamp moves the slow start of revocable container c (first: seen
// for the first time; a: its activity) one round on: at most one
// correction.
func (ic *Interference) stepRamp(c *monitor.ContainerUsage, first bool, a activity, rr *rampRound) (Correction, bool) {
	id := c.ID
	r := ic.ramps[id]
	switch {
	case ic.killed[id]:
		delete(ic.ramps, id)
	case ic.throttled[id] || ic.ioThrottled[id] || ic.frozen[id]:
		// The ladder's corrections are on top: the ramp waits, and
		// puts its limit back once the ladder has lifted its own
		// (the ladder's UNTHROTTLE_IO lifts the ramp's too).
		if r != nil {
			r.held, r.since = true, rr.now
		}
	case r == nil:
		return ic.park(c, first, rr)
	case r.held:
		r.held = false
		return r.limit(id, fmt.Sprintf("the corrections lifted: back to the slow start's %d B/s", r.io)), true
	case !rr.victims:
		delete(ic.ramps, id)
		return r.lift(id, "no latency-critical work left to protect: lifting the slow start's io limit"), true
	default:
		return ic.moveRamp(r, id, a, rr)
	}
	return Correction{}, false
}

// park starts the slow start of c when latency-critical work runs and c
// is new (younger than SlowStart at its first sight) or has been idle
// for SlowStart: its io parked at io-throttle.
func (ic *Interference) park(c *monitor.ContainerUsage, first bool, rr *rampRound) (Correction, bool) {
	id := c.ID
	young := first && rr.at.Sub(c.StartedAt) < ic.cfg.SlowStart
	idle := !ic.idleSince[id].IsZero() && rr.now.Sub(ic.idleSince[id]) >= ic.cfg.SlowStart
	if !rr.victims || (!young && !idle) {
		return Correction{}, false
	}
	r := &ramp{io: ic.cfg.IOThrottle, since: rr.now, changed: rr.now}
	ic.ramps[id] = r
	why := "new revocable work"
	if !young {
		why = fmt.Sprintf("revocable work idle for %s", rr.now.Sub(ic.idleSince[id]).Round(time.Second))
	}
	return r.limit(id, fmt.Sprintf("%s: io parked at %d B/s, doubling every %s it works with the victims healthy (slow start)",
		why, r.io, rr.step)), true
}

// moveRamp halves ramp r of container id (activity a) while victims are
// above their exit threshold and it competes for io (once a step), holds
// it while they are or it does not work, and doubles it after a step of
// working, healthy time — lifting it after SlowStartSteps doublings.
func (ic *Interference) moveRamp(r *ramp, id string, a activity, rr *rampRound) (Correction, bool) {
	switch {
	case !rr.healthy && r.n > 0 && ic.competes(a, ResourceIO, false) && rr.now.Sub(r.changed) >= rr.step:
		r.io, r.n, r.since, r.changed = r.io/2, r.n-1, rr.now, rr.now
		return r.limit(id, fmt.Sprintf("victims above their exit threshold: lowering the slow start's io limit to %d B/s", r.io)), true
	case !rr.healthy || !a.active:
		r.since = rr.now // hold: a step counts working, healthy time only
	case rr.now.Sub(r.since) >= rr.step:
		r.io, r.n, r.since, r.changed = r.io*2, r.n+1, rr.now, rr.now
		if r.n >= SlowStartSteps {
			delete(ic.ramps, id)
			return r.lift(id, "victims healthy through the slow start: lifting its io limit"), true
		}
		return r.limit(id, fmt.Sprintf("victims healthy for %s of work: raising the slow start's io limit to %d B/s", rr.step, r.io)), true
	}
	return Correction{}, false
}

// limit is the correction that puts container id under r's io limit.
func (r *ramp) limit(id, why string) Correction {
	return Correction{Type: ThrottleIO, ContainerID: id, IOBytesPerSec: r.io, Trigger: Trigger{Signal: SignalSlowStart}, Reason: why}
}

// lift is the correction that ends r's io limit on container id.
func (r *ramp) lift(id, why string) Correction {
	return Correction{Type: UnthrottleIO, ContainerID: id, Trigger: Trigger{Signal: SignalSlowStart}, Reason: why}
}

// slowStarted reports whether c is a slow start's: it admits work, it
// does not answer interference.
func slowStarted(c Correction) bool { return c.Trigger.Signal == SignalSlowStart }
