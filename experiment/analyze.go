package experiment

import (
	"math"
	"slices"
	"time"

	"github.com/brimnode/brim/qos"
)

// Phase names, as in windows.csv and the plots.
const (
	PhaseSolo      = "solo"
	PhaseContended = "contended"
	PhaseAfter     = "after"
)

// RunResult is one run's figures. Ratios are over the run's own solo
// median p99 (the same agent, measured just before the onset).
type RunResult struct {
	Trial      int
	Controller string
	// Window is the LC's window length (median spacing of its lines).
	Window time.Duration
	// Solo: windows, median p99 (µs), and spread: the worst solo window
	// over the solo median — the noise a window shows with no antagonist.
	SoloWindows int
	SoloP99     float64
	SoloSpread  float64
	// Contended: windows, the median window's and the worst window's p99
	// over solo.
	ContendedWindows int
	MedianRatio      float64
	WorstRatio       float64
	// Breaches: contended windows above SLO × solo median; the longest
	// run of consecutive ones, as time.
	Breaches      int
	LongestBreach time.Duration
	// AfterRatio: the after phase's median p99 over solo (NaN without it).
	AfterRatio float64
	// Utilization: mean node cpu busy fraction over the contended phase.
	Utilization float64
	// FirstCorrection after the onset (negative: none).
	FirstCorrection time.Duration
	// Corrections after the onset by type, a slow start's apart
	// (SlowStartCorrections); BeforeOnset: corrections while the
	// antagonists were still held (noise, by construction), not counting
	// a slow start's parking of idle work.
	Corrections map[string]int
	BeforeOnset int
	// Revocable work: antagonists' cpu-seconds in the contended phase, and
	// how many were killed (preempted) by the controller.
	RevocableCPUSeconds float64
	Killed              int
}

// SlowStartCorrections is the key in RunResult.Corrections of the
// corrections of an interference controller's slow start (admission of
// work, not a reaction to a degradation).
const SlowStartCorrections = "SLOW_START"

// Summary is one controller over all its trials.
type Summary struct {
	Controller string
	Trials     int
	// Medians over trials of each run's figure, except the worst values
	// (max over trials) and sums (breaches, kills, corrections).
	MedianRatio     float64
	WorstRatio      float64
	SoloSpread      float64 // worst over trials
	Breaches        int
	LongestBreach   time.Duration
	Utilization     float64
	FirstCorrection time.Duration // median over the runs that corrected; negative: none did
	Corrections     int           // reactions: a slow start's admissions are not counted
	BeforeOnset     int
	RevocableCPU    float64 // sum
	Killed          int
	SLO             float64
	// TailMissed counts the trials whose worst window exceeded both the
	// SLO and that trial's own solo spread.
	TailMissed int
}

// WithinSLO reports whether, in every trial, the worst window stayed at
// or under the SLO, or within that trial's solo spread when the SLO is
// below it (the noise). Judged per trial: one trial's noisy solo phase
// does not excuse another trial's onset.
func (s Summary) WithinSLO() bool { return s.TailMissed == 0 }

// SLOBelowNoise reports whether a solo window alone exceeded the SLO: the
// SLO cannot be told from the machine's noise at this window length.
func (s Summary) SLOBelowNoise() bool { return s.SoloSpread > s.SLO }

// Phase returns the phase of a window ending at end (unix ms) with
// length w, or "": solo and after windows lie in their phase entirely; a
// window is contended if any of it is — the one the onset falls in
// shows the onset's damage (a 3x p99 in a window 92 % contended was left
// out while only windows wholly inside the phase counted).
func (m Meta) Phase(end int64, w time.Duration) string {
	start := end - w.Milliseconds()
	in := func(from, to int64) bool { return from > 0 && start >= from && end <= to }
	switch {
	case in(m.SoloStart, m.Onset):
		return PhaseSolo
	case m.Onset > 0 && end > m.Onset && start < m.ContendedEnd:
		return PhaseContended
	case m.AfterEnd > 0 && in(m.AfterStart, m.AfterEnd):
		return PhaseAfter
	}
	return ""
}

// WindowLength is the median spacing of the windows' ends (0 for fewer
// than two).
func WindowLength(ws []Window) time.Duration {
	if len(ws) < 2 {
		return 0
	}
	d := make([]float64, 0, len(ws)-1)
	for i := 1; i < len(ws); i++ {
		d = append(d, float64(ws[i].End-ws[i-1].End))
	}
	return time.Duration(median(d)) * time.Millisecond
}

// Analyze computes a run's figures.
func Analyze(r *Run) RunResult {
	m := r.Meta
	res := RunResult{Trial: m.Trial, Controller: m.Controller, Window: WindowLength(r.Windows),
		Corrections: map[string]int{}, FirstCorrection: -1, AfterRatio: math.NaN()}
	var solo, cont, after []float64
	var contBreach []bool
	for _, w := range r.Windows {
		if w.P99 <= 0 { // a window without requests
			continue
		}
		switch m.Phase(w.End, res.Window) {
		case PhaseSolo:
			solo = append(solo, w.P99)
		case PhaseContended:
			cont = append(cont, w.P99)
		case PhaseAfter:
			after = append(after, w.P99)
		}
	}
	res.SoloWindows, res.ContendedWindows = len(solo), len(cont)
	res.SoloP99 = median(solo)
	if res.SoloP99 > 0 {
		res.SoloSpread = slices.Max(solo) / res.SoloP99
		if len(cont) > 0 {
			res.MedianRatio = median(cont) / res.SoloP99
			res.WorstRatio = slices.Max(cont) / res.SoloP99
		}
		if len(after) > 0 {
			res.AfterRatio = median(after) / res.SoloP99
		}
		for _, p := range cont {
			contBreach = append(contBreach, p > m.SLO*res.SoloP99)
		}
	}
	run := 0
	for _, b := range contBreach {
		if b {
			res.Breaches++
			run++
			res.LongestBreach = max(res.LongestBreach, time.Duration(run)*res.Window)
		} else {
			run = 0
		}
	}
	var busy []float64
	for _, s := range r.Node {
		if s.At > m.Onset && s.At <= m.ContendedEnd {
			busy = append(busy, s.Busy)
		}
	}
	res.Utilization = mean(busy)
	for _, c := range r.Corrections {
		switch {
		case c.Trigger == qos.SignalSlowStart:
			// Admission, not a reaction: counted apart, and neither
			// noise before the onset nor the first correction.
			if c.At >= m.Onset && c.At <= m.ContendedEnd {
				res.Corrections[SlowStartCorrections]++
			}
		case c.At < m.Onset:
			res.BeforeOnset++
		case c.At <= m.ContendedEnd:
			res.Corrections[c.Type]++
			if d := time.Duration(c.At-m.Onset) * time.Millisecond; res.FirstCorrection < 0 || d < res.FirstCorrection {
				res.FirstCorrection = d
			}
		}
	}
	for _, a := range r.Antagonists {
		res.RevocableCPUSeconds += a.CPUSeconds
		if a.ExitReason == qos.ReasonPreempted {
			res.Killed++
		}
	}
	return res
}

// Summarize folds the runs of each controller, in the order given.
func Summarize(results []RunResult, controllers []string, slo float64) []Summary {
	var out []Summary
	for _, c := range controllers {
		s := Summary{Controller: c, SLO: slo, FirstCorrection: -1}
		var med, util, first []float64
		for _, r := range results {
			if r.Controller != c {
				continue
			}
			s.Trials++
			med = append(med, r.MedianRatio)
			util = append(util, r.Utilization)
			s.WorstRatio = max(s.WorstRatio, r.WorstRatio)
			s.SoloSpread = max(s.SoloSpread, r.SoloSpread)
			if r.WorstRatio > math.Max(slo, r.SoloSpread) {
				s.TailMissed++
			}
			s.Breaches += r.Breaches
			s.LongestBreach = max(s.LongestBreach, r.LongestBreach)
			for k, n := range r.Corrections {
				if k != SlowStartCorrections {
					s.Corrections += n // reactions
				}
			}
			s.BeforeOnset += r.BeforeOnset
			s.RevocableCPU += r.RevocableCPUSeconds
			s.Killed += r.Killed
			if r.FirstCorrection >= 0 {
				first = append(first, float64(r.FirstCorrection))
			}
		}
		if s.Trials == 0 {
			continue
		}
		s.MedianRatio = median(med)
		s.Utilization = median(util)
		if len(first) > 0 {
			s.FirstCorrection = time.Duration(median(first))
		}
		out = append(out, s)
	}
	return out
}

// median of xs (0 for none); xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}
