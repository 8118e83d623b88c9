package experiment

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The files of one run (a trial of one controller), in its directory
// OUT/runs/<trial>-<controller>/. The runner writes them as the run goes;
// Analyze and the plots read only these, so `brim experiment report DIR`
// redoes the tables and plots of a finished experiment.
const (
	metaFile        = "meta.json"
	latencyFile     = "latency.csv"     // the LC's windows, as it wrote them
	nodeFile        = "node.csv"        // unix_ms,busy: node cpu busy fraction since the previous line
	correctionsFile = "corrections.csv" // every correction the agent applied, once
	antagonistsFile = "antagonists.csv" // per antagonist: cpu done in the contended phase, final state
	runsDir         = "runs"
)

// Meta is a run's identity and its phase boundaries (unix ms).
type Meta struct {
	Trial      int    `json:"trial"`
	Controller string `json:"controller"`
	QoS        string `json:"qos"`
	// Phases: [SoloStart, Onset) solo, [Onset, ContendedEnd) contended,
	// [AfterStart, AfterEnd) after (zero when skipped).
	SoloStart    int64     `json:"solo_start_ms"`
	Onset        int64     `json:"onset_ms"`
	ContendedEnd int64     `json:"contended_end_ms"`
	AfterStart   int64     `json:"after_start_ms,omitempty"`
	AfterEnd     int64     `json:"after_end_ms,omitempty"`
	SLO          float64   `json:"slo"`
	LC           string    `json:"lc_id"`
	AgentCommand []string  `json:"agent_command"`
	CgroupParent string    `json:"cgroup_parent"`
	Started      time.Time `json:"started"`
}

// Window is one line of the LC's latency file.
type Window struct {
	End            int64   // unix ms
	P50, P99, P999 float64 // microseconds; P50/P999 0 when absent
}

// Sample is one node-utilization sample.
type Sample struct {
	At   int64   // unix ms
	Busy float64 // fraction of all cpus busy since the previous sample
}

// Correction is one applied QoS correction.
type Correction struct {
	At        int64 // unix ms
	Type      string
	Container string // name
	Trigger   string
	Value     float64
	Reason    string
}

// AntagonistResult is what one antagonist did.
type AntagonistResult struct {
	Name string
	ID   string
	// CPUSeconds used between the onset and the end of the contended
	// phase (revocable work done).
	CPUSeconds float64
	// HeldCPUSeconds were used before the onset, waiting at the gate
	// (starting the shell and making the FIFO: milliseconds).
	HeldCPUSeconds float64
	// State and ExitReason at the end of the contended phase
	// (qos.ReasonPreempted: killed by the QoS controller).
	State      string
	ExitReason string
}

// Run is everything recorded for one run.
type Run struct {
	Dir         string
	Meta        Meta
	Windows     []Window
	Node        []Sample
	Corrections []Correction
	Antagonists []AntagonistResult
}

// ErrIncomplete is wrapped by ReadRun for a run that did not finish (it
// failed or was interrupted): it has no figures.
var ErrIncomplete = errors.New("run incomplete")

// ReadRuns reads every finished run under out/runs, in trial then
// controller order; skipped names the runs that did not finish.
func ReadRuns(out string) (runs []*Run, skipped []string, err error) {
	entries, err := os.ReadDir(filepath.Join(out, runsDir))
	if err != nil {
		return nil, nil, fmt.Errorf("read the runs of %s: %w", out, err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		r, err := ReadRun(filepath.Join(out, runsDir, e.Name()))
		if errors.Is(err, ErrIncomplete) {
			skipped = append(skipped, e.Name())
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return nil, skipped, fmt.Errorf("%s: no finished run recorded", out)
	}
	sort.SliceStable(runs, func(i, j int) bool {
		if runs[i].Meta.Trial != runs[j].Meta.Trial {
			return runs[i].Meta.Trial < runs[j].Meta.Trial
		}
		return runs[i].Meta.SoloStart < runs[j].Meta.SoloStart
	})
	return runs, skipped, nil
}

// ReadRun reads the files of one run directory.
func ReadRun(dir string) (*Run, error) {
	r := &Run{Dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", dir, err)
	}
	if err := json.Unmarshal(b, &r.Meta); err != nil {
		return nil, fmt.Errorf("run %s: %s: %w", dir, metaFile, err)
	}
	if r.Meta.Onset == 0 || r.Meta.ContendedEnd == 0 {
		return nil, fmt.Errorf("run %s: %w (no onset or end recorded)", dir, ErrIncomplete)
	}
	f, err := os.Open(filepath.Join(dir, latencyFile))
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", dir, err)
	}
	r.Windows, err = ParseWindows(f)
	_ = f.Close() // read only
	if err != nil {
		return nil, fmt.Errorf("run %s: %s: %w", dir, latencyFile, err)
	}
	if err := readCSV(filepath.Join(dir, nodeFile), 2, func(f []string) error {
		at, err1 := strconv.ParseInt(f[0], 10, 64)
		busy, err2 := strconv.ParseFloat(f[1], 64)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		r.Node = append(r.Node, Sample{At: at, Busy: busy})
		return nil
	}); err != nil {
		return nil, fmt.Errorf("run %s: %w", dir, err)
	}
	if err := readCSV(filepath.Join(dir, correctionsFile), 6, func(f []string) error {
		at, err1 := strconv.ParseInt(f[0], 10, 64)
		v, err2 := strconv.ParseFloat(f[4], 64)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		r.Corrections = append(r.Corrections, Correction{At: at, Type: f[1], Container: f[2], Trigger: f[3], Value: v, Reason: f[5]})
		return nil
	}); err != nil {
		return nil, fmt.Errorf("run %s: %w", dir, err)
	}
	if err := readCSV(filepath.Join(dir, antagonistsFile), 6, func(f []string) error {
		cpu, err1 := strconv.ParseFloat(f[2], 64)
		held, err2 := strconv.ParseFloat(f[3], 64)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		r.Antagonists = append(r.Antagonists, AntagonistResult{Name: f[0], ID: f[1], CPUSeconds: cpu, HeldCPUSeconds: held, State: f[4], ExitReason: f[5]})
		return nil
	}); err != nil {
		return nil, fmt.Errorf("run %s: %w", dir, err)
	}
	return r, nil
}

// readCSV calls row for every line after the header of path, which must
// have n fields.
func readCSV(path string, n int, row func([]string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close() // read only
	cr := csv.NewReader(f)
	cr.FieldsPerRecord = n
	if _, err := cr.Read(); err != nil {
		return fmt.Errorf("%s: header: %w", filepath.Base(path), err)
	}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
		if err := row(rec); err != nil {
			return fmt.Errorf("%s line %d: %w", filepath.Base(path), line, err)
		}
	}
}

// ParseWindows reads a latency file: a header naming unix_ms and p99_us
// (p50_us and p999_us optional, other columns ignored), then one line per
// window. A last line without its newline (still being written) is
// ignored; any other malformed line is an error naming it.
func ParseWindows(r io.Reader) ([]Window, error) {
	br := bufio.NewReader(r)
	header, err := br.ReadString('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // not even a header yet
		}
		return nil, err
	}
	cols, err := parseHeader(header)
	if err != nil {
		return nil, err
	}
	var out []Window
	for line := 2; ; line++ {
		text, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil // a partial last line is dropped
			}
			return nil, err
		}
		w, err := cols.parse(text)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, w)
	}
}

// windowColumns are the positions of a latency file's columns.
type windowColumns struct {
	at, p50, p99, p999 int // -1: absent
	n                  int // fields a line needs
}

func parseHeader(header string) (windowColumns, error) {
	c := windowColumns{at: -1, p50: -1, p99: -1, p999: -1}
	for i, name := range strings.Split(strings.TrimSpace(header), ",") {
		switch strings.TrimSpace(name) {
		case "unix_ms":
			c.at = i
		case "p50_us":
			c.p50 = i
		case "p99_us":
			c.p99 = i
		case "p999_us":
			c.p999 = i
		default:
			continue
		}
		c.n = i + 1
	}
	if c.at < 0 || c.p99 < 0 {
		return c, fmt.Errorf("header %q: want columns unix_ms and p99_us (p50_us, p999_us optional)", strings.TrimSpace(header))
	}
	return c, nil
}

// parse reads one window line.
func (c windowColumns) parse(line string) (Window, error) {
	f := strings.Split(strings.TrimSpace(line), ",")
	if len(f) < c.n {
		return Window{}, fmt.Errorf("%q: %d fields, want at least %d", strings.TrimSpace(line), len(f), c.n)
	}
	num := func(name string, i int) (float64, error) {
		if i < 0 {
			return 0, nil
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(f[i]), 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return 0, fmt.Errorf("%s %q: want a number of at least 0", name, f[i])
		}
		return v, nil
	}
	at, err1 := num("unix_ms", c.at)
	p50, err2 := num("p50_us", c.p50)
	p99, err3 := num("p99_us", c.p99)
	p999, err4 := num("p999_us", c.p999)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return Window{}, err
	}
	return Window{End: int64(at), P50: p50, P99: p99, P999: p999}, nil
}

// csvFile is a CSV written line by line (flushed each line, so a run cut
// short keeps what it recorded).
type csvFile struct {
	f *os.File
	w *csv.Writer
}

func newCSV(path string, header ...string) (*csvFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	c := &csvFile{f: f, w: csv.NewWriter(f)}
	c.write(header...)
	return c, nil
}

func (c *csvFile) write(fields ...string) {
	_ = c.w.Write(fields) // a write error shows at Flush/close
	c.w.Flush()
}

func (c *csvFile) close() { _ = c.f.Close() }

func writeAntagonists(path string, rs []AntagonistResult) error {
	c, err := newCSV(path, "name", "id", "cpu_seconds", "held_cpu_seconds", "state", "exit_reason")
	if err != nil {
		return err
	}
	defer c.close()
	for _, a := range rs {
		c.write(a.Name, a.ID, strconv.FormatFloat(a.CPUSeconds, 'f', 3, 64), strconv.FormatFloat(a.HeldCPUSeconds, 'f', 3, 64), a.State, a.ExitReason)
	}
	return c.w.Error()
}
