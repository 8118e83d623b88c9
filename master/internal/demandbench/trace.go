package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/brimnode/brim/resources"
)

// entry is one demand of the trace.
type entry struct {
	id       string
	submit   time.Time
	strict   bool
	start    time.Time // desired start: the start window's beginning
	window   time.Duration
	length   time.Duration // declared Duration
	actual   time.Duration // how long its tasks really run (≤ length)
	deadline time.Time     // zero: none
	tasks    int
	cpus     int
	gang     bool
	orderBy  string
	res      resources.Resources // per: one task's resources
}

func (e *entry) per() resources.Resources {
	if e.res == nil { // parsed once: plain DRF asks for every offer
		e.res = resources.MustParse(fmt.Sprintf("cpus:%d;mem:%d", e.cpus, memPerCPU*e.cpus))
	}
	return e.res
}

// doc is the demand's document, as a framework submits it.
func (e *entry) doc() []byte {
	strategy := map[bool]string{true: "strict", false: "loose"}[e.strict]
	m := map[string]any{
		"DemandID":  e.id,
		"Resources": e.per().String(),
		"Tasks":     e.tasks,
		"Gang":      e.gang,
		"Start":     map[string]any{"Time": []any{e.start.Format(time.RFC3339), fmt.Sprintf("+%ds", int(e.window.Seconds()))}, "Strategy": strategy},
		"Duration":  map[string]any{"Time": []any{nil, fmt.Sprintf("+%ds", int(e.length.Seconds()))}, "Strategy": strategy},
	}
	if !e.deadline.IsZero() {
		m["Deadline"] = map[string]any{"Time": []any{nil, e.deadline.Format(time.RFC3339)}, "Strategy": strategy}
	}
	if e.orderBy != "" {
		m["OrderBy"] = e.orderBy
		delete(m, "Start")
	}
	b, err := json.Marshal(m)
	must(err)
	return b
}

// trace is the day's demands, in submission order: submitted over the
// first 22 hours; half strict; starts 5 min–2 h after submission, windows
// 5–30 min; declared durations 10–120 min, tasks running 70–100 % of
// it; deadlines (every strict demand, half the loose ones) 1.2–2× the
// duration after the window; 1–16 tasks of 1, 2, 4 or 8 cpus; half gang;
// a tenth of the loose ones after an earlier demand (OrderBy).
func trace(r *rand.Rand, n int) []*entry {
	var out []*entry
	for i := range n {
		e := &entry{id: fmt.Sprintf("d%05d", i)}
		e.submit = t0.Add(time.Duration(r.Int64N(int64(22 * time.Hour)))).Truncate(time.Second)
		e.strict = r.IntN(2) == 0
		e.start = e.submit.Add(5*time.Minute + time.Duration(r.Int64N(int64(2*time.Hour)))).Truncate(time.Second)
		e.window = time.Duration(5+r.IntN(25)) * time.Minute
		e.length = time.Duration(10+r.IntN(110)) * time.Minute
		e.actual = time.Duration(float64(e.length) * (0.7 + 0.3*r.Float64())).Truncate(time.Second)
		if e.strict || r.IntN(2) == 0 {
			e.deadline = e.start.Add(e.window + time.Duration(float64(e.length)*(1.2+0.8*r.Float64()))).Truncate(time.Second)
		}
		e.tasks = 1 + r.IntN(16)
		e.cpus = []int{1, 2, 4, 8}[r.IntN(4)]
		e.gang = r.IntN(2) == 0
		if !e.strict && i > 0 && r.IntN(10) == 0 {
			p := out[r.IntN(len(out))]
			if !p.submit.After(e.submit) {
				e.orderBy = p.id // a workflow step after an earlier demand
			}
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].submit.Before(out[j].submit) })
	return out
}

// background draws the durations of the untimed DRF work: lognormal with
// median bgMedian and shape bgSigma, cut to [10 s, bgMax]. With the
// defaults (median 5 min, σ 1.6) most tasks last minutes, 6 % over an
// hour, 1 % over 3 h: the heavy-tailed shape the analyses of the Google
// 2011 cluster trace describe (Reiss et al., "Heterogeneity and
// dynamicity of clouds at scale", SoCC 2012: most tasks short, a long
// tail of tasks running hours to days). The parameters are this
// benchmark's, not a fit of that trace.
type background struct {
	r      *rand.Rand
	median time.Duration
	sigma  float64
	maxD   time.Duration
}

func (b *background) draw() time.Duration {
	d := time.Duration(float64(b.median) * math.Exp(b.sigma*b.r.NormFloat64()))
	return min(max(d, 10*time.Second), b.maxD).Truncate(time.Second)
}

// mean is the distribution's mean before the cut (the cut moves it by
// well under 1 % with the defaults).
func (b *background) mean() time.Duration {
	return time.Duration(float64(b.median) * math.Exp(b.sigma*b.sigma/2))
}

// quantile is the distribution's q-quantile before the cut.
func (b *background) quantile(q float64) time.Duration {
	z := math.Sqrt2 * math.Erfinv(2*q-1)
	return min(time.Duration(float64(b.median)*math.Exp(b.sigma*z)), b.maxD).Round(time.Second)
}

// shareOver is the fraction of draws over d (before the cut).
func (b *background) shareOver(d time.Duration) float64 {
	z := math.Log(float64(d)/float64(b.median)) / b.sigma
	return 0.5 * math.Erfc(z/math.Sqrt2)
}

// byStart is tr sorted by desired start.
func byStart(tr []*entry) []*entry {
	out := slices.Clone(tr)
	sort.SliceStable(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}
