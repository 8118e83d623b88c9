package experiment

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report reads the runs recorded under out, writes windows.csv (every
// window of every run, with its phase and ratio), runs.tsv (one line per
// run), summary.tsv (one per controller), a plot per run
// (runs/*/plot.png) and p99.png (every trial, per controller), and prints
// the summary table to w. Controllers are listed in the spec's order.
func Report(out string, w io.Writer) ([]Summary, error) {
	b, err := os.ReadFile(filepath.Join(out, "spec.json"))
	if err != nil {
		return nil, fmt.Errorf("%s is not an experiment's results: %w", out, err)
	}
	var spec Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("%s/spec.json: %w", out, err)
	}
	runs, skipped, err := ReadRuns(out)
	if err != nil {
		return nil, err
	}
	results := make([]RunResult, len(runs))
	for i, r := range runs {
		results[i] = Analyze(r)
	}
	var controllers []string
	for _, c := range spec.Controllers {
		controllers = append(controllers, c.Name)
	}
	sums := Summarize(results, controllers, spec.SLO)

	if err := writeWindows(filepath.Join(out, "windows.csv"), runs, results); err != nil {
		return nil, err
	}
	if err := writeRuns(filepath.Join(out, "runs.tsv"), results); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(out, "summary.tsv"))
	if err != nil {
		return nil, err
	}
	werr := WriteSummary(f, sums, true)
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return nil, werr
	}
	for i, r := range runs {
		if err := PlotRun(r, results[i], filepath.Join(r.Dir, "plot.png")); err != nil {
			return nil, err
		}
	}
	if err := PlotOverview(runs, results, controllers, spec.SLO, filepath.Join(out, "p99.png")); err != nil {
		return nil, err
	}
	if err := WriteSummary(w, sums, false); err != nil {
		return nil, err
	}
	for _, name := range skipped {
		fmt.Fprintf(w, "run %s did not finish (failed or interrupted): not in the figures\n", name)
	}
	return sums, nil
}

// WriteSummary prints one line per controller: as a table, or
// tab-separated with raw numbers (tsv).
func WriteSummary(w io.Writer, sums []Summary, tsv bool) error {
	header := []string{"controller", "trials", "node_cpu", "p99_ratio_median", "p99_ratio_worst", "solo_spread",
		"breaches", "longest_breach", "first_correction", "corrections", "before_onset", "revocable_cpu_s", "killed", "goal"}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	out := io.Writer(tw)
	if tsv {
		out = w
	}
	line := func(fs []string) {
		fmt.Fprintln(out, strings.Join(fs, "\t"))
	}
	if tsv {
		line(header)
	} else {
		line([]string{"CONTROLLER", "TRIALS", "NODE CPU", "P99/SOLO MED", "WORST", "SOLO SPREAD", "BREACHES", "LONGEST",
			"1ST CORRECTION", "CORRECTIONS", "BEFORE ONSET", "REVOCABLE CPU·s", "KILLED", "GOAL"})
	}
	for _, s := range sums {
		first := "none"
		if s.FirstCorrection >= 0 {
			first = s.FirstCorrection.Round(time.Millisecond).String()
		}
		util := fmt.Sprintf("%.1f%%", 100*s.Utilization)
		if tsv {
			util = strconv.FormatFloat(s.Utilization, 'f', 4, 64)
		}
		line([]string{s.Controller, strconv.Itoa(s.Trials), util, ratio(s.MedianRatio), ratio(s.WorstRatio), ratio(s.SoloSpread),
			strconv.Itoa(s.Breaches), s.LongestBreach.String(), first, strconv.Itoa(s.Corrections), strconv.Itoa(s.BeforeOnset),
			strconv.FormatFloat(s.RevocableCPU, 'f', 1, 64), strconv.Itoa(s.Killed), goal(s)})
	}
	if tsv {
		return nil
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range sums {
		if s.SLOBelowNoise() {
			fmt.Fprintf(w, "%s: a solo window alone reached %.2f× the solo median: the SLO (%.2f×) is below the noise at this window length; worst windows are judged against the solo spread\n",
				s.Controller, s.SoloSpread, s.SLO)
		}
	}
	return nil
}

// goal says whether a controller met the colocation target: node cpu at
// least 80 % and the worst window within the SLO (or the solo spread).
func goal(s Summary) string {
	var miss []string
	if s.Utilization < 0.8 {
		miss = append(miss, "cpu<80%")
	}
	if !s.WithinSLO() {
		miss = append(miss, fmt.Sprintf("tail in %d/%d", s.TailMissed, s.Trials))
	}
	if len(miss) == 0 {
		return "met"
	}
	return "missed: " + strings.Join(miss, ",")
}

func ratio(v float64) string {
	if math.IsNaN(v) || v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func writeWindows(path string, runs []*Run, results []RunResult) error {
	c, err := newCSV(path, "trial", "controller", "phase", "t_since_onset_s", "p50_ms", "p99_ms", "p99_over_solo", "breach", "node_cpu")
	if err != nil {
		return err
	}
	defer c.close()
	for i, r := range runs {
		res := results[i]
		for _, w := range r.Windows {
			ph := r.Meta.Phase(w.End, res.Window)
			if ph == "" || w.P99 <= 0 {
				continue
			}
			ratio, breach := 0.0, false
			if res.SoloP99 > 0 {
				ratio = w.P99 / res.SoloP99
				breach = ph == PhaseContended && ratio > r.Meta.SLO
			}
			c.write(strconv.Itoa(r.Meta.Trial), r.Meta.Controller, ph,
				strconv.FormatFloat(float64(w.End-r.Meta.Onset)/1000, 'f', 3, 64),
				strconv.FormatFloat(w.P50/1000, 'f', 3, 64), strconv.FormatFloat(w.P99/1000, 'f', 3, 64),
				strconv.FormatFloat(ratio, 'f', 3, 64), strconv.FormatBool(breach),
				strconv.FormatFloat(nodeAt(r.Node, w.End, res.Window), 'f', 3, 64))
		}
	}
	return c.w.Error()
}

// nodeAt is the mean node cpu use over the samples inside a window.
func nodeAt(ss []Sample, end int64, w time.Duration) float64 {
	var xs []float64
	for _, s := range ss {
		if s.At > end-w.Milliseconds() && s.At <= end {
			xs = append(xs, s.Busy)
		}
	}
	return mean(xs)
}

func writeRuns(path string, rs []RunResult) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	fmt.Fprintln(f, strings.Join([]string{"trial", "controller", "window_ms", "solo_windows", "solo_p99_us", "solo_spread",
		"contended_windows", "p99_ratio_median", "p99_ratio_worst", "breaches", "longest_breach_s", "after_ratio",
		"node_cpu", "first_correction_s", "corrections", "before_onset", "revocable_cpu_s", "killed"}, "\t"))
	for _, r := range rs {
		first := ""
		if r.FirstCorrection >= 0 {
			first = strconv.FormatFloat(r.FirstCorrection.Seconds(), 'f', 3, 64)
		}
		var types []string
		for t, n := range r.Corrections {
			types = append(types, fmt.Sprintf("%s:%d", t, n))
		}
		fmt.Fprintln(f, strings.Join([]string{strconv.Itoa(r.Trial), r.Controller, strconv.FormatInt(r.Window.Milliseconds(), 10),
			strconv.Itoa(r.SoloWindows), strconv.FormatFloat(r.SoloP99, 'f', 0, 64), ratio(r.SoloSpread),
			strconv.Itoa(r.ContendedWindows), ratio(r.MedianRatio), ratio(r.WorstRatio), strconv.Itoa(r.Breaches),
			strconv.FormatFloat(r.LongestBreach.Seconds(), 'f', 1, 64), ratio(r.AfterRatio),
			strconv.FormatFloat(r.Utilization, 'f', 4, 64), first, strings.Join(slices.Sorted(slices.Values(types)), " "),
			strconv.Itoa(r.BeforeOnset), strconv.FormatFloat(r.RevocableCPUSeconds, 'f', 1, 64), strconv.Itoa(r.Killed)}, "\t"))
	}
	return f.Close()
}
