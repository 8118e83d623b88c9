package containerizer

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/internal/subid"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
)

// BenchmarkLaunch measures Launch from the API call to "user process
// running" (the point where `runc run -d` returns after its own `start`)
// on a busybox rootfs with the shim-only binary (cmd/brim-shim), with the
// real cgroup isolator, against `runc run -d` (Debian's runc) on the
// equivalent bundle: the OCI spec brim's shim runs (executor.RuntimeSpec:
// same rootfs, read-only, namespaces, mounts, masked paths, seccomp
// profile when built with the seccomp tag), the same cpu shares, a cgroup
// at an absolute path under the same parent.
//
// Two phases, each a loop of rounds that launch one container of every
// variant in a random order, each once the pools have settled (see
// settle), so that the variants of a phase see the same machine load:
//
//   - cold (no warm sandbox): runc; "cold", a launch made from nothing
//     with a warm shim (the default when no sandbox is ready);
//     "cold-spawn", with no warm shim either (the shim process starts
//     on the launch's path); "cold-userns", into a user namespace;
//     "cold-unprepared", with a warm shim that made nothing ahead
//     (Config.NoShimPrepare: libcontainer makes the namespaces and the
//     /dev, /tmp and /sys mounts on the launch's path).
//   - warm: "warm" and "warm-userns", a launch that takes a warm sandbox
//     (each round's sandbox made before the timed launch).
//
// Every variant keeps its runtime state on one tmpfs (launchRunDir;
// LAUNCH_BENCH_RUN_DIR=state: on the disk).
//
// The phases are apart because a pool with sandboxes ready keeps the
// kernel's cgroup-attach lock warm (isolator/cgroups.Warm), which would
// speed runc's and the cold launches' cgroup joins too. Reported, as
// metrics a script reads: <variant>-p50-ms and -p99-ms, runc-p50-ms and
// -p99-ms, cold/runc-p50-ratio, warm/runc-p50-ratio,
// userns/plain-p50-ratio (cold-userns over cold),
// prepared/unprepared-p50-ratio (cold over cold-unprepared). With
// $LAUNCH_BENCH_STEPS set, the median of every launch step (the
// containerizer's, then the shim's) per variant goes to that file.
func BenchmarkLaunch(b *testing.B) {
	testutil.RequireRoot(b)
	parent := testutil.NewCgroupParent(b)
	// The agent's defaults: a pids limit and the masked host paths (runc's
	// bundle masks none of them, so its launches do less).
	cg, err := cgroups.New(cgroups.Config{Parent: parent, DefaultPids: cgroups.DefaultPidsMax})
	if err != nil {
		b.Fatal(err)
	}
	userns := testRange
	cold := []*launchVariant{
		{name: "cold", sandboxes: -1},
		{name: "cold-unprepared", sandboxes: -1, noPrepare: true},
		{name: "cold-spawn", sandboxes: -1, shims: -1},
		{name: "cold-userns", sandboxes: -1, userns: &userns},
	}
	warm := []*launchVariant{{name: "warm"}, {name: "warm-userns", userns: &userns}}
	run := launchRunDir(b)
	for _, v := range append(append([]*launchVariant(nil), cold...), warm...) {
		v.start(b, cg, run)
	}
	rootfs := busyboxRootfs(b)
	// ... and the rootfs (t.TempDir's two levels are 0700).
	for _, d := range []string{filepath.Dir(rootfs), filepath.Dir(filepath.Dir(rootfs))} {
		if err := os.Chmod(d, 0o711); err != nil {
			b.Fatal(err)
		}
	}
	runc := &launchVariant{name: "runc"}
	if path, err := exec.LookPath("runc"); err == nil {
		runc.runc = path
		runc.runcBundle, runc.runcRoot = runcBundleDir(b, rootfs)
		if run != "" {
			runc.runcRoot = filepath.Join(run, "runc") // as /run/runc
		}
	}
	b.ResetTimer()
	b.StopTimer() // only the launches themselves are timed
	for i := 0; i < b.N; i++ {
		launchRound(b, append([]*launchVariant{runc}, cold...), cg, rootfs)
	}
	for _, v := range cold {
		v.c.Close()
	}
	for _, v := range warm {
		// An untimed launch: a pool makes sandboxes for shapes in demand.
		v.warmUp(b, cg, rootfs)
	}
	for i := 0; i < b.N; i++ {
		launchRound(b, warm, cg, rootfs)
	}
	reportLaunch(b, runc, cold, warm)
}

// launchRound launches one container of every variant in a random order:
// a launch right after another container's teardown runs beside the
// kernel's deferred work for it (network namespace and cgroup release),
// and no variant may always be the one that pays for that.
func launchRound(b *testing.B, vs []*launchVariant, cg *cgroups.Isolator, rootfs string) {
	for _, k := range rand.Perm(len(vs)) {
		settle(b, vs)
		vs[k].launch(b, cg, rootfs)
	}
}

// reportLaunch reports BenchmarkLaunch's metrics and writes the steps.
func reportLaunch(b *testing.B, runc *launchVariant, cold, warm []*launchVariant) {
	var r50 time.Duration
	if len(runc.times) > 0 {
		r50 = percentile(runc.times, 50)
		b.ReportMetric(ms(r50), "runc-p50-ms")
		b.ReportMetric(ms(percentile(runc.times, 99)), "runc-p99-ms")
	}
	for _, v := range append(append([]*launchVariant(nil), cold...), warm...) {
		p50 := percentile(v.times, 50)
		b.ReportMetric(ms(p50), v.name+"-p50-ms")
		b.ReportMetric(ms(percentile(v.times, 99)), v.name+"-p99-ms")
		if r50 > 0 && (v.name == "cold" || v.name == "warm") {
			b.ReportMetric(float64(p50)/float64(r50), v.name+"/runc-p50-ratio")
		}
	}
	byName := map[string]*launchVariant{}
	for _, v := range cold {
		byName[v.name] = v
	}
	p50Ratio := func(a, b string) float64 {
		return float64(percentile(byName[a].times, 50)) / float64(percentile(byName[b].times, 50))
	}
	// What a user namespace costs: the same cold launch with and without.
	b.ReportMetric(p50Ratio("cold-userns", "cold"), "userns/plain-p50-ratio")
	// What the warm shim's making ahead takes off (executor's readySet).
	b.ReportMetric(p50Ratio("cold", "cold-unprepared"), "prepared/unprepared-p50-ratio")
	if path := os.Getenv("LAUNCH_BENCH_STEPS"); path != "" {
		var out strings.Builder
		for _, v := range append(append([]*launchVariant(nil), cold...), warm...) {
			fmt.Fprintf(&out, "%s (median of %d launches, ms)\n", v.name, len(v.times))
			for _, name := range v.stepOrder {
				fmt.Fprintf(&out, "  %-34s %7.2f\n", name, ms(percentile(v.steps[name], 50)))
			}
		}
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			b.Error(err)
		}
	}
}

// traversableTempDir is a temporary directory whose every parent others
// may traverse (under /var/tmp), removed at the end of the benchmark.
func traversableTempDir(b *testing.B) string {
	b.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "brim-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		b.Fatal(err)
	}
	return dir
}

// launchRunDir is where every variant keeps its runtime state, brim's
// and runc's: a tmpfs of the bench's own, as /run is on a host under
// systemd (runc's default root is /run/runc; the agent's package sets
// run-dir = /run/brim-agent). This machine's /run is on its disk, whose
// inode allocations slow down as files are made and removed (ext4
// without a journal: docs/benchmarks.md); the sandboxes and logs stay in
// the state dirs, on the disk, as they would. LAUNCH_BENCH_RUN_DIR=state
// keeps everything on the disk ("" returned).
func launchRunDir(b *testing.B) string {
	b.Helper()
	switch os.Getenv("LAUNCH_BENCH_RUN_DIR") {
	case "", "tmpfs":
	case "state":
		return ""
	default:
		b.Fatalf("LAUNCH_BENCH_RUN_DIR=%q: want tmpfs or state", os.Getenv("LAUNCH_BENCH_RUN_DIR"))
	}
	dir := traversableTempDir(b) // a user namespace's root must traverse it
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=512m,mode=0711"); err != nil {
		b.Fatalf("mount a tmpfs for the run dirs: %v", err)
	}
	// Registered after traversableTempDir's removal: runs before it.
	b.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			b.Errorf("unmount the run dirs' tmpfs: %v", err)
		}
	})
	return dir
}

// settle waits (untimed, at most 2 s) until every variant's pools are
// full — its warm shims started, a warm variant's sandbox made — and
// each of their processes has finished starting (its CPU time stopped
// growing): a shim or sandbox started to replace the one a launch took
// must not run during the next launch measured, whichever runtime that
// is. Without it the launch after another is ≈ 6 ms slower here.
func settle(b *testing.B, variants []*launchVariant) {
	b.Helper()
	for _, v := range variants {
		c := v.c
		if c == nil {
			continue
		}
		deadline := time.Now().Add(2 * time.Second)
		if v.sandboxes >= 0 {
			deadline = time.Now().Add(30 * time.Second) // making a sandbox on a loaded host
		}
		for {
			c.poolMu.Lock()
			full := len(c.warm) >= c.cfg.WarmShims && c.filling == 0
			var pids []int
			for _, sp := range c.warm {
				pids = append(pids, sp.pid)
			}
			c.poolMu.Unlock()
			p := c.pool
			p.mu.Lock()
			ready := 0
			for _, sp := range p.shapes {
				for _, sb := range sp.ready {
					ready++
					pids = append(pids, sb.sp.pid, sb.pid)
				}
			}
			full = full && p.filling == 0 && (!p.enabled || ready > 0)
			p.mu.Unlock()
			if full && cpuIdle(pids) || time.Now().After(deadline) {
				break
			}
			if !full {
				p.wake()
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
}

// cpuIdle reports whether none of pids' threads ran over 5 ms.
func cpuIdle(pids []int) bool {
	before := cpuNanos(pids)
	time.Sleep(5 * time.Millisecond)
	return cpuNanos(pids) == before
}

// cpuNanos sums the on-CPU time of every thread of pids
// (/proc/<pid>/task/<tid>/schedstat, first field, in ns).
func cpuNanos(pids []int) uint64 {
	var sum uint64
	for _, pid := range pids {
		files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if fields := strings.Fields(string(data)); len(fields) > 0 {
				n, _ := strconv.ParseUint(fields[0], 10, 64)
				sum += n
			}
		}
	}
	return sum
}

// launchVariant is one way BenchmarkLaunch launches, with its timings.
type launchVariant struct {
	name       string
	sandboxes  int          // Config.WarmSandboxes
	shims      int          // Config.WarmShims
	userns     *subid.Range // launch into a user namespace of this range
	noPrepare  bool         // Config.NoShimPrepare
	c          *Containerizer
	times      []time.Duration
	steps      map[string][]time.Duration
	stepOrder  []string
	runc       string // the runc binary: the runc variant
	runcBundle string
	runcRoot   string
}

// start makes v's containerizer, with its runtime state in run/<name>
// (run "": in its state dir).
func (v *launchVariant) start(b *testing.B, cg *cgroups.Isolator, run string) {
	stateDir := b.TempDir()
	if v.userns != nil {
		// The namespace's root must reach the container directories.
		stateDir = traversableTempDir(b)
	}
	runDir := ""
	if run != "" {
		runDir = filepath.Join(run, v.name)
	}
	c, err := New(Config{StateDir: stateDir, RunDir: runDir, Isolators: []isolator.Isolator{cg}, ShimBinary: smallShimBinary,
		HidePaths: DefaultHidePaths, WarmSandboxes: v.sandboxes, WarmShims: v.shims, NoShimPrepare: v.noPrepare})
	if err != nil {
		b.Fatal(err)
	}
	v.c = c
	b.Cleanup(func() {
		// A failed iteration may leave its container behind.
		ctx := context.Background()
		infos, _ := c.List(ctx)
		for _, info := range infos {
			if err := c.Destroy(ctx, info.ID); err != nil {
				b.Errorf("cleanup: %v", err)
			}
		}
		c.Close()
	})
}

// launch times one launch of v (then kills and destroys it, untimed).
func (v *launchVariant) launch(b *testing.B, cg *cgroups.Isolator, rootfs string) {
	limits := isolator.Limits{MilliCPUs: 100}
	if v.c == nil {
		if v.runc != "" {
			id := testutil.UniqueName("bench") + "-runc"
			v.times = append(v.times, runcRun(b, v.runc, v.runcRoot, v.runcBundle, cg.Path(id), id, limits))
		}
		return
	}
	ctx := context.Background()
	id := testutil.UniqueName("bench")
	b.StartTimer()
	start := time.Now()
	_, err := v.c.Launch(ctx, Spec{ID: id, Command: []string{"sleep", "1000"}, Rootfs: rootfs, Limits: limits, UserNS: v.userns})
	d := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	v.times = append(v.times, d)
	if ct, err := v.c.get(id); err == nil {
		v.addSteps(b, ct)
	}
	if err := v.c.Kill(ctx, id, -1); err != nil {
		b.Fatal(err)
	}
	if err := v.c.Destroy(ctx, id); err != nil {
		b.Fatal(err)
	}
}

// warmUp launches one container of v untimed, unrecorded.
func (v *launchVariant) warmUp(b *testing.B, cg *cgroups.Isolator, rootfs string) {
	ctx := context.Background()
	id := testutil.UniqueName("bench")
	if _, err := v.c.Launch(ctx, Spec{ID: id, Command: []string{"true"}, Rootfs: rootfs, Limits: isolator.Limits{MilliCPUs: 100}, UserNS: v.userns}); err != nil {
		b.Fatal(err)
	}
	if err := v.c.Destroy(ctx, id); err != nil {
		b.Fatal(err)
	}
}

// addSteps keeps ct's launch steps; a warm variant's launch that found
// no sandbox is an error.
func (v *launchVariant) addSteps(b *testing.B, ct *container) {
	if v.sandboxes >= 0 && ct.sandbox == "" {
		b.Fatalf("%s: a launch found no warm sandbox", v.name)
	}
	if v.steps == nil {
		v.steps = make(map[string][]time.Duration)
	}
	for _, st := range ct.steps {
		if _, ok := v.steps[st.Name]; !ok {
			v.stepOrder = append(v.stepOrder, st.Name)
		}
		v.steps[st.Name] = append(v.steps[st.Name], time.Duration(st.Micros)*time.Microsecond)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func percentile(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

// runcBundleDir prepares the equivalent bundle for runc: a directory with
// the rootfs path recorded and the state root runc uses. The config itself
// is written per container by runcRun (its ID, cgroup path and sandbox
// differ).
func runcBundleDir(b *testing.B, rootfs string) (bundle, root string) {
	dir := b.TempDir()
	bundle, root = filepath.Join(dir, "bundle"), filepath.Join(dir, "root")
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "rootfs"), []byte(rootfs), 0o644); err != nil {
		b.Fatal(err)
	}
	return bundle, root
}

// runcRun times `runc run -d` of one container on the OCI spec brim's shim
// would run for it (executor.RuntimeSpec), with limits' cpu shares and its
// cgroup at the absolute path cgroupPath, then kills and deletes it
// untimed.
func runcRun(b *testing.B, runc, root, bundle, cgroupPath, id string, limits isolator.Limits) time.Duration {
	rootfs, err := os.ReadFile(filepath.Join(bundle, "rootfs"))
	if err != nil {
		b.Fatal(err)
	}
	ctBundle := filepath.Join(filepath.Dir(bundle), id)
	if err := os.MkdirAll(filepath.Join(ctBundle, executor.SandboxDir), 0o755); err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(ctBundle)
	spec := executor.RuntimeSpec(&executor.Bundle{
		ID: id, Args: []string{"sleep", "1000"}, Rootfs: string(rootfs), CgroupPath: cgroupPath,
	}, ctBundle, string(rootfs))
	shares := cgroups.Shares(limits)
	spec.Linux.Resources.CPU = &specs.LinuxCPU{Shares: &shares}
	data, err := json.Marshal(spec)
	if err == nil {
		err = os.WriteFile(filepath.Join(ctBundle, "config.json"), data, 0o644)
	}
	if err != nil {
		b.Fatal(err)
	}
	// The detached container inherits runc's stdio: give it files, never
	// pipes (a pipe stays open as long as the container runs).
	logf, err := os.Create(filepath.Join(ctBundle, "output"))
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(runc, "--root", root, "run", "-d", "--bundle", ctBundle, id)
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	err = cmd.Run()
	d := time.Since(start)
	if err != nil {
		out, _ := os.ReadFile(logf.Name())
		b.Fatalf("runc run: %v: %s", err, out)
	}
	if out, err := exec.Command(runc, "--root", root, "delete", "-f", id).CombinedOutput(); err != nil {
		b.Fatalf("runc delete: %v: %s", err, out)
	}
	return d
}
