package pressure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/monitor"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeNode is a scripted node: containers with a working set and
// cumulative PSI stall times that the test advances, a scope reading, and
// a record of evictions and throttles. Not safe for concurrent use.
type fakeNode struct {
	now        time.Time
	containers []monitor.ContainerInfo
	ws         map[string]uint64
	memStall   map[string]time.Duration
	ioStall    map[string]time.Duration
	scope      cgroups.ScopeMemory
	evicted    []string
	messages   []string
	throttles  map[string]cgroups.IOLimit
}

func newFake() *fakeNode {
	return &fakeNode{now: time.Unix(1000, 0), ws: map[string]uint64{}, memStall: map[string]time.Duration{},
		ioStall: map[string]time.Duration{}, throttles: map[string]cgroups.IOLimit{}}
}

func (f *fakeNode) add(id string, revocable bool, ws uint64) {
	f.containers = append(f.containers, monitor.ContainerInfo{ID: id, Revocable: revocable})
	f.ws[id] = ws
}

// tick advances the clock by d, each container stalling for the given
// fraction of it (memory and io).
func (f *fakeNode) tick(d time.Duration, mem, io map[string]float64) {
	f.now = f.now.Add(d)
	for id, fr := range mem {
		f.memStall[id] += time.Duration(fr * float64(d))
	}
	for id, fr := range io {
		f.ioStall[id] += time.Duration(fr * float64(d))
	}
}

func (f *fakeNode) Containers(context.Context) ([]monitor.ContainerInfo, error) {
	return slices.Clone(f.containers), nil
}

func (f *fakeNode) Usage(_ context.Context, id string) (*isolator.Statistics, error) {
	for _, c := range f.containers {
		if c.ID == id {
			return &isolator.Statistics{Timestamp: f.now, HasMemory: true, MemWorkingSet: f.ws[id], HasPressure: true,
				MemPressure: isolator.PSI{SomeTotal: f.memStall[id]}, IOPressure: isolator.PSI{SomeTotal: f.ioStall[id]}}, nil
		}
	}
	return nil, fmt.Errorf("usage of %s: %w", id, isolator.ErrNotFound)
}

func (f *fakeNode) ParentMemory() (cgroups.ScopeMemory, error) { return f.scope, nil }

func (f *fakeNode) Evict(_ context.Context, id, msg string) error {
	f.evicted = append(f.evicted, id)
	f.messages = append(f.messages, msg)
	f.containers = slices.DeleteFunc(f.containers, func(c monitor.ContainerInfo) bool { return c.ID == id })
	return nil
}

func (f *fakeNode) ThrottleIO(_ context.Context, id string, l cgroups.IOLimit) error {
	if l.IsZero() {
		delete(f.throttles, id)
	} else {
		f.throttles[id] = l
	}
	return nil
}

func memGuard(t *testing.T, f *fakeNode) *MemoryGuard {
	t.Helper()
	g, err := NewMemory(MemoryConfig{}, f, f, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.now = func() time.Time { return f.now }
	return g
}

func round(t *testing.T, r interface{ Round(context.Context) error }) {
	t.Helper()
	if err := r.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryGuardScopeUsage(t *testing.T) {
	f := newFake()
	f.add("lc", false, 500<<20)
	f.scope = cgroups.ScopeMemory{Used: 990 << 20, Limit: 1000 << 20}
	g := memGuard(t, f)
	round(t, g)
	if len(f.evicted) != 0 {
		t.Fatalf("evicted %v with no revocable work: the guard never touches non-revocable containers", f.evicted)
	}
	f.add("small", true, 100<<20)
	f.add("hog", true, 300<<20)
	f.scope.Used = 800 << 20
	round(t, g)
	if len(f.evicted) != 0 {
		t.Fatalf("evicted %v at 80 %% (threshold 90 %%)", f.evicted)
	}
	f.scope.Used = 950 << 20
	round(t, g)
	if !slices.Equal(f.evicted, []string{"hog"}) || !strings.HasPrefix(f.messages[0], "evicted: memory pressure (containers' parent working set 950 MiB of 1000 MiB") {
		t.Fatalf("evicted %v %q, want the largest revocable container with the reason", f.evicted, f.messages)
	}
	f.tick(500*time.Millisecond, nil, nil)
	round(t, g)
	if len(f.evicted) != 1 {
		t.Fatalf("evicted %v within the cooldown", f.evicted)
	}
	f.tick(time.Second, nil, nil)
	round(t, g)
	if !slices.Equal(f.evicted, []string{"hog", "small"}) {
		t.Fatalf("evicted %v after the cooldown, want hog then small", f.evicted)
	}
	if ev := g.Evictions(); len(ev) != 2 || ev[0].ContainerID != "hog" || ev[0].WorkingSet != 300<<20 {
		t.Errorf("Evictions = %+v", ev)
	}
}

// TestMemoryGuardSkipsAContainerBeingKilled: a revocable container whose
// kill is under way (an eviction still exiting: a process SIGKILL cannot
// end yet) is not evicted again; the next largest is. Before, the guard
// picked the same largest container round after round while the node
// stayed short of memory.
func TestMemoryGuardSkipsAContainerBeingKilled(t *testing.T) {
	f := newFake()
	f.add("lc", false, 500<<20)
	f.add("small", true, 100<<20)
	f.add("hog", true, 300<<20)
	f.containers[2].Stopping = true // hog: evicted, still exiting
	f.scope = cgroups.ScopeMemory{Used: 950 << 20, Limit: 1000 << 20}
	round(t, memGuard(t, f))
	if !slices.Equal(f.evicted, []string{"small"}) {
		t.Fatalf("evicted %v, want small (hog is being killed already)", f.evicted)
	}
}

func TestMemoryGuardStall(t *testing.T) {
	f := newFake()
	f.add("lc", false, 500<<20)
	f.add("be", true, 100<<20)
	f.scope = cgroups.ScopeMemory{Used: 100 << 20, Limit: 1000 << 20, Node: true}
	g := memGuard(t, f)
	round(t, g) // first PSI sample: no fraction yet
	// The revocable container's own stall (its memory.high) is no reason.
	f.tick(time.Second, map[string]float64{"lc": 0.05, "be": 0.9}, nil)
	round(t, g)
	if len(f.evicted) != 0 {
		t.Fatalf("evicted %v at 5 %% stall of the non-revocable container", f.evicted)
	}
	f.tick(time.Second, map[string]float64{"lc": 0.3}, nil)
	round(t, g)
	if !slices.Equal(f.evicted, []string{"be"}) || !strings.Contains(f.messages[0], "lc stalled on memory 30 %") {
		t.Fatalf("evicted %v %q, want be because lc stalled", f.evicted, f.messages)
	}
}

func TestIOGuard(t *testing.T) {
	f := newFake()
	f.add("lc", false, 0)
	f.add("writer", true, 0)
	f.add("idle", true, 0)
	g, err := NewIO(IOConfig{RecoverAfter: 5 * time.Second}, f, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.now = func() time.Time { return f.now }
	round(t, g)
	f.tick(time.Second, nil, map[string]float64{"lc": 0.1, "writer": 0.9})
	round(t, g)
	if len(f.throttles) != 0 {
		t.Fatalf("throttled %v at 10 %% io stall (threshold 20 %%)", f.throttles)
	}
	f.tick(time.Second, nil, map[string]float64{"lc": 0.5, "writer": 0.9})
	round(t, g)
	want := cgroups.IOLimit{ReadBPS: 10 << 20, WriteBPS: 10 << 20}
	if len(f.throttles) != 1 || f.throttles["writer"] != want {
		t.Fatalf("throttles %v, want only the writer at %+v (idle does no IO)", f.throttles, want)
	}
	if got := g.Throttled(); !slices.Equal(got, []string{"writer"}) {
		t.Errorf("Throttled = %v", got)
	}
	// Healthy, but not for RecoverAfter yet.
	for range 4 {
		f.tick(time.Second, nil, map[string]float64{"writer": 0.9})
		round(t, g)
	}
	if len(f.throttles) != 1 {
		t.Fatalf("throttle lifted after 4 s healthy (recover-after 5 s): %v", f.throttles)
	}
	f.tick(time.Second, nil, nil)
	round(t, g)
	if len(f.throttles) != 0 || len(g.Throttled()) != 0 {
		t.Fatalf("throttle kept after 5 s healthy: %v", f.throttles)
	}
	acts := g.Actions()
	if len(acts) != 2 || !acts[0].Throttle || !strings.Contains(acts[0].Why, "lc stalled on IO 50 %") || acts[1].Throttle || acts[1].Why != "recovered" {
		t.Errorf("Actions = %+v", acts)
	}
}

func TestConfigErrors(t *testing.T) {
	f := newFake()
	for _, c := range []MemoryConfig{{UsageThreshold: 1.5}, {StallThreshold: -1}, {Interval: -time.Second}} {
		if _, err := NewMemory(c, f, f, f, nil); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewMemory(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}
	if _, err := NewMemory(MemoryConfig{}, f, nil, nil, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewMemory without an evictor = %v", err)
	}
	for _, c := range []IOConfig{{StallThreshold: 2}, {Limit: cgroups.IOLimit{WriteBPS: -1}}, {RecoverAfter: -1}} {
		if _, err := NewIO(c, f, f, nil); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewIO(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}
}

// wakingScope is a full scope whose kernel notification the test fires.
type wakingScope struct {
	ch chan struct{}
}

func (w wakingScope) ParentMemory() (cgroups.ScopeMemory, error) {
	return cgroups.ScopeMemory{Used: 99, Limit: 100}, nil
}

func (w wakingScope) WatchParentMemory(context.Context) (<-chan struct{}, error) { return w.ch, nil }

// syncEvictor records evictions on a channel (Run's goroutine evicts).
type syncEvictor chan string

func (e syncEvictor) Evict(_ context.Context, id, _ string) error { e <- id; return nil }

// TestMemoryGuardWakes: with an hour between ticks, a kernel notification
// runs a round at once.
func TestMemoryGuardWakes(t *testing.T) {
	f := newFake()
	f.add("be", true, 10)
	scope := wakingScope{ch: make(chan struct{}, 1)}
	ev := make(syncEvictor, 1)
	g, err := NewMemory(MemoryConfig{Interval: time.Hour}, f, scope, ev, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- g.Run(ctx) }()
	scope.ch <- struct{}{}
	select {
	case id := <-ev:
		if id != "be" {
			t.Errorf("evicted %s", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no round on the notification")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || g.Wakes() != 1 {
		t.Errorf("Run = %v, wakes %d", err, g.Wakes())
	}
}

func TestMetrics(t *testing.T) {
	f := newFake()
	f.add("be", true, 10)
	f.add("lc", false, 0)
	f.scope = cgroups.ScopeMemory{Used: 99, Limit: 100}
	g := memGuard(t, f)
	round(t, g)
	want := `
# HELP brim_pressure_evictions_total Revocable containers evicted by the memory guard (result: ok or error).
# TYPE brim_pressure_evictions_total counter
brim_pressure_evictions_total{result="error"} 0
brim_pressure_evictions_total{result="ok"} 1
`
	if err := promtest.CollectAndCompare(g, strings.NewReader(want), "brim_pressure_evictions_total"); err != nil {
		t.Error(err)
	}
	io, err := NewIO(IOConfig{}, f, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.now = func() time.Time { return f.now }
	f.add("w", true, 0)
	round(t, io)
	f.tick(time.Second, nil, map[string]float64{"lc": 0.9, "w": 0.9})
	round(t, io)
	want = `
# HELP brim_pressure_io_throttled Revocable containers whose IO the IO guard throttles now.
# TYPE brim_pressure_io_throttled gauge
brim_pressure_io_throttled 1
`
	if err := promtest.CollectAndCompare(io, strings.NewReader(want), "brim_pressure_io_throttled"); err != nil {
		t.Error(err)
	}
}
