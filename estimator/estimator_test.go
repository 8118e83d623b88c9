package estimator

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/pluginhost"
	brimtest "github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/monitor"
	"github.com/brimnode/brim/resources"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var t0 = time.Unix(1_700_000_000, 0)

// container returns a ContainerUsage whose history holds one sample per
// second with the given cpu rates (cpus) and working set (MiB).
func container(id string, revocable bool, milliCPUs, memMiB int64, rates []float64, wsMiB float64) monitor.ContainerUsage {
	ring := monitor.NewRing(len(rates) + 1)
	var usage uint64
	push := func(i int) {
		var s monitor.Statistics
		s.Timestamp = t0.Add(time.Duration(i) * time.Second)
		s.HasCPU, s.CPUUsageNanos = true, usage
		s.HasMemory, s.MemWorkingSet = true, uint64(wsMiB*mib)
		ring.Push(s)
	}
	push(0)
	for i, r := range rates {
		usage += uint64(r * 1e9)
		push(i + 1)
	}
	latest, _ := ring.Latest()
	return monitor.ContainerUsage{
		ContainerInfo: monitor.ContainerInfo{ID: id, Revocable: revocable,
			Limits: isolator.Limits{MilliCPUs: milliCPUs, MemoryBytes: memMiB * mib}},
		Latest: latest, History: ring,
	}
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func usageOf(total monitor.Capacity, cs ...monitor.ContainerUsage) monitor.Usage {
	return monitor.Usage{Timestamp: t0.Add(60 * time.Second), Total: total, Containers: cs}
}

func TestUsageEstimator(t *testing.T) {
	node := monitor.Capacity{MilliCPUs: 8000, MemoryBytes: 16384 * mib}
	spiky := append(repeat(0.5, 90), repeat(3, 10)...) // p95 lands in the spikes
	for _, tc := range []struct {
		name       string
		opts       Options
		containers []monitor.ContainerUsage
		cpus, mem  float64
	}{
		{"idle LC: slack = A − P − margin", nil,
			[]monitor.ContainerUsage{container("lc", false, 4000, 4096, repeat(0.5, 60), 1024)},
			// 4 − 0.5 − 0.4 = 3.1 ; mem 4096 − 1024 − 409.6 = 2662.4 → 2662
			3.1, 2662},
		{"busy LC: no slack", nil,
			[]monitor.ContainerUsage{container("lc", false, 4000, 4096, repeat(3.9, 60), 4000)},
			0, 0},
		{"capped at a fraction of the node", Options{"cap": "0.25"},
			[]monitor.ContainerUsage{container("lc", false, 8000, 16384, repeat(0, 60), 0)},
			2, 4096},
		{"revocable allocation is subtracted", nil,
			[]monitor.ContainerUsage{
				container("lc", false, 4000, 4096, repeat(0.5, 60), 1024),
				container("be", true, 1000, 1024, repeat(1, 60), 1024), // its usage does not count
			}, 2.1, 1638},
		{"too few samples: predicted at allocation", nil,
			[]monitor.ContainerUsage{container("new", false, 2000, 1024, repeat(0.1, 3), 10)},
			0, 0},
		{"percentile picks the spikes", Options{"window": "2m", "memory": "false", "recent": "0"},
			[]monitor.ContainerUsage{container("lc", false, 4000, 4096, spiky, 100)},
			// p95 of 90×0.5 + 10×3 = 3 → 4 − 3 − 0.4 = 0.6
			0.6, 0},
		{"window excludes old samples", Options{"window": "20s", "memory": "false"},
			[]monitor.ContainerUsage{container("lc", false, 4000, 4096, append(repeat(3.5, 40), repeat(0.5, 20)...), 100)},
			3.1, 0},
		{"turning busy: the recent mean overrides the window's percentile", Options{"memory": "false"},
			[]monitor.ContainerUsage{container("lc", false, 4000, 4096, append(repeat(0.5, 57), 3.5, 3.5, 3.5), 100)},
			// 4 − 3.5 − 0.4
			0.1, 0},
		{"recent disabled", Options{"memory": "false", "recent": "0"},
			[]monitor.ContainerUsage{container("lc", false, 4000, 4096, append(repeat(0.5, 57), 3.5, 3.5, 3.5), 100)},
			// p95 of 57×0.5 + 3×3.5 interpolates to 0.65 → 4 − 0.65 − 0.4
			2.95, 0},
		{"median", Options{"percentile": "50", "memory": "false", "recent": "0"},
			[]monitor.ContainerUsage{container("lc", false, 4000, 4096, spiky, 100)},
			3.1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewUsage(tc.opts, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			u := usageOf(node, tc.containers...)
			if tc.name == "percentile picks the spikes" || tc.name == "median" {
				u.Timestamp = t0.Add(100 * time.Second)
			}
			est, err := e.Estimate(context.Background(), u)
			if err != nil {
				t.Fatal(err)
			}
			if got := est.Revocable.CPUs().Float64(); math.Abs(got-tc.cpus) > 0.0015 {
				t.Errorf("cpus = %v, want %v\n%s", got, tc.cpus, est.Explanation)
			}
			if got := est.Revocable.Mem().Float64(); math.Abs(got-tc.mem) > 0.5 {
				t.Errorf("mem = %v, want %v\n%s", got, tc.mem, est.Explanation)
			}
			for _, r := range est.Revocable {
				if !r.Revocable {
					t.Errorf("%v not marked revocable", r)
				}
			}
			if len(est.Explanation.Terms) == 0 || !strings.Contains(est.Explanation.String(), "cpus offer") {
				t.Errorf("explanation lacks its terms:\n%s", est.Explanation)
			}
		})
	}
}

func TestUsageOptionsInvalid(t *testing.T) {
	for _, o := range []Options{
		{"percentile": "0"}, {"percentile": "101"}, {"margin": "1"}, {"cap": "-0.1"},
		{"window": "soon"}, {"min-samples": "1"}, {"memory": "perhaps"},
	} {
		if _, err := NewUsage(o, nil); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%v: err = %v, want ErrInvalidOption", o, err)
		}
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for _, tc := range []struct{ p, want float64 }{{100, 5}, {50, 3}, {25, 2}, {90, 4.6}, {1, 1.04}} {
		if got := Percentile(xs, tc.p); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if Percentile(nil, 50) != 0 || xs[0] != 5 {
		t.Error("empty input or input modified")
	}
}

func TestFixed(t *testing.T) {
	e, err := NewFixed(Options{"resources": "cpus:2;mem:1024"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	u := usageOf(monitor.Capacity{},
		container("lc", false, 4000, 4096, nil, 0),
		container("be1", true, 500, 256, nil, 0),
		container("be2", true, 2000, 256, nil, 0))
	est, err := e.Estimate(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	// cpus 2 − 2.5 → dropped (never negative), mem 1024 − 512.
	if want := resources.MustParse("mem{REV}:512"); !est.Revocable.Equal(want) {
		t.Fatalf("fixed = %s, want %s", est.Revocable, want)
	}
	if _, err := NewFixed(Options{}, nil); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("no resources: %v", err)
	}
	if _, err := NewFixed(Options{"resources": "cpus:x"}, nil); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("bad resources: %v", err)
	}
}

func TestForwarder(t *testing.T) {
	f := NewForwarder(ForwarderConfig{})
	est := func(text string) Estimate { return Estimate{Revocable: resources.MustParse(text)} }
	for i, tc := range []struct {
		text    string
		forward bool
	}{
		{"", true},                           // first
		{"", false},                          // same
		{"cpus{REV}:1", true},                // appears
		{"cpus{REV}:1.05", false},            // within floor 0.1
		{"cpus{REV}:1.09", false},            // band is against the last forwarded (1)
		{"cpus{REV}:1.2", true},              // beyond
		{"cpus{REV}:1.2;mem{REV}:10", true},  // mem appears
		{"cpus{REV}:1.2;mem{REV}:60", false}, // within 64 MiB floor
		{"cpus{REV}:4;mem{REV}:60", true},
		{"cpus{REV}:3.7;mem{REV}:60", false}, // within 10 %
		{"cpus{REV}:3.5;mem{REV}:60", true},  // shrink beyond 10 %
		{"mem{REV}:60", true},                // cpus disappear
	} {
		if got := f.Decide(est(tc.text), t0.Add(time.Duration(i)*time.Second)); got != tc.forward {
			t.Fatalf("step %d %q: forward = %v, want %v", i, tc.text, got, tc.forward)
		}
	}
	fwd, at, ok := f.Forwarded()
	if !ok || fwd.Revocable.String() != "mem{REV}:60" || !at.Equal(t0.Add(11*time.Second)) {
		t.Fatalf("forwarded = %s at %v", fwd.Revocable, at)
	}
	if n := testutil.CollectAndCount(f, "brim_estimator_revocable"); n != 4 {
		t.Fatalf("metrics = %d series", n)
	}
}

type blocker string

func (b blocker) Blocking() string { return string(b) }

type failing struct{ err error }

func (f failing) Estimate(context.Context, monitor.Usage) (Estimate, error) { return Estimate{}, f.err }

func TestGuardAndFallback(t *testing.T) {
	fixed, _ := NewFixed(Options{"resources": "cpus:1"}, nil)
	ctx := context.Background()
	est, err := Guard(fixed, blocker("1 correction in force")).Estimate(ctx, monitor.Usage{})
	if err != nil || !est.Revocable.IsEmpty() || !strings.Contains(est.Explanation.Summary, "1 correction") {
		t.Fatalf("guarded = %v %+v", err, est)
	}
	est, err = Guard(fixed, blocker("")).Estimate(ctx, monitor.Usage{})
	if err != nil || est.Revocable.CPUs() != 1000 {
		t.Fatalf("unblocked = %v %+v", err, est)
	}
	est, err = Fallback(failing{errors.New("boom")}, nil).Estimate(ctx, monitor.Usage{})
	if err != nil || !est.Revocable.IsEmpty() || !strings.Contains(est.Explanation.Summary, "boom") {
		t.Fatalf("fallback = %v %+v", err, est)
	}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	RegisterBuiltins(r)
	if got := strings.Join(r.Names(), ","); got != "fixed,idle,noop,usage" {
		t.Fatalf("names = %s", got)
	}
	for _, f := range []func(){
		func() { r.Register("noop", NewNoop) },
		func() { r.Register("", NewNoop) },
		func() { r.Register("plugin:x", NewNoop) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("Register did not panic")
				}
			}()
			f()
		}()
	}
	if _, err := Open(r, "nope", nil, nil); !errors.Is(err, ErrUnknown) {
		t.Fatalf("unknown: %v", err)
	}
	if e, err := Open(r, "usage", Options{"percentile": "99"}, nil); err != nil || e == nil {
		t.Fatalf("open usage: %v", err)
	}
	if _, err := Open(r, "plugin:", nil, nil); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("empty plugin: %v", err)
	}
	if _, err := ParseOptions([]string{"a=1", "b"}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("ParseOptions: %v", err)
	}
}

// buildBinary builds a main package into the test's temp dir.
func buildBinary(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("build %s: %v", pkg, err)
	}
	return bin
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestPluginRoundTrip(t *testing.T) {
	brimtest.SkipUnless(t, !testing.Short(), "builds and runs a plugin (-short)")
	bin := buildBinary(t, "github.com/brimnode/brim/examples/estimator-plugin")
	e, err := Open(NewRegistry(), "plugin:"+bin+" cpus:3;mem:2048", Options{"history": "5"}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e.(*Plugin).Close()
	u := usageOf(monitor.Capacity{MilliCPUs: 8000},
		container("lc", false, 4000, 4096, repeat(0.5, 20), 100),
		container("be", true, 1000, 512, repeat(1, 20), 100))
	est, err := e.Estimate(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	if want := resources.MustParse("cpus{REV}:2;mem{REV}:1536"); !est.Revocable.Equal(want) {
		t.Fatalf("plugin estimate = %s, want %s", est.Revocable, want)
	}
	if !strings.Contains(est.Explanation.Summary, "example plugin") || len(est.Explanation.Terms) != 3 {
		t.Fatalf("explanation = %+v", est.Explanation)
	}
}

func TestPluginMisbehaves(t *testing.T) {
	brimtest.SkipUnless(t, !testing.Short(), "builds and runs a plugin (-short)")
	bin := buildBinary(t, "github.com/brimnode/brim/estimator/testdata/badplugin")
	for _, mode := range []string{"crash", "hang"} {
		t.Run(mode, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "marker")
			p := NewPlugin(bin, PluginConfig{Args: []string{mode, marker}, Timeout: 500 * time.Millisecond,
				MinBackoff: 100 * time.Millisecond}, testLogger(t))
			defer p.Close()
			ctx := context.Background()
			u := usageOf(monitor.Capacity{}, container("lc", false, 1000, 100, repeat(0.1, 3), 1))

			_, err := p.Estimate(ctx, u)
			want := pluginhost.ErrUnavailable
			if mode == "hang" {
				want = pluginhost.ErrTimeout
			}
			if !errors.Is(err, want) {
				t.Fatalf("first call: %v, want %v", err, want)
			}
			// Fallback: the agent offers nothing while the plugin is down.
			est, err := Fallback(p, testLogger(t)).Estimate(ctx, u)
			if err != nil || !est.Revocable.IsEmpty() {
				t.Fatalf("fallback: %v %+v", err, est)
			}
			// After the backoff the plugin is restarted and answers.
			var last error
			for range 50 {
				if _, last = p.Estimate(ctx, u); last == nil {
					break
				}
				if !errors.Is(last, pluginhost.ErrUnavailable) {
					t.Fatalf("while restarting: %v", last)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if last != nil {
				t.Fatalf("plugin never came back: %v", last)
			}
			if p.Restarts() != 1 {
				t.Fatalf("restarts = %d, want 1", p.Restarts())
			}
		})
	}
}

// flaky fails while fail is true.
type flaky struct{ fail *bool }

func (f flaky) Estimate(context.Context, monitor.Usage) (Estimate, error) {
	if *f.fail {
		return Estimate{}, errors.New("plugin gone")
	}
	return Estimate{}, nil
}

// levels counts records by "LEVEL message".
type levels map[string]int

func (l levels) Enabled(context.Context, slog.Level) bool { return true }
func (l levels) Handle(_ context.Context, r slog.Record) error {
	l[r.Level.String()+" "+r.Message]++
	return nil
}
func (l levels) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l levels) WithGroup(string) slog.Handler      { return l }

// TestFallbackLogsPerRun: an estimator failing every round is warned
// about once (then at most once a minute), and its recovery once.
func TestFallbackLogsPerRun(t *testing.T) {
	fail := true
	got := levels{}
	e := Fallback(flaky{&fail}, slog.New(got))
	ctx := context.Background()
	for range 30 {
		if _, err := e.Estimate(ctx, monitor.Usage{}); err != nil {
			t.Fatal(err)
		}
	}
	fail = false
	for range 3 {
		if _, err := e.Estimate(ctx, monitor.Usage{}); err != nil {
			t.Fatal(err)
		}
	}
	want := levels{"WARN estimator failed; offering nothing this round": 1, "INFO estimator recovered": 1}
	if len(got) != len(want) || got["WARN estimator failed; offering nothing this round"] != 1 || got["INFO estimator recovered"] != 1 {
		t.Fatalf("logged %v, want %v", got, want)
	}
}
