package qos

import (
	"context"
	"testing"
	"time"

	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/monitor"
)

// be is a revocable container for activeNode: over the last second it
// used cpu cpus and stalled on io for io of the time; idle when both are 0.
type be struct {
	id      string
	cpu, io float64
}

// activeNode is node with revocable containers that have two samples (one
// second apart) showing their activity; started at t0 + index seconds.
func activeNode(sec int, lat time.Duration, bes ...be) monitor.Usage {
	u := node(sec, lat)
	now := u.Timestamp
	for i, b := range bes {
		var prev, cur monitor.Statistics
		prev.Timestamp, cur.Timestamp = now.Add(-time.Second), now
		prev.HasCPU, cur.HasCPU = true, true
		prev.CPUUsageNanos = 5e9
		cur.CPUUsageNanos = prev.CPUUsageNanos + uint64(b.cpu*1e9)
		prev.HasPressure, cur.HasPressure = true, true
		cur.IOPressure.SomeTotal = time.Duration(b.io * float64(time.Second))
		r := monitor.NewRing(2)
		r.Push(prev)
		r.Push(cur)
		u.Containers = append(u.Containers, monitor.ContainerUsage{ContainerInfo: monitor.ContainerInfo{
			ID: b.id, Revocable: true, StartedAt: t0.Add(time.Duration(i) * time.Second),
			Limits: isolator.Limits{MilliCPUs: 1000, Class: isolator.BestEffort}}, Latest: cur, History: r})
	}
	return u
}

func newTestInterference(t *testing.T, opts Options) *Interference {
	t.Helper()
	base := Options{"warmup": "3", "cooldown": "2s", "recover-after": "5s"}
	for k, v := range opts {
		base[k] = v
	}
	c, err := NewInterference(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*Interference)
}

type activeStep struct {
	sec  int
	lat  time.Duration
	bes  []be
	want string
}

func runActiveSteps(t *testing.T, c *Interference, steps []activeStep) {
	t.Helper()
	for _, s := range steps {
		cs, err := c.Corrections(context.Background(), activeNode(s.sec, s.lat, s.bes...))
		if err != nil {
			t.Fatal(err)
		}
		if got := render(cs); got != s.want {
			t.Fatalf("t=%ds lat=%v: corrections %q (level %d), want %q", s.sec, s.lat, got, c.Level(), s.want)
		}
	}
}

// The first correction needs the degradation on persist of the last
// persist+1 new observations, the latest degraded; a single noisy window,
// or one report seen by several rounds, is not enough; an intermittent
// degradation (one healthy window between two degraded ones) is.
func TestInterferencePersist(t *testing.T) {
	ms := time.Millisecond
	busy := []be{{"a", 0.9, 0}}
	for _, tc := range []struct {
		name    string
		persist string
		steps   []activeStep
	}{
		{"default 2: one noisy window", "", []activeStep{
			{0, ms, busy, ""}, {1, ms, busy, ""}, {2, ms, busy, ""},
			{3, 9 * ms, busy, ""}, // 1st degraded window
			{4, ms, busy, ""},     // quiet
			{5, ms, busy, ""},     // quiet: the 1st is out of the last 3
			{6, 9 * ms, busy, ""},
			{7, 9 * ms, busy, "THROTTLE a@200"}, // 2nd in a row
		}},
		{"default 2: intermittent", "", []activeStep{
			{0, ms, busy, ""}, {1, ms, busy, ""}, {2, ms, busy, ""},
			{3, 9 * ms, busy, ""},
			{4, ms, busy, ""},
			{5, 9 * ms, busy, "THROTTLE a@200"}, // 2 of the last 3
		}},
		{"3", "3", []activeStep{
			{0, ms, busy, ""}, {1, ms, busy, ""}, {2, ms, busy, ""},
			{3, 9 * ms, busy, ""}, {4, 9 * ms, busy, ""}, {5, ms, busy, ""},
			{6, 9 * ms, busy, "THROTTLE a@200"}, // 3 of the last 4
		}},
		{"1: at once", "1", []activeStep{
			{0, ms, busy, ""}, {1, ms, busy, ""}, {2, ms, busy, ""},
			{3, 9 * ms, busy, "THROTTLE a@200"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{}
			if tc.persist != "" {
				opts["persist"] = tc.persist
			}
			runActiveSteps(t, newTestInterference(t, opts), tc.steps)
		})
	}

	// The same latency report seen by two rounds (a tick after the
	// event-driven round) counts once.
	c := newTestInterference(t, nil)
	measured := t0.Add(3 * time.Second)
	for sec := range 6 {
		u := activeNode(sec, ms, busy...)
		if sec >= 3 {
			u.Containers[0].Latest.AppLatency = &monitor.LatencySummary{P99: 9 * ms, Measured: measured}
		}
		cs, _ := c.Corrections(context.Background(), u)
		if len(cs) != 0 {
			t.Fatalf("t=%d: one stale report corrected: %v", sec, render(cs))
		}
	}
	u := activeNode(6, 9*ms, busy...)
	u.Containers[0].Latest.AppLatency.Measured = t0.Add(6 * time.Second)
	if cs, _ := c.Corrections(context.Background(), u); render(cs) != "THROTTLE a@200" {
		t.Fatalf("second report: %q", render(cs))
	}
}

// Only revocable containers that used cpu or stalled on io over the last
// interval are corrected (and, on a signal that names no resource, not
// cpu work in cpu.idle); a frozen one keeps the activity it had.
func TestInterferenceIdleRevocable(t *testing.T) {
	ms := time.Millisecond
	idle := []be{{"a", 0.01, 0}, {"b", 0, 0}} // a sleep loop, nothing
	oneBusy := []be{{"a", 0.01, 0}, {"b", 0.02, 0.8}}
	bothBusy := []be{{"a", 0.7, 0}, {"b", 0.02, 0.8}}
	c := newTestInterference(t, Options{"persist": "1", "freeze-hold": "2s"})
	runActiveSteps(t, c, []activeStep{
		{0, ms, idle, ""}, {1, ms, idle, ""}, {2, ms, idle, ""},
		// Degraded while every antagonist sleeps: nothing to blame, and
		// the response is not armed.
		{3, 9 * ms, idle, ""},
		{4, 9 * ms, idle, ""},
		// b floods the disk (io stall, little cpu): b alone.
		{5, 9 * ms, oneBusy, "THROTTLE b@200"},
		{6, 9 * ms, oneBusy, ""},
		{7, 9 * ms, oneBusy, "FREEZE b"},
		// a wakes up, but it burns cpu in cpu.idle: on a signal that
		// names no resource it is not a suspect.
		{8, 9 * ms, bothBusy, ""},
		// b frozen (its activity before the freeze counts) for
		// freeze-hold and lc still degraded: b was not the cause.
		{9, 9 * ms, []be{{"a", 0.7, 0}, {"b", 0, 0}}, "THAW b, UNTHROTTLE b"},
		{10, 9 * ms, bothBusy, ""}, // app-latency of lc is noise now
	})
	if c.Level() != LevelNone {
		t.Fatalf("level %d", c.Level())
	}
}

// Past FREEZE the cause test waits freeze-hold, then decides only once
// the signal stopped improving (a frozen writer's dirty pages flushing).
func TestInterferenceFreezeHold(t *testing.T) {
	ms := time.Millisecond
	busy := []be{{"a", 0.9, 0}, {"b", 0.5, 0}}
	quiet := []activeStep{{0, ms, busy, ""}, {1, ms, busy, ""}, {2, ms, busy, ""}}
	for _, tc := range []struct {
		name  string
		steps []activeStep
	}{
		{"stalled", []activeStep{
			{3, 9 * ms, busy, "THROTTLE a@200, THROTTLE b@200"},
			{5, 9 * ms, busy, "FREEZE a, FREEZE b"},
			{8, 9 * ms, busy, ""},                                            // 3 s < freeze-hold 5 s
			{10, 9 * ms, busy, "THAW a, THAW b, UNTHROTTLE a, UNTHROTTLE b"}, // the cause test failed
		}},
		{"improving", []activeStep{
			{3, 9 * ms, busy, "THROTTLE a@200, THROTTLE b@200"},
			{5, 12 * ms, busy, "FREEZE a, FREEZE b"},
			{10, 8 * ms, busy, ""},                                           // improved by 1/3: wait
			{12, 6 * ms, busy, ""},                                           // improved by 1/4: wait
			{14, 6 * ms, busy, "THAW a, THAW b, UNTHROTTLE a, UNTHROTTLE b"}, // stalled: the cause test failed
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestInterference(t, Options{"persist": "1"})
			runActiveSteps(t, c, append(append([]activeStep{}, quiet...), tc.steps...))
		})
	}
}

func TestInterferenceNewOptions(t *testing.T) {
	// recover-after beyond the default max-readmit (5 min) raises it.
	if _, err := NewInterference(Options{"recover-after": "10m"}, nil); err != nil {
		t.Errorf("recover-after=10m: %v", err)
	}
	for _, o := range []Options{{"persist": "-1"}, {"freeze-hold": "-1s"}, {"improvement": "1"}, {"active-cpu": "-0.1"}, {"active-stall": "x"},
		{"alpha": "0.1"}, {"recover-after": "10m", "max-readmit": "1m"}, {"slo-p99": "x"}, {"slo-exit": "1.5"}, {"warmup": "30", "baseline-window": "20"},
		{"stable": "0.5"}, {"busy-cpu": "-1"}, {"kill-after": "-1"}, {"noise-hold": "-1s"}, {"be-cpu-idle": "perhaps"},
		{"relief": "1"}, {"relief": "-0.1"}, {"severe": "1"}, {"severe": "-2"}} {
		if _, err := NewInterference(o, nil); err == nil {
			t.Errorf("%v accepted", o)
		}
	}
}
