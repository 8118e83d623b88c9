package experiment

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/qos"
)

// synthRun is a run of 1 s windows: solo [0, 10 s) at p99 1 ms (one
// window at 1.2 ms), contended [10 s, 30 s) at 3 ms for its first 6
// windows then 1.05 ms, after [31 s, 36 s) at 1.1 ms.
func synthRun(trial int, controller string) *Run {
	const t0 = 1_700_000_000_000
	m := Meta{Trial: trial, Controller: controller, SLO: 1.1, SoloStart: t0, Onset: t0 + 10_000,
		ContendedEnd: t0 + 30_000, AfterStart: t0 + 31_000, AfterEnd: t0 + 36_000}
	r := &Run{Meta: m}
	for s := int64(1); s <= 36; s++ {
		end := t0 + s*1000
		p99 := 1000.0
		switch {
		case s == 4:
			p99 = 1200
		case s > 10 && s <= 16:
			p99 = 3000
		case s > 16 && s <= 30:
			p99 = 1050
		case s > 31:
			p99 = 1100
		}
		r.Windows = append(r.Windows, Window{End: end, P50: p99 / 2, P99: p99})
		busy := 0.3
		if s > 10 && s <= 30 {
			busy = 0.9
		}
		r.Node = append(r.Node, Sample{At: end, Busy: busy})
	}
	r.Corrections = []Correction{
		{At: t0 + 3_000, Type: "THROTTLE_IO", Container: "be-0", Trigger: qos.SignalSlowStart},  // idle work parked: not noise
		{At: t0 + 5_000, Type: "THROTTLE", Container: "be-0", Trigger: "runqueue-p99"},          // noise, before the onset
		{At: t0 + 10_200, Type: "THROTTLE_IO", Container: "be-0", Trigger: qos.SignalSlowStart}, // admission: not the first correction
		{At: t0 + 10_700, Type: "THROTTLE", Container: "be-0", Trigger: "app-latency"},
		{At: t0 + 12_000, Type: "FREEZE", Container: "be-0", Trigger: "app-latency"},
		{At: t0 + 40_000, Type: "THAW", Container: "be-0", Trigger: "recovered"}, // after the run: not counted
	}
	r.Antagonists = []AntagonistResult{
		{Name: "be-0", CPUSeconds: 4, State: "running"},
		{Name: "be-1", CPUSeconds: 2.5, State: "exited", ExitReason: qos.ReasonPreempted},
	}
	return r
}

func TestAnalyze(t *testing.T) {
	res := Analyze(synthRun(1, "interference"))
	if res.Window != time.Second {
		t.Fatalf("window = %v, want 1s", res.Window)
	}
	if res.SoloWindows != 10 || res.ContendedWindows != 20 {
		// Window 1 is [0, 1 s): solo; window 10 ends at the onset.
		t.Fatalf("windows: solo %d contended %d, want 10 and 20", res.SoloWindows, res.ContendedWindows)
	}
	if res.SoloP99 != 1000 || math.Abs(res.SoloSpread-1.2) > 1e-9 {
		t.Fatalf("solo p99 %v spread %v, want 1000 and 1.2", res.SoloP99, res.SoloSpread)
	}
	if math.Abs(res.MedianRatio-1.05) > 1e-9 || math.Abs(res.WorstRatio-3) > 1e-9 {
		t.Fatalf("ratios: median %v worst %v, want 1.05 and 3", res.MedianRatio, res.WorstRatio)
	}
	if res.Breaches != 6 || res.LongestBreach != 6*time.Second {
		t.Fatalf("breaches %d longest %v, want 6 and 6s", res.Breaches, res.LongestBreach)
	}
	if math.Abs(res.AfterRatio-1.1) > 1e-9 {
		t.Fatalf("after ratio %v, want 1.1", res.AfterRatio)
	}
	if math.Abs(res.Utilization-0.9) > 1e-9 {
		t.Fatalf("utilization %v, want 0.9", res.Utilization)
	}
	if res.FirstCorrection != 700*time.Millisecond || res.BeforeOnset != 1 || res.Corrections["THROTTLE"] != 1 || res.Corrections["FREEZE"] != 1 || res.Corrections["THAW"] != 0 || res.Corrections[SlowStartCorrections] != 1 {
		t.Fatalf("corrections: first %v, before onset %d, by type %v", res.FirstCorrection, res.BeforeOnset, res.Corrections)
	}
	if res.RevocableCPUSeconds != 6.5 || res.Killed != 1 {
		t.Fatalf("revocable %v s, killed %d, want 6.5 and 1", res.RevocableCPUSeconds, res.Killed)
	}
}

func TestSummarize(t *testing.T) {
	a, b := Analyze(synthRun(1, "x")), Analyze(synthRun(2, "x"))
	b.WorstRatio, b.FirstCorrection, b.Utilization = 4, 300*time.Millisecond, 0.7
	quiet := Analyze(&Run{Meta: Meta{Trial: 1, Controller: "noop", SLO: 1.1, SoloStart: 1, Onset: 2, ContendedEnd: 3}})
	sums := Summarize([]RunResult{a, quiet, b}, []string{"noop", "x", "absent"}, 1.1)
	if len(sums) != 2 || sums[0].Controller != "noop" || sums[1].Controller != "x" {
		t.Fatalf("summaries %+v: want noop then x, none for a controller without runs", sums)
	}
	s := sums[1]
	if s.Trials != 2 || s.WorstRatio != 4 || s.Breaches != 12 || s.Killed != 2 || s.Corrections != 4 || s.BeforeOnset != 2 {
		t.Fatalf("summary %+v", s)
	}
	if s.FirstCorrection != 500*time.Millisecond || math.Abs(s.Utilization-0.8) > 1e-9 {
		t.Fatalf("first correction %v (want the median, 500ms), utilization %v (want 0.8)", s.FirstCorrection, s.Utilization)
	}
	if s.WithinSLO() || !s.SLOBelowNoise() {
		t.Fatalf("worst 4× is not within an SLO of 1.1 or a spread of 1.2; a 1.2 spread is above the SLO")
	}
	// The tail is judged per trial: a's worst window (1.5×) is within its
	// own solo spread, b's (4×) is not within b's, however noisy a's
	// solo phase was.
	a.SoloSpread, b.SoloSpread = 5, 1.2
	a.WorstRatio = 1.5
	if s := Summarize([]RunResult{a, b}, []string{"x"}, 1.1)[0]; s.WithinSLO() || s.TailMissed != 1 {
		t.Fatalf("trials with worst 1.5× (spread 5) and 4× (spread 1.2): tail missed in %d, want 1", s.TailMissed)
	}
	b.WorstRatio = 1.1
	if s := Summarize([]RunResult{a, b}, []string{"x"}, 1.1)[0]; !s.WithinSLO() {
		t.Fatalf("every trial within the SLO or its own spread: tail missed in %d", s.TailMissed)
	}
	if sums[0].FirstCorrection >= 0 {
		t.Fatalf("noop: first correction %v, want none", sums[0].FirstCorrection)
	}
}

func TestParseWindows(t *testing.T) {
	ws, err := ParseWindows(strings.NewReader("unix_ms,requests,p50_us,p99_us,p999_us\n1000,10,5,9,12\n2000,0,0,0,0\n3000,1"))
	if err != nil || len(ws) != 2 || ws[0] != (Window{End: 1000, P50: 5, P99: 9, P999: 12}) {
		t.Fatalf("ParseWindows = %+v, %v (a partial last line is dropped)", ws, err)
	}
	ws, err = ParseWindows(strings.NewReader("p99_us,unix_ms\n7,1000\n"))
	if err != nil || len(ws) != 1 || ws[0] != (Window{End: 1000, P99: 7}) {
		t.Fatalf("ParseWindows with columns in another order and no p50 = %+v, %v", ws, err)
	}
	for _, bad := range []string{"time,p99\n1,2\n", "unix_ms,p99_us\n1000,fast\n", "unix_ms,p99_us\n1000\n", "unix_ms,p99_us\n1000,-1\n"} {
		if _, err := ParseWindows(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseWindows(%q) accepted", bad)
		}
	}
}

// Report works from the recorded files alone: tables, windows.csv and
// plots.
func TestReportFromRecordedRuns(t *testing.T) {
	out := t.TempDir()
	spec, err := ParseSpec([]byte(strings.Replace(goodSpec, `name = "interference"`, `name = "x"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(out, "spec.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for trial := 1; trial <= 2; trial++ {
		for _, c := range []string{"noop", "x"} {
			writeRun(t, filepath.Join(out, runsDir, fmt.Sprintf("%02d-%s", trial, c)), synthRun(trial, c))
		}
	}
	var table bytes.Buffer
	sums, err := Report(out, &table)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 2 || sums[0].Trials != 2 || sums[1].Breaches != 12 {
		t.Fatalf("summaries %+v", sums)
	}
	for _, want := range []string{"CONTROLLER", "noop", "90.0%", "3.00", "missed: tail", "below the noise"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	for _, f := range []string{"p99.png", "runs/01-noop/plot.png", "runs/02-x/plot.png"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s: not a PNG (%v)", f, err)
		}
	}
	w, err := os.ReadFile(filepath.Join(out, "windows.csv"))
	if err != nil {
		t.Fatal(err)
	}
	// 4 runs × 35 windows in a phase (the one from 30 s to 31 s is in
	// none).
	if n := strings.Count(string(w), "\n") - 1; n != 4*35 {
		t.Fatalf("windows.csv has %d rows, want %d", n, 4*35)
	}
	if !strings.Contains(string(w), "1,x,contended,1.000,1.500,3.000,3.000,true,0.900") {
		t.Fatalf("windows.csv lacks the first contended window of trial 1:\n%s", w[:min(len(w), 600)])
	}
	// A run that did not finish (meta.json without its phase times) is
	// left out of the figures and named.
	unfinished := filepath.Join(out, runsDir, "03-x")
	if err := os.MkdirAll(unfinished, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(unfinished, metaFile), []byte(`{"trial":3,"controller":"x","cgroup_parent":"/brim-exp-1-3-x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	table.Reset()
	if sums, err := Report(out, &table); err != nil || sums[1].Trials != 2 || !strings.Contains(table.String(), "run 03-x did not finish") {
		t.Fatalf("Report with an unfinished run: %v, %+v\n%s", err, sums, table.String())
	}
	// A missing run file is an error naming it, not a silent zero.
	if err := os.Remove(filepath.Join(out, runsDir, "02-x", nodeFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Report(out, &table); err == nil || !strings.Contains(err.Error(), nodeFile) {
		t.Fatalf("Report without node.csv: %v", err)
	}
}

func writeRun(t *testing.T, dir string, r *Run) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r.Meta)
	var lat, node, corr bytes.Buffer
	lat.WriteString("unix_ms,p50_us,p99_us\n")
	for _, w := range r.Windows {
		fmt.Fprintf(&lat, "%d,%g,%g\n", w.End, w.P50, w.P99)
	}
	node.WriteString("unix_ms,busy\n")
	for _, s := range r.Node {
		fmt.Fprintf(&node, "%d,%g\n", s.At, s.Busy)
	}
	corr.WriteString("unix_ms,type,container,trigger,value,reason\n")
	for _, c := range r.Corrections {
		fmt.Fprintf(&corr, "%d,%s,%s,%s,%g,%s\n", c.At, c.Type, c.Container, c.Trigger, c.Value, c.Reason)
	}
	for name, data := range map[string][]byte{metaFile: b, latencyFile: lat.Bytes(), nodeFile: node.Bytes(), correctionsFile: corr.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeAntagonists(filepath.Join(dir, antagonistsFile), r.Antagonists); err != nil {
		t.Fatal(err)
	}
}

// The window the onset falls in is contended: it holds the onset's
// damage, which a reactive controller cannot prevent. Counting only
// windows wholly inside the phase left out a 3x window 92 % contended.
func TestAnalyzeOnsetWindow(t *testing.T) {
	const t0 = 1_700_000_000_000
	r := &Run{Meta: Meta{Trial: 1, Controller: "x", SLO: 1.1, SoloStart: t0, Onset: t0 + 10_000, ContendedEnd: t0 + 20_000}}
	for s := int64(1); s <= 20; s++ {
		end := t0 + s*1000 + 500 // windows half a second off the phases
		p99 := 1000.0
		if end == t0+10_500 {
			p99 = 5000 // [9.5 s, 10.5 s): the onset at 10 s
		}
		r.Windows = append(r.Windows, Window{End: end, P99: p99})
	}
	res := Analyze(r)
	if res.SoloWindows != 9 || res.ContendedWindows != 11 {
		t.Fatalf("windows: solo %d contended %d, want 9 (wholly solo) and 11 (the onset's and the end's included)", res.SoloWindows, res.ContendedWindows)
	}
	if res.WorstRatio != 5 || res.Breaches != 1 {
		t.Fatalf("worst %v breaches %d: the onset's window (5x) must count", res.WorstRatio, res.Breaches)
	}
}
