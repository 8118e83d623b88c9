package qos

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/monitor"
)

// cgroupNode runs revocable "burn" processes in groups of the real cgroups
// isolator, which is also the Actuator (SetCPUQuota, Freeze, Thaw); Kill
// kills the process the test started.
type cgroupNode struct {
	*cgroups.Isolator
	mu    sync.Mutex
	ids   []string
	procs map[string]*exec.Cmd
}

func (n *cgroupNode) Containers(context.Context) ([]monitor.ContainerInfo, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []monitor.ContainerInfo
	for i, id := range n.ids {
		limits := isolator.Limits{MilliCPUs: 1000}
		if id != "lc" {
			limits.Class = isolator.BestEffort // as prepared: cpu.idle, no cpu competitor
		}
		out = append(out, monitor.ContainerInfo{ID: id, Revocable: id != "lc", CgroupPath: n.Path(id),
			StartedAt: time.Unix(int64(i), 0), Limits: limits})
	}
	return out, nil
}

func (n *cgroupNode) Usage(ctx context.Context, id string) (*isolator.Statistics, error) {
	var st isolator.Statistics
	if err := n.Isolator.Usage(ctx, id, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

func (n *cgroupNode) Kill(_ context.Context, id, reason string) error {
	n.mu.Lock()
	cmd := n.procs[id]
	delete(n.procs, id)
	n.mu.Unlock()
	if cmd == nil || reason != ReasonPreempted {
		return errors.New("unexpected kill")
	}
	if err := cmd.Process.Kill(); err != nil {
		return err
	}
	// Wait returns once the (thawed) process is dead.
	if err := cmd.Wait(); err != nil && !errors.As(err, new(*exec.ExitError)) {
		return err
	}
	return nil
}

// cgroupFile reads a v1 cgroup file of path; on a v2 host it reads what
// stands for it and answers in v1's terms (cpu.max's quota as
// cpu.cfs_quota_us, cgroup.freeze as freezer.state).
func cgroupFile(t *testing.T, ctrl, path, file string) string {
	t.Helper()
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join(testutil.CgroupDir(ctrl, path), f))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if !testutil.CgroupV2() {
		return read(file)
	}
	switch file {
	case "cpu.cfs_quota_us":
		if q, _, _ := strings.Cut(read("cpu.max"), " "); q != "max" {
			return q
		}
		return "-1"
	case "freezer.state":
		if read("cgroup.freeze") == "1" {
			return "FROZEN"
		}
		return "THAWED"
	}
	return read(file)
}

// TestInterferenceOnRealCgroups drives the interference controller and the
// Applier over real container groups with real processes: the graded
// response lands in the cgroup files (cfs quota, freezer) and the kill of
// a confirmed cause ends its process. Latency is reported synthetically (the
// application-latency path) on a fake clock, so nothing depends on timing.
func TestInterferenceOnRealCgroups(t *testing.T) {
	testutil.RequireRoot(t)
	iso, err := cgroups.New(cgroups.Config{Parent: testutil.NewCgroupParent(t)})
	if err != nil {
		t.Fatal(err)
	}
	n := &cgroupNode{Isolator: iso, procs: map[string]*exec.Cmd{}}
	ctx := context.Background()
	for _, id := range []string{"lc", "be0", "be1"} {
		limits := isolator.Limits{MilliCPUs: 1000}
		if id != "lc" {
			limits.Class = isolator.BestEffort
		}
		if err := iso.Prepare(ctx, id, limits, &isolator.Launch{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = iso.Cleanup(context.Background(), id) })
		n.ids = append(n.ids, id)
		if id == "lc" {
			continue
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), roleEnv+"=burn")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		n.procs[id] = cmd
		t.Cleanup(func() {
			_ = iso.Thaw(context.Background(), id)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		for _, ctrl := range []string{"cpu", "cpuacct", "freezer", "memory", "pids"} {
			dir := testutil.CgroupDir(ctrl, iso.Path(id))
			if _, err := os.Stat(dir); err != nil {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The isolator stamps samples with the real clock, and on cgroup v2
	// the lc's own PSI makes signals stamped with them: the fake clock
	// runs an hour ahead so that a report is never older than a sample
	// (a report older than the last observation counts as seen).
	start := time.Now().Add(time.Hour).Truncate(time.Second)
	now := start
	mon := monitor.New(n, monitor.Config{Host: monitor.NoHost, Now: func() time.Time { return now }}, nil)
	// The clock is fake (rounds 1 s apart run 50 ms apart), so cpu usage
	// per fake second is tiny: any use counts as activity and as
	// competition (active-cpu=active-stall=1e-6), and the burners compete
	// on cpu (be-cpu-idle=false: attributed, so a confirmed cause may be
	// killed; a KILL never follows a fallback attribution). persist=1 and
	// freeze-hold=cooldown give the plain graded response.
	ic, err := NewInterference(Options{"warmup": "3", "cooldown": "3s", "recover-after": "5s",
		"persist": "1", "freeze-hold": "3s", "active-cpu": "0.000001", "active-stall": "0.000001", "be-cpu-idle": "false", "kill-after": "1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	applier := NewApplier(n, nil)
	round := func(sec int, lat time.Duration) []Correction {
		t.Helper()
		now = start.Add(time.Duration(sec) * time.Second)
		time.Sleep(50 * time.Millisecond) // the burners get some cpu between samples
		if err := mon.Sample(ctx); err != nil {
			t.Fatal(err)
		}
		if err := mon.ReportLatency("lc", monitor.LatencySummary{P99: lat}); err != nil {
			t.Fatal(err)
		}
		u := mon.Usage()
		u.Timestamp = now
		cs, err := ic.Corrections(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if err := applier.Apply(ctx, cs); err != nil {
			t.Fatalf("t=%d: apply %v: %v", sec, cs, err)
		}
		for _, c := range cs {
			if c.Trigger.Signal == "" || (c.Type != Thaw && c.Type != Unthrottle && c.Trigger.Signal != SignalAppLatency) {
				t.Fatalf("t=%d: %s without its trigger: %+v", sec, c.Type, c.Trigger)
			}
		}
		return cs
	}
	ms := time.Millisecond
	for s := range 3 {
		if cs := round(s, ms); len(cs) != 0 {
			t.Fatalf("quiet round %d: %v", s, cs)
		}
	}
	if cs := round(3, 10*ms); render(cs) != "THROTTLE be0@200, THROTTLE be1@200" {
		var why []string
		for _, c := range cs {
			why = append(why, c.Reason)
		}
		t.Fatalf("degraded: %s (%s)", render(cs), strings.Join(why, "; "))
	}
	for _, id := range []string{"be0", "be1"} {
		if q := cgroupFile(t, "cpu", iso.Path(id), "cpu.cfs_quota_us"); q != "20000" {
			t.Fatalf("%s quota = %s, want 20000 (0.2 cpu of a 100 ms period)", id, q)
		}
	}
	if applier.Blocking() == "" {
		t.Fatal("no block on revocable offers while throttled")
	}
	if got := render(round(6, 10*ms)); got != "FREEZE be0, FREEZE be1" {
		t.Fatalf("still degraded: %s", got)
	}
	for _, id := range []string{"be0", "be1"} {
		if s := cgroupFile(t, "freezer", iso.Path(id), "freezer.state"); s != "FROZEN" {
			t.Fatalf("%s freezer = %s", id, s)
		}
	}
	// The freeze ends the degradation: the cause is confirmed, and the
	// suspects are re-admitted (THAW) after recover-after.
	round(7, ms)
	if got := render(round(12, ms)); got != "THAW be0, THAW be1" {
		t.Fatalf("re-admission: %s", got)
	}
	for _, id := range []string{"be0", "be1"} {
		if s := cgroupFile(t, "freezer", iso.Path(id), "freezer.state"); s != "THAWED" {
			t.Fatalf("%s freezer = %s", id, s)
		}
	}
	// Degraded again after the re-admission (kill-after=1): the more
	// active one (both burn) is killed, the other stays throttled.
	killed, kept := "be1", "be0"
	switch got := render(round(15, 10*ms)); got {
	case "KILL be1":
	case "KILL be0":
		killed, kept = "be0", "be1"
	default:
		t.Fatalf("kill: %s", got)
	}
	if _, alive := n.procs[killed]; alive {
		t.Fatalf("%s not killed", killed)
	}
	n.mu.Lock()
	n.ids = slices.DeleteFunc(n.ids, func(id string) bool { return id == killed }) // its container is gone
	n.mu.Unlock()
	// Recovery: the throttle is lifted after recover-after.
	round(16, ms)
	if got := render(round(21, ms)); got != "UNTHROTTLE "+kept {
		t.Fatalf("recovery: %s", got)
	}
	if q := cgroupFile(t, "cpu", iso.Path(kept), "cpu.cfs_quota_us"); q != "-1" {
		t.Fatalf("%s quota after unthrottle = %s, want -1", kept, q)
	}
	if len(applier.Active()) != 0 || applier.Blocking() != "" {
		t.Fatalf("still in force: %v", applier.Active())
	}
}
