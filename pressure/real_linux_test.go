package pressure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/containerizer"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/monitor"
)

// node is a real containerizer with the cgroup isolator under a test
// parent, adapted to the guards' Source and Evictor the way the agent is.
type node struct {
	t      *testing.T
	parent string
	cg     *cgroups.Isolator
	c      *containerizer.Containerizer

	mu      sync.Mutex
	evicted map[string]string // id → message
}

func newNode(t *testing.T, parentMemLimit int64) *node {
	t.Helper()
	testutil.RequireRoot(t)
	parent := testutil.NewCgroupParent(t)
	state := testutil.DiskDir(t) // sandboxes on a disk: the io throttle applies to it
	if parentMemLimit > 0 {
		setParentLimit(t, parent, parentMemLimit)
	}
	cg, err := cgroups.New(cgroups.Config{Parent: parent, IOPaths: []string{state}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := containerizer.New(containerizer.Config{StateDir: state, Isolators: []isolator.Isolator{cg}, ShimBinary: shimBinary, WarmShims: -1})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, parent: parent, cg: cg, c: c, evicted: map[string]string{}}
	t.Cleanup(func() {
		ctx := context.Background()
		infos, _ := c.List(ctx)
		for _, info := range infos {
			if err := c.Destroy(ctx, info.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		c.Close()
	})
	return n
}

// setParentLimit gives the test's cgroup parent a memory limit (and no
// swap beyond it), so that the memory-oversubscribed containers below it
// press on it and never on the host.
func setParentLimit(t *testing.T, parent string, limit int64) {
	t.Helper()
	v := strconv.FormatInt(limit, 10)
	d := testutil.CgroupDir("memory", parent)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	files := []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"}
	if testutil.CgroupV2() {
		files = []string{"memory.max", "memory.swap.max"}
	}
	for k, f := range files {
		if k == 1 {
			if _, err := os.Stat(filepath.Join(d, f)); err != nil {
				continue // no swap accounting
			}
			if testutil.CgroupV2() {
				v = "0"
			}
		}
		if err := os.WriteFile(filepath.Join(d, f), []byte(v), 0); err != nil {
			t.Fatalf("limit the test parent: %s: %v", f, err)
		}
	}
}

func (n *node) Containers(ctx context.Context) ([]monitor.ContainerInfo, error) {
	infos, err := n.c.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []monitor.ContainerInfo
	for _, i := range infos {
		if i.State == containerizer.StateRunning {
			out = append(out, monitor.ContainerInfo{ID: i.ID, Limits: i.Spec.Limits, Revocable: i.Spec.Limits.Class == isolator.BestEffort})
		}
	}
	return out, nil
}

func (n *node) Usage(ctx context.Context, id string) (*isolator.Statistics, error) {
	return n.c.Usage(ctx, id)
}

func (n *node) Evict(ctx context.Context, id, msg string) error {
	n.mu.Lock()
	n.evicted[id] = msg
	n.mu.Unlock()
	return n.c.Kill(ctx, id, -1) // at once, as the agent evicts
}

func (n *node) launch(id string, class isolator.QoSClass, mem int64, script string) *containerizer.Info {
	n.t.Helper()
	info, err := n.c.Launch(context.Background(), containerizer.Spec{ID: id, Command: []string{"sh", "-c", script},
		Limits: isolator.Limits{MilliCPUs: 500, MemoryBytes: mem, Class: class}})
	if err != nil {
		n.t.Fatalf("launch %s: %v", id, err)
	}
	return info
}

// oomKills reads the OOM kill counter of cgroup path p (v1
// memory.oom_control, v2 memory.events; both count the group's subtree
// on v2 and the group itself on v1).
func oomKills(t *testing.T, p string) uint64 {
	t.Helper()
	file := "memory.oom_control"
	if testutil.CgroupV2() {
		file = "memory.events"
	}
	f, err := os.Open(filepath.Join(testutil.CgroupDir("memory", p), file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kv, err := cgroups.ParseKeyValues(f)
	if err != nil {
		t.Fatal(err)
	}
	return kv["oom_kill"]
}

// allocScript allocates mib MiB in 1 MiB strings, step MiB every 0.1 s,
// writes "ok" to the sandbox, then sleeps.
func allocScript(mib, step int) string {
	return fmt.Sprintf(`awk 'BEGIN{s="x"; for(i=0;i<20;i++) s=s s; for(n=0;n<%d;n++){a[n]=s n; if(n%%%d==%d) system("sleep 0.1")}; system("echo ok >/mnt/sandbox/allocated; exec sleep 1000")}'`, mib, step, step-1)
}

// TestMemoryGuardEvictsHogBeforeOOM: on a memory-oversubscribed parent
// (320 MiB) a guaranteed container holds 100 MiB of its 160 MiB and a
// revocable one (256 MiB limit) grows 40 MiB/s towards 250 MiB. The sum
// would pass the parent's limit, and without the guard the parent's OOM
// killer would end the hog (oom_score_adj 1000). With it, brim evicts the
// hog first, with the memory-pressure reason: no OOM kill anywhere, the
// guaranteed container keeps running.
func TestMemoryGuardEvictsHogBeforeOOM(t *testing.T) {
	n := newNode(t, 320<<20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lc := n.launch(testutil.UniqueName("lc"), isolator.Guaranteed, 160<<20, allocScript(100, 100))
	waitFile(t, filepath.Join(lc.SandboxDir, "allocated"))
	g, err := NewMemory(MemoryConfig{Interval: 100 * time.Millisecond}, n, n.cg, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = g.Run(ctx) }()
	defer wg.Wait()
	defer cancel()

	hog := n.launch(testutil.UniqueName("hog"), isolator.BestEffort, 256<<20, allocScript(250, 4))
	for id, want := range map[int]int{lc.Pid: 0, hog.Pid: 1000} {
		if adj, err := cgroups.OOMScoreAdj(id); err != nil || adj != want {
			t.Errorf("oom_score_adj of pid %d = %d, %v; want %d", id, adj, err, want)
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Minute)
	defer wcancel()
	st, err := n.c.Wait(wctx, hog.ID)
	if err != nil {
		t.Fatalf("the hog was not evicted: %v", err)
	}
	n.mu.Lock()
	msg, evicted := n.evicted[hog.ID]
	n.mu.Unlock()
	if !evicted || st.OOMKilled || !strings.HasPrefix(msg, "evicted: memory pressure") {
		t.Fatalf("hog ended %+v; evicted by brim %v (%q): want an eviction, not an OOM kill", st, evicted, msg)
	}
	t.Logf("hog evicted: %s; evictions %+v; rounds on a kernel notification: %d", msg, g.Evictions(), g.Wakes())
	if k := oomKills(t, n.cg.Path(lc.ID)); k != 0 {
		t.Errorf("the guaranteed container had %d OOM kills", k)
	}
	if k := oomKills(t, n.parent); k != 0 {
		t.Errorf("the parent had %d OOM kills: the kernel chose before brim did", k)
	}
	info, err := n.c.Get(ctx, lc.ID)
	if err != nil || info.State != containerizer.StateRunning {
		t.Fatalf("guaranteed container: %+v, %v; want running", info, err)
	}
	if slices.ContainsFunc(g.Evictions(), func(e Eviction) bool { return e.ContainerID == lc.ID }) {
		t.Error("the guard evicted the guaranteed container")
	}
}

func waitFile(t *testing.T, p string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared", p)
}

// stalledVictim wraps a Source: the named non-revocable container reports
// an IO stall of frac (scripted: a real victim's PSI on a shared disk is
// not reproducible) while on is set; every other figure is real.
type stalledVictim struct {
	Source
	id string

	mu   sync.Mutex
	on   bool
	base time.Duration // stall accumulated by past "on" periods
	from time.Time
}

func (s *stalledVictim) set(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.on && !on {
		s.base += now.Sub(s.from) / 2
	}
	if on && !s.on {
		s.from = now
	}
	s.on = on
}

func (s *stalledVictim) Usage(ctx context.Context, id string) (*isolator.Statistics, error) {
	st, err := s.Source.Usage(ctx, id)
	if err != nil || id != s.id {
		return st, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	st.Timestamp, st.HasPressure = now, true
	st.IOPressure.SomeTotal = s.base
	if s.on {
		st.IOPressure.SomeTotal += now.Sub(s.from) / 2 // 50 % of the time
	}
	return st, nil
}

// rates parses the rounds the writer appends to its sandbox ("bytes
// start end", uptime seconds), in bytes per second.
func rates(t *testing.T, info *containerizer.Info) []float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(info.SandboxDir, "rates"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []float64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		n, _ := strconv.ParseFloat(f[0], 64)
		a, _ := strconv.ParseFloat(f[1], 64)
		e, _ := strconv.ParseFloat(f[2], 64)
		out = append(out, n/max(e-a, 0.01)) // a round under the clock's 10 ms counts as 10 ms
	}
	return out
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// waitRates waits until the writer has reported at least n rounds.
func waitRates(t *testing.T, info *containerizer.Info, n int) []float64 {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if r := rates(t, info); len(r) >= n {
			return r
		}
	}
	t.Fatalf("the writer reported fewer than %d rounds: %v", n, rates(t, info))
	return nil
}

// TestIOGuardThrottlesWriter: a revocable container writes to its
// sandbox with dd (direct IO: v1 charges only IO the group issues itself)
// in rounds of 32 MiB. Once the non-revocable container reports an IO
// stall, the IO guard throttles the writer (whose own IO stall, real,
// marks it as a cause) to an eighth of the rate it had just measured (at
// most 16 MiB/s); the rounds after it must run at most 0.4 × the rate
// before, in the same run. When the victim recovers, the throttle is lifted and the rate
// climbs back.
func TestIOGuardThrottlesWriter(t *testing.T) {
	n := newNode(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lc := n.launch(testutil.UniqueName("lc"), isolator.Guaranteed, 64<<20, "exec sleep 1000")
	writer := n.launch(testutil.UniqueName("dd"), isolator.BestEffort, 64<<20,
		// Timed with /proc/uptime (10 ms): busybox's dd (the v2 lane's)
		// prints no rate and its date no nanoseconds.
		`while :; do a=$(cut -d' ' -f1 /proc/uptime); dd if=/dev/zero of=/mnt/sandbox/data bs=1M count=32 oflag=direct 2>/dev/null; `+
			`b=$(cut -d' ' -f1 /proc/uptime); echo "$((32<<20)) $a $b" >>/mnt/sandbox/rates; done`)
	before := waitRates(t, writer, 4)[1:] // the first round warms the file up
	base := median(before)
	// blk-throttle is accurate at modest rates; at hundreds of MiB/s (a
	// virtual disk backed by the host's page cache) 1 MiB bios overshoot.
	limit := int64(max(min(base/8, 16<<20), 1<<20))
	src := &stalledVictim{Source: n, id: lc.ID}
	// ActiveStall low: under emulation (the v2 lane) a direct writer may
	// spend more of its time running than waiting.
	g, err := NewIO(IOConfig{Interval: 200 * time.Millisecond, Limit: cgroups.IOLimit{WriteBPS: limit}, RecoverAfter: time.Second, ActiveStall: 0.01}, src, n.cg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = g.Run(ctx) }()
	defer wg.Wait()
	defer cancel()

	src.set(true)
	for deadline := time.Now().Add(time.Minute); !slices.Contains(g.Throttled(), writer.ID); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the writer was not throttled; actions %+v", g.Actions())
		}
	}
	if slices.Contains(g.Throttled(), lc.ID) {
		t.Fatal("the guard throttled the non-revocable container")
	}
	k := len(rates(t, writer)) + 1 // the round in progress straddles the throttle
	throttled := waitRates(t, writer, k+3)[k:]
	slow := median(throttled)
	t.Logf("writer: %.1f MiB/s before (rounds %v), %.1f MiB/s throttled to %.1f MiB/s: ratio %.3f", base/(1<<20), mibs(before), slow/(1<<20), float64(limit)/(1<<20), slow/base)
	if slow/base > 0.4 {
		t.Errorf("throttled rate / rate before = %.3f, want ≤ 0.4 (throttle at %.3f)", slow/base, float64(limit)/base)
	}

	src.set(false)
	for deadline := time.Now().Add(time.Minute); len(g.Throttled()) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the throttle was not lifted; actions %+v", g.Actions())
		}
	}
	k = len(rates(t, writer)) + 1
	after := median(waitRates(t, writer, k+3)[k:])
	t.Logf("after the throttle was lifted: %.1f MiB/s (%.2f × throttled)", after/(1<<20), after/slow)
	if after/slow < 2 {
		t.Errorf("rate after lifting / throttled rate = %.2f, want ≥ 2", after/slow)
	}
}

func mibs(v []float64) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = fmt.Sprintf("%.0f", x/(1<<20))
	}
	return out
}
