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

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/internal/subid"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
)

// BenchmarkLaunch measures Launch from the API call to "user process
// running" (the init released to exec it, the point where `runc run -d`
// returns after its own `start`), on a busybox rootfs, with two shims: the
// full brim binary (brim) and the shim-only binary (brim-shim). When runc
// is installed (/usr/sbin/runc, Debian's) the same loop also times `runc
// run -d` on the equivalent bundle: the OCI spec brim's shim runs
// (executor.RuntimeSpec: same rootfs, read-only, namespaces, mounts,
// masked paths, seccomp profile when built with the seccomp tag), with the
// same cpu shares at an absolute cgroup path under the same parent. Every
// iteration launches one container of each kind, in a random order and
// each once the warm shims have settled (see settle), so all three see the
// same machine load; the p50 ratios brim/runc are the figures to compare
// across runs. A third variant, brim-shim-userns, is the shim-only binary
// launching into a user namespace (testRange): its p50 ratio against
// brim-shim is what a user namespace costs a launch.
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
	variants := []*launchVariant{{name: "brim", shim: shimBinary}, {name: "brim-shim", shim: smallShimBinary},
		{name: "brim-shim-userns", shim: smallShimBinary, userns: &userns}}
	for _, v := range variants {
		stateDir := b.TempDir()
		if v.userns != nil {
			// The namespace's root must reach the container directories.
			stateDir = traversableTempDir(b)
		}
		v.c, err = New(Config{StateDir: stateDir, Isolators: []isolator.Isolator{cg}, ShimBinary: v.shim, HidePaths: DefaultHidePaths})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			// A failed iteration may leave its container behind.
			ctx := context.Background()
			infos, _ := v.c.List(ctx)
			for _, info := range infos {
				if err := v.c.Destroy(ctx, info.ID); err != nil {
					b.Errorf("cleanup: %v", err)
				}
			}
			v.c.Close()
		})
	}
	rootfs := busyboxRootfs(b)
	// ... and the rootfs (t.TempDir's two levels are 0700).
	for _, d := range []string{filepath.Dir(rootfs), filepath.Dir(filepath.Dir(rootfs))} {
		if err := os.Chmod(d, 0o711); err != nil {
			b.Fatal(err)
		}
	}
	runc, _ := exec.LookPath("runc")
	var runcBundle, runcRoot string
	if runc != "" {
		runcBundle, runcRoot = runcBundleDir(b, rootfs)
	}
	ctx := context.Background()
	limits := isolator.Limits{MilliCPUs: 100}
	var ref []time.Duration
	b.ResetTimer()
	b.StopTimer() // only the launches themselves are timed
	for i := 0; i < b.N; i++ {
		// A random order each round: a launch right after another
		// container's teardown runs beside the kernel's deferred work
		// for it (network namespace and cgroup release), and no runtime
		// may always be the one that pays for that.
		for _, k := range rand.Perm(len(variants) + 1) {
			settle(b, variants)
			if k == len(variants) {
				if runc != "" {
					id := testutil.UniqueName("bench") + "-runc"
					ref = append(ref, runcRun(b, runc, runcRoot, runcBundle, cg.Path(id), id, limits))
				}
				continue
			}
			v := variants[k]
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
			if err := v.c.Kill(ctx, id, -1); err != nil {
				b.Fatal(err)
			}
			if err := v.c.Destroy(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	var r50 time.Duration
	if len(ref) > 0 {
		r50 = percentile(ref, 50)
		b.ReportMetric(ms(r50), "runc-p50-ms")
		b.ReportMetric(ms(percentile(ref, 90)), "runc-p90-ms")
	}
	for _, v := range variants {
		p50 := percentile(v.times, 50)
		b.ReportMetric(ms(p50), v.name+"-p50-ms")
		b.ReportMetric(ms(percentile(v.times, 90)), v.name+"-p90-ms")
		if r50 > 0 {
			b.ReportMetric(float64(p50)/float64(r50), v.name+"/runc-p50-ratio")
		}
	}
	// What a user namespace costs: the same shim with and without one.
	if plain, ns := variants[1], variants[2]; len(plain.times) > 0 {
		b.ReportMetric(float64(percentile(ns.times, 50))/float64(percentile(plain.times, 50)), "userns/plain-p50-ratio")
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

// settle waits (untimed, at most 2 s) until every containerizer's pool of
// warm shims is full and each warm shim has finished starting (its CPU
// time stopped growing): a shim started to replace the one a launch took
// must not run during the next launch measured, whichever runtime that
// is. Without it the launch after another is ≈ 6 ms slower here.
func settle(b *testing.B, variants []*launchVariant) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for _, v := range variants {
		c := v.c
		for {
			c.poolMu.Lock()
			full := len(c.warm) >= c.cfg.WarmShims && c.filling == 0
			var pids []int
			for _, sp := range c.warm {
				pids = append(pids, sp.pid)
			}
			c.poolMu.Unlock()
			if full && cpuIdle(pids) || time.Now().After(deadline) {
				break
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

// launchVariant is one shim binary of BenchmarkLaunch and its timings.
type launchVariant struct {
	name, shim string
	userns     *subid.Range // launch into a user namespace of this range
	c          *Containerizer
	times      []time.Duration
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
