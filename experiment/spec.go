package experiment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/brimnode/brim/resources"
)

// ErrInvalid is wrapped by every error about a spec that cannot run.
var ErrInvalid = errors.New("invalid experiment spec")

// Spec is one experiment: an LC command, optional load generator,
// antagonists, and the QoS controllers to compare, each run Trials times,
// interleaved. It is read from TOML (ParseSpec); durations are Go
// durations ("30s").
type Spec struct {
	Name string `toml:"name"`
	// Trials is how many times each controller runs. Runs are interleaved:
	// trial 1 runs the controllers in order, trial 2 in reverse, and so
	// on, so a drift of the machine does not favour one of them.
	Trials int `toml:"trials"`
	// Phases: solo (the LC alone, the baseline), contended (the
	// antagonists released at the onset), after (the antagonists removed:
	// how far the machine drifted). After may be zero.
	Solo      Duration `toml:"solo"`
	Contended Duration `toml:"contended"`
	After     Duration `toml:"after"`
	// SLO is the factor over the run's solo median p99 above which a
	// window breaches.
	SLO float64 `toml:"slo"`
	// Sample is the period of the node-utilization and correction
	// sampling (default 1s).
	Sample Duration `toml:"sample"`

	Agent       AgentSpec        `toml:"agent"`
	Controllers []ControllerSpec `toml:"controller"`
	LC          LCSpec           `toml:"lc"`
	Load        *LoadSpec        `toml:"load"`
	Antagonists []AntagonistSpec `toml:"antagonist"`
}

// AgentSpec is how each run's agent starts (a fresh agent per run).
type AgentSpec struct {
	// Resources the agent offers (resources.Parse syntax).
	Resources string `toml:"resources"`
	// Estimator and its options (--estimator, --estimator-opt).
	Estimator         string   `toml:"estimator"`
	EstimatorOpts     []string `toml:"estimator-opts"`
	EstimatorInterval Duration `toml:"estimator-interval"`
	// Args are more agent flags, verbatim (e.g. "--no-bpf").
	Args []string `toml:"args"`
}

// ControllerSpec is one QoS controller compared.
type ControllerSpec struct {
	// Name labels the controller in files and tables (letters, digits,
	// '.', '_', '-').
	Name string `toml:"name"`
	// QoS is the agent's --qos value: noop, load, interference or
	// plugin:PATH.
	QoS  string   `toml:"qos"`
	Opts []string `toml:"opts"`
}

// LCSpec is the latency-critical task: a non-revocable container.
type LCSpec struct {
	Command []string `toml:"command"`
	Cpus    float64  `toml:"cpus"`
	Mem     int64    `toml:"mem"`
	User    string   `toml:"user"`
	// Network gives the LC its own network namespace and address
	// ($BRIM_LC_ADDRESS for the load generator); the agent needs
	// --network in agent.args.
	Network bool `toml:"network"`
	// LatencyFile is the CSV the LC (or the load generator) writes, one
	// line per window: a header naming at least unix_ms (the window's
	// end) and p99_us, optionally p50_us and p999_us. Relative: in the
	// LC's sandbox; absolute: on the host (it may name $BRIM_EXP_DIR).
	LatencyFile string `toml:"latency-file"`
	// Report forwards every window to the agent (report-latency), the
	// app-latency signal of the QoS controllers.
	Report bool `toml:"report"`
}

// LoadSpec is a load generator: a host command (not a container) started
// once the LC runs and stopped (SIGTERM) at the end of the run.
type LoadSpec struct {
	Command []string `toml:"command"`
}

// AntagonistSpec is a kind of best-effort work, on revocable resources.
type AntagonistSpec struct {
	Name    string   `toml:"name"`
	Count   int      `toml:"count"`
	Command []string `toml:"command"`
	Cpus    float64  `toml:"cpus"`
	Mem     int64    `toml:"mem"`
	User    string   `toml:"user"`
}

// Duration is a time.Duration read from a TOML string.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalText writes the Go duration.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$`)

// ParseSpec reads a spec. Unknown keys, missing required ones and bad
// values are errors wrapping ErrInvalid that name the key. Defaults:
// trials 1, after 0, slo 1.1, sample 1s, agent resources "cpus:N;mem:M"
// of nothing (required), lc report false.
func ParseSpec(data []byte) (*Spec, error) {
	s := &Spec{Trials: 1, SLO: 1.1, Sample: Duration{time.Second}}
	md, err := toml.Decode(string(data), s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("%w: unknown key %s", ErrInvalid, strings.Join(keys, ", "))
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return s, nil
}

// LoadSpecFile reads and parses the spec file at path.
func LoadSpecFile(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ParseSpec(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// validate checks the spec part by part; the first problem found is
// the error.
func (s *Spec) validate() error {
	for _, check := range [...]func() error{s.validateRun, s.validateAgent, s.validateControllers, s.validateLC, s.validateAntagonists} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateRun checks the run's name, trials and phases.
func (s *Spec) validateRun() error {
	if s.Name != "" && !nameRE.MatchString(s.Name) {
		return fmt.Errorf("name %q: want letters, digits, '.', '_', '-' (at most 40)", s.Name)
	}
	if s.Trials < 1 || s.Trials > 100 {
		return fmt.Errorf("trials %d: want 1 to 100", s.Trials)
	}
	if s.Solo.Duration < 2*time.Second {
		return fmt.Errorf("solo %v: want at least 2s", s.Solo.Duration)
	}
	if s.Contended.Duration < 2*time.Second {
		return fmt.Errorf("contended %v: want at least 2s", s.Contended.Duration)
	}
	if s.After.Duration < 0 {
		return fmt.Errorf("after %v: negative", s.After.Duration)
	}
	if s.SLO <= 1 {
		return fmt.Errorf("slo %v: want a factor above 1 (1.1 = 10 %% over solo)", s.SLO)
	}
	if s.Sample.Duration < 100*time.Millisecond || s.Sample.Duration > 10*time.Second {
		return fmt.Errorf("sample %v: want 100ms to 10s", s.Sample.Duration)
	}
	return nil
}

// validateAgent checks the agent's resources and estimator interval.
func (s *Spec) validateAgent() error {
	if s.Agent.Resources == "" {
		return errors.New("agent.resources is required (e.g. \"cpus:2;mem:2048\")")
	}
	if _, err := resources.Parse(s.Agent.Resources); err != nil {
		return fmt.Errorf("agent.resources: %v", err)
	}
	if s.Agent.EstimatorInterval.Duration < 0 {
		return fmt.Errorf("agent.estimator-interval %v: negative", s.Agent.EstimatorInterval.Duration)
	}
	return nil
}

// validateControllers checks that the controllers are named, once each,
// and name a QoS controller.
func (s *Spec) validateControllers() error {
	if len(s.Controllers) == 0 {
		return errors.New("no [[controller]]: name at least one (qos = \"noop\" for a baseline)")
	}
	seen := map[string]bool{}
	for i, c := range s.Controllers {
		if !nameRE.MatchString(c.Name) {
			return fmt.Errorf("controller[%d].name %q: want letters, digits, '.', '_', '-' (at most 40)", i, c.Name)
		}
		if seen[c.Name] {
			return fmt.Errorf("controller[%d].name %q: used twice", i, c.Name)
		}
		seen[c.Name] = true
		if c.QoS == "" {
			return fmt.Errorf("controller[%d].qos is required (noop, load, interference or plugin:PATH)", i)
		}
	}
	return nil
}

// validateLC checks the latency-critical task and its load generator.
func (s *Spec) validateLC() error {
	if len(s.LC.Command) == 0 {
		return errors.New("lc.command is required")
	}
	if s.LC.Cpus <= 0 {
		return fmt.Errorf("lc.cpus %v: want more than 0", s.LC.Cpus)
	}
	if s.LC.Mem <= 0 {
		return fmt.Errorf("lc.mem %v: want MiB, more than 0", s.LC.Mem)
	}
	if s.LC.LatencyFile == "" {
		return errors.New("lc.latency-file is required (the CSV of windows: unix_ms,p99_us[,p50_us,p999_us])")
	}
	if s.Load != nil && len(s.Load.Command) == 0 {
		return errors.New("load.command is empty (leave [load] out for no load generator)")
	}
	return nil
}

// validateAntagonists checks the best-effort tasks: named once each
// (never "lc"), 1 to 64 copies, a command and resources.
func (s *Spec) validateAntagonists() error {
	if len(s.Antagonists) == 0 {
		return errors.New("no [[antagonist]]: an experiment needs best-effort work")
	}
	names := map[string]bool{"lc": true}
	for i, a := range s.Antagonists {
		if !nameRE.MatchString(a.Name) {
			return fmt.Errorf("antagonist[%d].name %q: want letters, digits, '.', '_', '-' (at most 40)", i, a.Name)
		}
		if names[a.Name] {
			return fmt.Errorf("antagonist[%d].name %q: used twice (or \"lc\")", i, a.Name)
		}
		names[a.Name] = true
		if a.Count < 1 || a.Count > 64 {
			return fmt.Errorf("antagonist[%d].count %d: want 1 to 64", i, a.Count)
		}
		if len(a.Command) == 0 {
			return fmt.Errorf("antagonist[%d].command is required", i)
		}
		if a.Cpus <= 0 {
			return fmt.Errorf("antagonist[%d].cpus %v: want more than 0", i, a.Cpus)
		}
		if a.Mem <= 0 {
			return fmt.Errorf("antagonist[%d].mem %v: want MiB, more than 0", i, a.Mem)
		}
	}
	return nil
}

// Order returns the controllers' indexes for trial t (0-based): forward
// on even trials, reversed on odd ones (interleaving).
func (s *Spec) Order(t int) []int {
	idx := make([]int, len(s.Controllers))
	for i := range idx {
		idx[i] = i
	}
	if t%2 == 1 {
		slices.Reverse(idx)
	}
	return idx
}

// Expand replaces $NAME and ${NAME} in v by vars first, then by the
// environment; a name set in neither is an error naming it (never an
// empty string in its place). $$ is a literal $ (for shell scripts).
func Expand(v string, vars map[string]string) (string, error) {
	var missing []string
	out := os.Expand(v, func(name string) string {
		if name == "$" {
			return "$"
		}
		if x, ok := vars[name]; ok {
			return x
		}
		if x, ok := os.LookupEnv(name); ok {
			return x
		}
		missing = append(missing, name)
		return ""
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%q: $%s is not set", v, missing[0])
	}
	return out, nil
}

// ExpandAll expands every element (Expand).
func ExpandAll(vs []string, vars map[string]string) ([]string, error) {
	out := make([]string, len(vs))
	for i, v := range vs {
		x, err := Expand(v, vars)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

// latencyPath is where the runner reads the latency file.
func latencyPath(file, sandbox string) string {
	if filepath.IsAbs(file) {
		return file
	}
	return filepath.Join(sandbox, file)
}
