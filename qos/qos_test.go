package qos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var t0 = time.Unix(1_700_000_000, 0)

// node builds a usage snapshot at t0+sec: one latency-critical container
// "lc" reporting p99 latency lat (application latency) and the given
// revocable containers, started at t0 + their index seconds (later =
// younger).
func node(sec int, lat time.Duration, revocable ...string) monitor.Usage {
	now := t0.Add(time.Duration(sec) * time.Second)
	lc := monitor.ContainerUsage{ContainerInfo: monitor.ContainerInfo{ID: "lc", Limits: isolator.Limits{MilliCPUs: 1000}}}
	lc.Latest.Timestamp = now
	lc.Latest.AppLatency = &monitor.LatencySummary{P99: lat, Source: "app"}
	lc.History = monitor.NewRing(2)
	lc.History.Push(lc.Latest)
	u := monitor.Usage{Timestamp: now, Host: monitor.HostStatistics{NumCPU: 2}, Containers: []monitor.ContainerUsage{lc}}
	for i, id := range revocable {
		u.Containers = append(u.Containers, monitor.ContainerUsage{ContainerInfo: monitor.ContainerInfo{
			ID: id, Revocable: true, StartedAt: t0.Add(time.Duration(i) * time.Second),
			Limits: isolator.Limits{MilliCPUs: 1000, Class: isolator.BestEffort}}})
	}
	return u
}

func render(cs []Correction) string {
	var parts []string
	for _, c := range cs {
		s := c.Type.String() + " " + c.ContainerID
		if c.Type == Throttle {
			s += fmt.Sprintf("@%d", c.CPUQuota)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func TestInterferenceGradedResponse(t *testing.T) {
	// persist=1 and freeze-hold=cooldown: the plain graded response (the
	// newer rules have their own tests).
	ic, err := NewInterference(Options{"warmup": "3", "cooldown": "3s", "recover-after": "5s", "persist": "1", "freeze-hold": "3s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := ic.(*Interference)
	ms := time.Millisecond
	be := []string{"be-old", "be-young"}
	steps := []struct {
		sec   int
		lat   time.Duration
		be    []string
		want  string
		level int
	}{
		{0, 1 * ms, be, "", LevelNone},
		{1, 1 * ms, be, "", LevelNone},
		{2, 1 * ms, be, "", LevelNone},
		{3, 1800 * time.Microsecond, be, "", LevelNone}, // below 2 × baseline: noise
		{4, 5 * ms, be, "THROTTLE be-old@200, THROTTLE be-young@200", LevelThrottle},
		{5, 5 * ms, be, "", LevelThrottle}, // cool-down
		{7, 5 * ms, be, "FREEZE be-old, FREEZE be-young", LevelFreeze},
		{8, 1700 * time.Microsecond, be, "", LevelFreeze}, // above exit (baseline + floor), below enter: hysteresis holds
		{10, 1 * ms, be, "", LevelFreeze},                 // healthy since 10
		{14, 1 * ms, be, "", LevelFreeze},                 // 4 s < recover-after
		{15, 1 * ms, be, "THAW be-old, THAW be-young", LevelThrottle},
		{16, 1 * ms, append(be, "be-new"), "", LevelThrottle}, // a newcomer while healthy: not blamed
		{20, 1 * ms, append(be, "be-new"), "UNTHROTTLE be-old, UNTHROTTLE be-young", LevelNone},
		{21, 9 * ms, be, "THROTTLE be-old@200, THROTTLE be-young@200", LevelThrottle}, // strike 1
		{24, 9 * ms, be, "FREEZE be-old, FREEZE be-young", LevelFreeze},
		// Degraded with both frozen for freeze-hold: not the cause.
		{27, 9 * ms, be, "THAW be-old, THAW be-young, UNTHROTTLE be-old, UNTHROTTLE be-young", LevelNone},
		{28, 9 * ms, be, "", LevelNone}, // app-latency of lc is noise for a minute
	}
	for _, s := range steps {
		cs, err := c.Corrections(context.Background(), node(s.sec, s.lat, s.be...))
		if err != nil {
			t.Fatal(err)
		}
		if got := render(cs); got != s.want || c.Level() != s.level {
			t.Fatalf("t=%ds lat=%s: corrections %q level %d, want %q level %d", s.sec, s.lat, got, c.Level(), s.want, s.level)
		}
		for _, x := range cs {
			if x.Type == Thaw || x.Type == Unthrottle {
				if want := map[bool]string{true: SignalNotCause, false: SignalRecovered}[s.sec == 27]; x.Trigger.Signal != want || x.Trigger.Victim != "lc" {
					t.Fatalf("t=%ds: de-escalation trigger %+v", s.sec, x.Trigger)
				}
				continue
			}
			tr := x.Trigger
			if tr.Signal != SignalAppLatency || tr.Victim != "lc" || tr.Value <= tr.Threshold || tr.Baseline < 0.00099 || tr.Baseline > 0.0011 {
				t.Fatalf("t=%ds: %s trigger %+v", s.sec, x.Type, tr)
			}
		}
	}
}

func TestInterferenceWarmupAndBaseline(t *testing.T) {
	c, err := NewInterferenceWith(InterferenceConfig{EnterFactor: 2, ExitFactor: 1.5, Warmup: 3, BaselineWindow: 60, Stable: 1.5, SLOExit: 0.8,
		Cooldown: time.Second, RecoverAfter: time.Second, MaxReadmit: time.Minute, ThrottleFraction: 0.5, MinQuota: 10,
		Floors: map[string]float64{SignalAppLatency: 0}})
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	// During warm-up even a high value only teaches the baseline: the
	// median of the warm-up, 2 ms (a noisy first sample does not set it).
	for i, l := range []time.Duration{10 * ms, 2 * ms, 2 * ms} {
		if cs, _ := c.Corrections(context.Background(), node(i, l, "be")); len(cs) != 0 {
			t.Fatalf("warm-up step %d corrected: %v", i, cs)
		}
	}
	// 3.5 ms is not degraded (< 4 ms) but in the hysteresis band (> 3 ms)
	// while revocable work is active: maybe interference, not learned.
	if cs, _ := c.Corrections(context.Background(), node(3, 3500*time.Microsecond, "be")); len(cs) != 0 {
		t.Fatalf("3.5ms corrected: %v", cs)
	}
	// 2.5 ms is below the exit threshold: learned (the median of 10, 2,
	// 2, 2.5: 2.25 ms); with no revocable work every non-degraded value
	// is learned: 3.5 ms → the median of five, 2.5 ms.
	for i, u := range []monitor.Usage{node(4, 2500*time.Microsecond, "be"), node(5, 3500*time.Microsecond)} {
		if cs, _ := c.Corrections(context.Background(), u); len(cs) != 0 {
			t.Fatalf("step %d corrected: %v", i, cs)
		}
	}
	// baseline 2.5 ms → threshold 5 ms.
	cs, _ := c.Corrections(context.Background(), node(6, 6*ms, "be"))
	if render(cs) != "THROTTLE be@500" || cs[0].Trigger.Threshold < 0.004999 || cs[0].Trigger.Threshold > 0.005001 {
		t.Fatalf("corrections %v trigger %+v", render(cs), cs)
	}
}

// TestInterferenceBaselineDoesNotDrift: an intermittent degradation (one
// window in three beyond the threshold, the others just under it) while
// revocable work runs does not teach the baseline the contended level.
func TestInterferenceBaselineDoesNotDrift(t *testing.T) {
	c, err := NewInterference(Options{"warmup": "5", "persist": "2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	sec := 0
	for range 10 {
		if cs, _ := c.Corrections(context.Background(), node(sec, 3*ms, "be")); len(cs) != 0 {
			t.Fatalf("solo corrected: %v", cs)
		}
		sec++
	}
	// 5.9 ms: under the 6 ms threshold; 9 ms: beyond it. Never two of
	// three, so no correction is due — but the baseline must stay at 3 ms.
	for i := range 100 {
		lat := 5900 * time.Microsecond
		if i%3 == 2 {
			lat = 9 * ms
		}
		if cs, _ := c.Corrections(context.Background(), node(sec, lat, "be")); len(cs) != 0 {
			t.Fatalf("intermittent step %d corrected: %v", i, cs)
		}
		sec++
	}
	if b := c.(*Interference).baselines["lc"][SignalAppLatency].value; b < 0.0029 || b > 0.0031 {
		t.Fatalf("baseline drifted to %v s", b)
	}
}

func TestSignals(t *testing.T) {
	r := monitor.NewRing(4)
	var a, b monitor.Statistics
	a.Timestamp, b.Timestamp = t0, t0.Add(time.Second)
	a.HasCPU, b.HasCPU = true, true
	a.CPUPeriods, b.CPUPeriods = 100, 110
	a.CPUThrottled, b.CPUThrottled = 10, 14
	a.HasPressure, b.HasPressure = true, true
	b.CPUPressure.SomeTotal = 250 * time.Millisecond
	b.MemPressure.SomeTotal = 100 * time.Millisecond
	b.IOPressure.SomeTotal = 50 * time.Millisecond
	b.RunQueue = &monitor.LatencySummary{P99: 3 * time.Millisecond, Source: "ebpf"}
	r.Push(a)
	r.Push(b)
	c := monitor.ContainerUsage{Latest: b, History: r}
	got := Signals(&c)
	want := map[string]float64{SignalCPUThrottling: 0.4, SignalPSICPU: 0.25, SignalPSIMemory: 0.1, SignalPSIIO: 0.05, SignalRunQueueP99: 0.003}
	for k, v := range want {
		if g, ok := got[k]; !ok || g < v-1e-9 || g > v+1e-9 {
			t.Errorf("%s = %v %v, want %v", k, g, ok, v)
		}
	}
	if _, ok := got[SignalAppLatency]; ok || len(got) != len(want) {
		t.Errorf("signals = %v", got)
	}
}

func TestLoadYoungestFirst(t *testing.T) {
	l := NewLoadWith(LoadConfig{Load5: 3, Cooldown: 10 * time.Second})
	ctx := context.Background()
	at := func(sec int, load5 float64, be ...string) monitor.Usage {
		u := node(sec, time.Millisecond, be...)
		u.Host.Load5 = load5
		return u
	}
	for _, s := range []struct {
		u    monitor.Usage
		want string
	}{
		{at(0, 2, "a", "b", "c"), ""},
		{at(1, 4, "a", "b", "c"), "KILL c"},
		{at(2, 4, "a", "b"), ""}, // cool-down
		{at(11, 4, "a", "b"), "KILL b"},
		{at(21, 2.9, "a"), ""},
		{at(31, 5, "a"), "KILL a"},
		{at(41, 5), ""},
	} {
		cs, err := l.Corrections(ctx, s.u)
		if err != nil {
			t.Fatal(err)
		}
		if got := render(cs); got != s.want {
			t.Fatalf("t=%v: %q, want %q", s.u.Timestamp.Sub(t0), got, s.want)
		}
		for _, c := range cs {
			if c.Trigger.Signal != "load" || c.Trigger.Threshold != 3 {
				t.Fatalf("trigger %+v", c.Trigger)
			}
		}
	}
}

// TestLoadScenario: the load controller's rules on a fake clock — nothing
// in the first minute after its start (the load averages still carry what
// ran before), only active revocable work (idle antagonists make no
// load), host cpu pressure when the host has PSI, load1 otherwise, never
// load5 by default.
func TestLoadScenario(t *testing.T) {
	l, err := NewLoad(Options{"cooldown": "5s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	type host struct {
		psi          float64 // some avg10, percent; <0: no PSI
		load1, load5 float64
	}
	at := func(sec int, h host, bes ...be) monitor.Usage {
		u := activeNode(sec, time.Millisecond, bes...)
		u.Host.Load1, u.Host.Load5 = h.load1, h.load5
		if h.psi >= 0 {
			u.Host.HasCPUPressure, u.Host.CPUPressure.SomeAvg10 = true, h.psi
		}
		return u
	}
	idle := []be{{"old", 0.9, 0}, {"young", 0.01, 0}} // young sleeps
	for _, s := range []struct {
		name string
		u    monitor.Usage
		want string
	}{
		{"start: load5 left over from earlier work", at(0, host{-1, 9, 9}, idle...), ""},
		{"still in the grace period", at(59, host{90, 9, 9}, idle...), ""},
		{"load5 alone does not count", at(60, host{-1, 1, 9}, idle...), ""},
		{"load1 over the cpu count, without PSI: the youngest active", at(61, host{-1, 3, 9}, idle...), "KILL old"},
		{"cool-down", at(62, host{-1, 3, 9}, be{"young", 0.9, 0}), ""},
		{"PSI preferred: under 50 % with load1 high", at(70, host{20, 9, 9}, be{"young", 0.9, 0}), ""},
		{"PSI over 50 %", at(71, host{80, 0.5, 0.5}, be{"young", 0.9, 0}), "KILL young"},
		{"nothing active", at(80, host{80, 9, 9}, be{"idle", 0, 0}, be{"new", 0, 0}), ""},
	} {
		if s.name == "nothing active" {
			s.u.Containers[2].History = monitor.NewRing(2) // "new": no samples yet
		}
		cs, err := l.Corrections(ctx, s.u)
		if err != nil {
			t.Fatal(err)
		}
		if got := render(cs); got != s.want {
			t.Fatalf("%s: %q, want %q", s.name, got, s.want)
		}
		for _, c := range cs {
			if c.Trigger.Value <= c.Trigger.Threshold || c.Trigger.Signal == "" {
				t.Fatalf("%s: trigger %+v", s.name, c.Trigger)
			}
		}
	}
	for _, o := range []Options{{"psi": "2"}, {"grace": "x"}, {"load1": "-1"}, {"active-cpu": "-1"}} {
		if _, err := NewLoad(o, nil); err == nil {
			t.Errorf("%v accepted", o)
		}
	}
}

type fakeActuator struct {
	calls []string
	fail  map[string]error
}

func (f *fakeActuator) do(op, id string) error {
	f.calls = append(f.calls, op+" "+id)
	return f.fail[op+" "+id]
}
func (f *fakeActuator) SetCPUQuota(_ context.Context, id string, m int64) error {
	return f.do(fmt.Sprintf("quota=%d", m), id)
}
func (f *fakeActuator) Freeze(_ context.Context, id string) error { return f.do("freeze", id) }
func (f *fakeActuator) Thaw(_ context.Context, id string) error   { return f.do("thaw", id) }
func (f *fakeActuator) Kill(_ context.Context, id, reason string) error {
	return f.do("kill("+reason+")", id)
}

func TestApplier(t *testing.T) {
	boom := errors.New("boom")
	act := &fakeActuator{fail: map[string]error{"freeze b": boom}}
	a := NewApplier(act, nil)
	ctx := context.Background()
	trig := Trigger{Signal: SignalRunQueueP99, Victim: "lc"}
	if a.Blocking() != "" {
		t.Fatal("blocking with nothing in force")
	}
	err := a.Apply(ctx, []Correction{
		{Type: Throttle, ContainerID: "a", CPUQuota: 100, Trigger: trig},
		{Type: Throttle, ContainerID: "b", CPUQuota: 100, Trigger: trig},
		{Type: Freeze, ContainerID: "a", Trigger: trig},
		{Type: Freeze, ContainerID: "b", Trigger: trig},
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if got := render(a.Active()); got != "THROTTLE a@100, THROTTLE b@100, FREEZE a" {
		t.Fatalf("active = %s", got)
	}
	if b := a.Blocking(); !strings.Contains(b, "3 correction(s)") || !strings.Contains(b, "runqueue-p99") {
		t.Fatalf("blocking = %q", b)
	}
	// Kill of a frozen container thaws it first and forgets it.
	if err := a.Apply(ctx, []Correction{{Type: Kill, ContainerID: "a", Trigger: trig}, {Type: Unthrottle, ContainerID: "b"}}); err != nil {
		t.Fatal(err)
	}
	want := "quota=100 a|quota=100 b|freeze a|freeze b|thaw a|kill(CONTAINER_PREEMPTED) a|quota=0 b"
	if got := strings.Join(act.calls, "|"); got != want {
		t.Fatalf("calls = %s\nwant    %s", got, want)
	}
	if len(a.Active()) != 0 || a.Blocking() != "" {
		t.Fatalf("still active: %v", a.Active())
	}
	if r := a.Recent(); len(r) != 6 || !errors.Is(r[3].Err, boom) {
		t.Fatalf("recent = %+v", r)
	}
	if err := testutil.CollectAndCompare(a, strings.NewReader(`
# HELP brim_qos_corrections_total QoS corrections applied, by type and triggering signal.
# TYPE brim_qos_corrections_total counter
brim_qos_corrections_total{trigger="runqueue-p99",type="FREEZE"} 1
brim_qos_corrections_total{trigger="runqueue-p99",type="KILL"} 1
brim_qos_corrections_total{trigger="runqueue-p99",type="THROTTLE"} 2
brim_qos_corrections_total{trigger="",type="UNTHROTTLE"} 1
`), "brim_qos_corrections_total"); err != nil {
		t.Fatal(err)
	}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	RegisterBuiltins(r)
	if got := strings.Join(r.Names(), ","); got != "interference,load,noop" {
		t.Fatalf("names = %s", got)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("duplicate Register did not panic")
			}
		}()
		r.Register("noop", NewNoop)
	}()
	if _, err := Open(r, "nope", nil, nil); !errors.Is(err, ErrUnknown) {
		t.Fatalf("unknown: %v", err)
	}
	for _, o := range []Options{{"enter-factor": "1"}, {"alpha": "0"}, {"cooldown": "x"}, {"exit-factor": "3"},
		{"slow-start": "10s"}, {"slow-start": "-1s", "io-throttle": "1000"}} {
		if _, err := Open(r, "interference", o, nil); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%v: %v", o, err)
		}
	}
	if _, err := Open(r, "plugin:/x", Options{"timeout": "never"}, nil); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("plugin options: %v", err)
	}
}

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

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func testLogger(t *testing.T) *slog.Logger { return slog.New(slog.NewTextHandler(testWriter{t}, nil)) }

func TestPluginRoundTrip(t *testing.T) {
	brimtest.SkipUnless(t, !testing.Short(), "builds and runs a plugin (-short)")
	bin := buildBinary(t, "github.com/brimnode/brim/examples/qos-plugin")
	c, err := Open(NewRegistry(), "plugin:"+bin+" 1.0", nil, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.(*Plugin).Close()
	ctx := context.Background()
	u := node(5, time.Millisecond, "old", "young")
	u.Host.Load1 = 1.5 // 2 cpus: below 2.0
	if cs, err := c.Corrections(ctx, u); err != nil || len(cs) != 0 {
		t.Fatalf("low load: %v %v", cs, err)
	}
	u.Host.Load1 = 2.5
	cs, err := c.Corrections(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if render(cs) != "KILL young" || cs[0].Trigger.Signal != "load1" || cs[0].Trigger.Value != 2.5 || cs[0].Trigger.Threshold != 2 {
		t.Fatalf("high load: %s %+v", render(cs), cs)
	}
}

func TestPluginMisbehaves(t *testing.T) {
	brimtest.SkipUnless(t, !testing.Short(), "builds and runs a plugin (-short)")
	bin := buildBinary(t, "github.com/brimnode/brim/qos/testdata/badplugin")
	for _, mode := range []string{"crash", "hang"} {
		t.Run(mode, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "marker")
			p := NewPlugin(bin, PluginConfig{Args: []string{mode, marker}, Timeout: 300 * time.Millisecond,
				MinBackoff: 100 * time.Millisecond}, testLogger(t))
			defer p.Close()
			ctx := context.Background()
			u := node(0, time.Millisecond, "be")
			_, err := p.Corrections(ctx, u)
			want := pluginhost.ErrUnavailable
			if mode == "hang" {
				want = pluginhost.ErrTimeout
			}
			if !errors.Is(err, want) {
				t.Fatalf("first call: %v, want %v", err, want)
			}
			if cs, err := Fallback(p, testLogger(t)).Corrections(ctx, u); err != nil || cs != nil {
				t.Fatalf("fallback: %v %v", cs, err)
			}
			var last error
			for range 50 {
				if _, last = p.Corrections(ctx, u); last == nil {
					break
				}
				if !errors.Is(last, pluginhost.ErrUnavailable) {
					t.Fatalf("while restarting: %v", last)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if last != nil || p.Restarts() != 1 {
				t.Fatalf("after restart: %v, restarts %d", last, p.Restarts())
			}
		})
	}
}

// BenchmarkInterference100 measures one interference decision over 50
// latency-critical and 50 revocable containers with eBPF and PSI signals.
func BenchmarkInterference100(b *testing.B) {
	c, err := NewInterference(Options{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	u := monitor.Usage{Timestamp: t0}
	for i := range 100 {
		cu := monitor.ContainerUsage{ContainerInfo: monitor.ContainerInfo{ID: fmt.Sprintf("c%03d", i), Revocable: i%2 == 1,
			Limits: isolator.Limits{MilliCPUs: 500}}, History: monitor.NewRing(300)}
		for j := range 300 {
			var s monitor.Statistics
			s.Timestamp = t0.Add(time.Duration(j) * time.Second)
			s.HasCPU, s.CPUPeriods, s.CPUThrottled = true, uint64(j*10), uint64(j)
			s.HasPressure, s.CPUPressure.SomeTotal = true, time.Duration(j)*time.Millisecond
			s.RunQueue = &monitor.LatencySummary{P99: time.Millisecond}
			cu.History.Push(s)
		}
		cu.Latest, _ = cu.History.Latest()
		u.Containers = append(u.Containers, cu)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		u.Timestamp = u.Timestamp.Add(time.Second)
		if _, err := c.Corrections(ctx, u); err != nil {
			b.Fatal(err)
		}
	}
}

func TestInterferenceWithoutRevocableWork(t *testing.T) {
	c, err := NewInterferenceWith(InterferenceConfig{EnterFactor: 2, ExitFactor: 1.3, Warmup: 2, BaselineWindow: 60, Stable: 1.5, SLOExit: 0.8, MaxReadmit: time.Minute,
		Cooldown: time.Second, RecoverAfter: time.Second, ThrottleFraction: 0.5, MinQuota: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 3 {
		_, _ = c.Corrections(ctx, node(i, time.Millisecond))
	}
	// Degraded with nothing revocable: no response is armed.
	for i := 3; i < 8; i++ {
		if cs, _ := c.Corrections(ctx, node(i, 10*time.Millisecond)); len(cs) != 0 || c.Level() != LevelNone {
			t.Fatalf("t=%d: %v level %d", i, render(cs), c.Level())
		}
	}
	// Revocable work arrives while the victim is degraded: first step only.
	if cs, _ := c.Corrections(ctx, node(8, 10*time.Millisecond, "be")); render(cs) != "THROTTLE be@500" {
		t.Fatalf("with be: %v", render(cs))
	}
}

// Pending: a degraded observation awaiting confirmation, or a value in the
// hysteresis band while revocable work runs, asks the loop for an early
// re-check; nothing does once a correction is in force.
func TestInterferencePending(t *testing.T) {
	c, err := NewInterference(Options{"warmup": "3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ic := c.(*Interference)
	ms := time.Millisecond
	sec := 0
	step := func(lat time.Duration, revocable ...string) []Correction {
		t.Helper()
		cs, err := c.Corrections(context.Background(), node(sec, lat, revocable...))
		if err != nil {
			t.Fatal(err)
		}
		sec++
		return cs
	}
	for range 3 {
		step(2*ms, "be")
	}
	// Baseline 2 ms: exit threshold 2.6 ms, enter 4 ms.
	for _, tc := range []struct {
		lat       time.Duration
		revocable []string
		pending   bool
	}{
		{2 * ms, []string{"be"}, false},
		{3 * ms, nil, false},           // in the band, nothing revocable at work
		{3 * ms, []string{"be"}, true}, // in the band: maybe interference
		{2 * ms, []string{"be"}, false},
		{5 * ms, []string{"be"}, true}, // degraded, not yet confirmed
		{2 * ms, []string{"be"}, true}, // 1 of the last 3 degraded
	} {
		if cs := step(tc.lat, tc.revocable...); len(cs) != 0 {
			t.Fatalf("%v: corrected %v", tc.lat, render(cs))
		}
		if got := ic.Pending(); got != tc.pending {
			t.Fatalf("%v (revocable %v): pending %v, want %v", tc.lat, tc.revocable, got, tc.pending)
		}
	}
	if cs := step(5*ms, "be"); render(cs) != "THROTTLE be@200" || ic.Pending() {
		t.Fatalf("confirmed: %v, pending %v", render(cs), ic.Pending())
	}
}

// ioActuator is a fakeActuator that can also limit io (IOActuator).
type ioActuator struct{ fakeActuator }

func (f *ioActuator) SetIOLimit(_ context.Context, id string, bps int64) error {
	return f.do(fmt.Sprintf("io=%d", bps), id)
}

// TestApplierIO: THROTTLE_IO and UNTHROTTLE_IO go through the Actuator's
// IOActuator, are in force in between, and fail with ErrNotSupported on
// an Actuator that cannot limit io.
func TestApplierIO(t *testing.T) {
	ctx := context.Background()
	trig := Trigger{Signal: SignalPSIIO, Victim: "lc"}
	if err := NewApplier(&fakeActuator{}, nil).Apply(ctx, []Correction{{Type: ThrottleIO, ContainerID: "d", IOBytesPerSec: 1 << 20, Trigger: trig}}); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("without IOActuator: %v", err)
	}
	act := &ioActuator{}
	a := NewApplier(act, nil)
	if err := a.Apply(ctx, []Correction{{Type: ThrottleIO, ContainerID: "d", IOBytesPerSec: 0, Trigger: trig}}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("zero limit: %v", err)
	}
	if err := a.Apply(ctx, []Correction{{Type: ThrottleIO, ContainerID: "d", IOBytesPerSec: 1 << 20, Trigger: trig}}); err != nil {
		t.Fatal(err)
	}
	if act := a.Active(); len(act) != 1 || act[0].Type != ThrottleIO || !strings.Contains(a.Blocking(), "THROTTLE_IO d") {
		t.Fatalf("active %v, blocking %q", act, a.Blocking())
	}
	if err := a.Apply(ctx, []Correction{{Type: UnthrottleIO, ContainerID: "d", Trigger: trig}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(act.calls, "|"); got != "io=1048576 d|io=0 d" || len(a.Active()) != 0 {
		t.Fatalf("calls %s, active %v", got, a.Active())
	}
	// A slow start's limit is in force but blocks no offers: it admits
	// work, it does not answer interference (idle revocable work is
	// parked for good, and offers would stop for good with it).
	ss := Trigger{Signal: SignalSlowStart}
	if err := a.Apply(ctx, []Correction{{Type: ThrottleIO, ContainerID: "d", IOBytesPerSec: 1 << 20, Trigger: ss}}); err != nil {
		t.Fatal(err)
	}
	if act := a.Active(); len(act) != 1 || a.Blocking() != "" {
		t.Fatalf("slow start: active %v, blocking %q", act, a.Blocking())
	}
	// The ladder's io limit on the same container does block.
	if err := a.Apply(ctx, []Correction{{Type: ThrottleIO, ContainerID: "d", IOBytesPerSec: 1 << 20, Trigger: trig}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a.Blocking(), "THROTTLE_IO d (psi-io)") {
		t.Fatalf("the ladder's io limit: blocking %q", a.Blocking())
	}
}

// slowFreezer freezes nothing until ctx ends: a container whose tasks sit
// in an uninterruptible sleep (a writer in an fsync) stays FREEZING.
type slowFreezer struct{ fakeActuator }

func (s *slowFreezer) Freeze(ctx context.Context, id string) error {
	s.do("freeze", id)
	<-ctx.Done()
	return fmt.Errorf("freeze %s: %w", id, ctx.Err())
}

// TestApplierFreezeUnderWay: a freeze that does not complete within the
// applier's wait counts as applied (the kernel finishes it) instead of
// holding the QoS loop until it does (6.6 s behind an io-throttled fsync
// in the colocation experiment; forever behind a task stuck in the
// kernel). A freeze ended by the caller's own context is an error.
func TestApplierFreezeUnderWay(t *testing.T) {
	act := &slowFreezer{}
	a := NewApplier(act, nil)
	a.freezeWait = 50 * time.Millisecond
	trig := Trigger{Signal: SignalAppLatency, Victim: "lc"}
	done := make(chan error, 1)
	go func() {
		done <- a.Apply(context.Background(), []Correction{{Type: Freeze, ContainerID: "d", Trigger: trig}})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("apply: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Apply still waiting for a freeze the kernel has not finished")
	}
	if got := render(a.Active()); got != "FREEZE d" {
		t.Fatalf("active = %q, want the freeze in force", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Apply(ctx, []Correction{{Type: Freeze, ContainerID: "e", Trigger: trig}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("apply with the loop's context ended: %v, want context.Canceled", err)
	}
	if got := render(a.Active()); got != "FREEZE d" {
		t.Fatalf("active = %q: a freeze cancelled by the caller counted as applied", got)
	}
}

// TestInterferenceLeavesAContainerBeingKilledAlone: a revocable container
// whose kill is under way (ContainerInfo.Stopping) is never corrected —
// a freeze would stop its exit — and the degradation goes to the others.
func TestInterferenceLeavesAContainerBeingKilledAlone(t *testing.T) {
	ic, err := NewInterference(Options{"warmup": "3", "persist": "1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for sec := range 3 {
		if _, err := ic.Corrections(ctx, node(sec, time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	u := node(3, 9*time.Millisecond, "dying", "alive")
	u.Containers[1].Stopping = true
	cs, err := ic.Corrections(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if got := render(cs); got != "THROTTLE alive@200" {
		t.Fatalf("corrections = %q, want only the container not being killed throttled", got)
	}
}
