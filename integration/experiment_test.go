package integration

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/brimnode/brim/experiment"
	"github.com/brimnode/brim/internal/cgtree"
	"github.com/brimnode/brim/internal/testutil"
)

// experimentSpec: an LC whose every window reports p99 1 ms (so each
// ratio is exactly 1), two spinning antagonists, two controllers, two
// interleaved trials.
const experimentSpec = `
trials = 2
solo = "3s"
contended = "3s"
after = "2s"

[agent]
resources = "cpus:2;mem:2048"
estimator = "fixed"
estimator-opts = ["resources=cpus:2;mem:1024"]
estimator-interval = "1s"

[[controller]]
name = "noop"
qos = "noop"

[[controller]]
name = "interference"
qos = "interference"

[lc]
command = ["/bin/sh", "-c", "echo unix_ms,p50_us,p99_us > /mnt/sandbox/lat.csv; while :; do echo $(date +%s%3N),500,1000 >> /mnt/sandbox/lat.csv; sleep 0.5; done"]
cpus = 0.25
mem = 32
latency-file = "lat.csv"
report = true

[[antagonist]]
name = "spin"
count = 2
cpus = 0.5
mem = 32
command = ["/bin/sh", "-c", "while :; do :; done"]
`

// brim experiment run records every phase of every interleaved trial,
// reports from the records alone, and leaves nothing behind.
func TestExperimentRun(t *testing.T) {
	testutil.RequireRoot(t)
	base := t.TempDir()
	spec := filepath.Join(base, "spec.toml")
	if err := os.WriteFile(spec, []byte(experimentSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	out, work := filepath.Join(base, "out"), filepath.Join(base, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	var parents []string
	t.Cleanup(func() { // a failed run's cgroups, should it leave any
		for _, p := range parents {
			_ = cgtree.Remove(p)
		}
	})
	r := runBrim(t, "experiment", "run", spec, "--out", out, "--work", work, "--brim", brimBinary)
	runs, _ := filepath.Glob(filepath.Join(out, "runs", "*", "meta.json"))
	for _, m := range runs {
		var meta experiment.Meta
		b, _ := os.ReadFile(m)
		if json.Unmarshal(b, &meta) == nil && strings.HasPrefix(meta.CgroupParent, "/brim-exp-") {
			parents = append(parents, meta.CgroupParent)
		}
	}
	if r.code != 0 {
		logs, _ := filepath.Glob(filepath.Join(out, "runs", "*", "agent.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", l, lastLinesOf(string(b), 20))
		}
		t.Fatalf("brim experiment run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if len(runs) != 4 {
		t.Fatalf("%d runs recorded, want 2 trials × 2 controllers", len(runs))
	}
	// Interleaved: trial 1 noop first, trial 2 interference first.
	starts := map[string]int64{}
	for _, m := range runs {
		var meta experiment.Meta
		b, _ := os.ReadFile(m)
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		if !ascending(meta.SoloStart, meta.Onset, meta.ContendedEnd-1, meta.AfterStart, meta.AfterEnd) {
			t.Errorf("%s: phases out of order: %+v", m, meta)
		}
		starts[strconv.Itoa(meta.Trial)+meta.Controller] = meta.SoloStart
		if roots := cgtree.Roots(meta.CgroupParent); len(roots) != 0 {
			t.Errorf("cgroup parent left: %v", roots)
		}
	}
	if !ascending(starts["1noop"], starts["1interference"], starts["2interference"], starts["2noop"]) {
		t.Errorf("runs not interleaved (noop, interference, interference, noop): %v", starts)
	}
	// Every run: ratio exactly 1 (the LC's p99 never changes), the
	// antagonists ran, noop corrected nothing.
	rows := readTSV(t, filepath.Join(out, "runs.tsv"))
	if len(rows) != 5 {
		t.Fatalf("runs.tsv: %d lines, want a header and 4", len(rows))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	var maxCPU float64
	for _, row := range rows[1:] {
		if row[col["p99_ratio_median"]] != "1.00" || row[col["p99_ratio_worst"]] != "1.00" || row[col["breaches"]] != "0" {
			t.Errorf("run %v: want ratios 1.00 and no breach", row)
		}
		if n, _ := strconv.Atoi(row[col["solo_windows"]]); n < 4 {
			t.Errorf("run %v: %d solo windows, want at least 4 of 500 ms in 3 s", row, n)
		}
		if row[col["controller"]] == "noop" && (row[col["corrections"]] != "" || row[col["before_onset"]] != "0") {
			t.Errorf("noop run %v corrected something", row)
		}
		cpu, _ := strconv.ParseFloat(row[col["revocable_cpu_s"]], 64)
		maxCPU = max(maxCPU, cpu)
	}
	if maxCPU < 0.3 {
		t.Errorf("antagonists used at most %.2f cpu-seconds in a 3 s contended phase: were they released?", maxCPU)
	}
	// Held antagonists are asleep at their gate until the onset.
	held, _ := filepath.Glob(filepath.Join(out, "runs", "*", "antagonists.csv"))
	if len(held) != 4 {
		t.Fatalf("%d antagonists.csv files, want 4", len(held))
	}
	for _, f := range held {
		rows := readTSVComma(t, f, ',')
		for _, row := range rows[1:] {
			if held, _ := strconv.ParseFloat(row[3], 64); held > 0.1 {
				t.Errorf("%s: antagonist %s used %.3f cpu-seconds while held: the gate is not asleep", f, row[0], held)
			}
		}
	}
	for _, f := range []string{"p99.png", "summary.tsv", "windows.csv", "runs/01-noop/plot.png", "runs/02-interference/latency.csv", "runs/02-interference/corrections.csv"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("results lack %s", f)
		}
	}
	if !strings.Contains(r.stdout, "noop") || !strings.Contains(r.stdout, "interference") {
		t.Errorf("summary table lacks a controller:\n%s", r.stdout)
	}
	if left, _ := os.ReadDir(work); len(left) != 0 {
		t.Errorf("work dir not empty after the experiment: %v", left)
	}
	// report recomputes the same table from the records.
	if rep := runBrim(t, "experiment", "report", out); rep.code != 0 || rep.stdout != r.stdout {
		t.Errorf("brim experiment report: exit %d, table\n%s\nwant\n%s%s", rep.code, rep.stdout, r.stdout, rep.stderr)
	}
	// The results are never overwritten.
	if again := runBrim(t, "experiment", "run", spec, "--out", out); again.code != 2 || !strings.Contains(again.stderr, "not empty") {
		t.Errorf("run into a full --out: exit %d, %s", again.code, again.stderr)
	}
}

// An LC that dies fails the run with its exit, and the run leaves
// nothing behind: no cgroup parent, no temp state, no figures from it.
func TestExperimentLCExits(t *testing.T) {
	testutil.RequireRoot(t)
	base := t.TempDir()
	spec := filepath.Join(base, "spec.toml")
	dying := strings.Replace(experimentSpec, "while :; do echo $(date +%s%3N),500,1000 >> /mnt/sandbox/lat.csv; sleep 0.5; done",
		"for i in 1 2 3 4; do echo $(date +%s%3N),500,1000 >> /mnt/sandbox/lat.csv; sleep 0.5; done; exit 3", 1)
	dying = strings.Replace(dying, "trials = 2", "trials = 1", 1)
	if dying == experimentSpec {
		t.Fatal("spec edit did not apply")
	}
	if err := os.WriteFile(spec, []byte(dying), 0o644); err != nil {
		t.Fatal(err)
	}
	out, work := filepath.Join(base, "out"), filepath.Join(base, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	r := runBrim(t, "experiment", "run", spec, "--out", out, "--work", work, "--brim", brimBinary)
	var meta experiment.Meta
	b, err := os.ReadFile(filepath.Join(out, "runs", "01-noop", "meta.json"))
	if err != nil || json.Unmarshal(b, &meta) != nil || !strings.HasPrefix(meta.CgroupParent, "/brim-exp-") {
		t.Fatalf("the failed run's meta.json: %v %s", err, b)
	}
	t.Cleanup(func() { _ = cgtree.Remove(meta.CgroupParent) })
	if r.code != 1 || !strings.Contains(r.stderr, "the LC exited with code 3") || !strings.Contains(r.stderr, "solo phase") {
		t.Fatalf("run with a dying LC: exit %d, want 1 naming the LC's exit\n%s%s", r.code, r.stdout, r.stderr)
	}
	if roots := cgtree.Roots(meta.CgroupParent); len(roots) != 0 {
		t.Errorf("cgroup parent left: %v", roots)
	}
	if left, _ := os.ReadDir(work); len(left) != 0 {
		t.Errorf("work dir not empty after the failed run: %v", left)
	}
	if rep := runBrim(t, "experiment", "report", out); rep.code != 1 || !strings.Contains(rep.stderr, "no finished run") {
		t.Errorf("report of an experiment without a finished run: exit %d, %s", rep.code, rep.stderr)
	}
}

// A bad spec is refused before anything starts, naming the key.
func TestExperimentBadSpec(t *testing.T) {
	testutil.RequireRoot(t)
	base := t.TempDir()
	spec := filepath.Join(base, "spec.toml")
	if err := os.WriteFile(spec, []byte(strings.Replace(experimentSpec, "cpus = 0.25", "cpu = 0.25", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(base, "out")
	r := runBrim(t, "experiment", "run", spec, "--out", out)
	if r.code != 2 || !strings.Contains(r.stderr, "unknown key lc.cpu") {
		t.Fatalf("bad spec: exit %d, %s", r.code, r.stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a refused spec made %s", out)
	}
}

func readTSV(t *testing.T, path string) [][]string {
	t.Helper()
	return readTSVComma(t, path, '\t')
}

func readTSVComma(t *testing.T, path string, comma rune) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cr := csv.NewReader(bytes.NewReader(b))
	cr.Comma = comma
	rows, err := cr.ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}

// ascending reports whether xs strictly increase.
func ascending(xs ...int64) bool {
	for i := 1; i < len(xs); i++ {
		if xs[i] <= xs[i-1] {
			return false
		}
	}
	return true
}

func lastLinesOf(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
