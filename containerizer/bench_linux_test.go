package containerizer

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// BenchmarkLaunch measures Launch with the full brim binary as the shim
// (shim=brim, the default) and with the shim-only binary
// (shim=brim-shim), from the API call to "user process
// running" (the init released to exec it, as `runc run -d` returns after
// `runc start`), on a busybox rootfs. When /usr/sbin/runc (or runc in PATH)
// exists, the same run measures `runc run -d` on an equivalent bundle
// (same rootfs, read-only, same namespaces, an absolute cgroup path under
// the same test parent), interleaved with brim's launches so that both see
// the same machine load, and reports the p50 ratio brim/runc.
func BenchmarkLaunch(b *testing.B) {
	b.Run("shim=brim", func(b *testing.B) { benchmarkLaunch(b, shimBinary) })
	b.Run("shim=brim-shim", func(b *testing.B) { benchmarkLaunch(b, smallShimBinary) })
}

func benchmarkLaunch(b *testing.B, shim string) {
	e := newEnvWithShim(b, "", shim)
	rootfs := busyboxRootfs(b)
	runc, _ := exec.LookPath("runc")
	var runcBundle, runcRoot string
	if runc != "" {
		runcBundle, runcRoot = runcBundleDir(b, runc, rootfs)
	}
	ctx := context.Background()
	var brim, ref []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := testutil.UniqueName("bench")
		start := time.Now()
		if _, err := e.c.Launch(ctx, Spec{ID: id, Command: []string{"sleep", "1000"}, Rootfs: rootfs, Limits: isolator.Limits{MilliCPUs: 100}}); err != nil {
			b.Fatal(err)
		}
		brim = append(brim, time.Since(start))
		b.StopTimer()
		if err := e.c.Kill(ctx, id, -1); err != nil {
			b.Fatal(err)
		}
		if err := e.c.Destroy(ctx, id); err != nil {
			b.Fatal(err)
		}
		if runc != "" {
			ref = append(ref, runcRun(b, runc, runcRoot, runcBundle, e.iso.path(id+"-runc"), id+"-runc"))
		}
		b.StartTimer()
	}
	b.StopTimer()
	p50, p90 := percentile(brim, 50), percentile(brim, 90)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p90), "p90-ms")
	if len(ref) > 0 {
		r50, r90 := percentile(ref, 50), percentile(ref, 90)
		b.ReportMetric(ms(r50), "runc-p50-ms")
		b.ReportMetric(ms(r90), "runc-p90-ms")
		b.ReportMetric(float64(p50)/float64(r50), "p50-ratio-vs-runc")
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func percentile(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

// runcBundleDir writes a `runc spec` bundle running sleep on rootfs.
func runcBundleDir(b *testing.B, runc, rootfs string) (bundle, root string) {
	dir := b.TempDir()
	bundle, root = filepath.Join(dir, "bundle"), filepath.Join(dir, "root")
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		b.Fatalf("runc spec: %v: %s", err, out)
	}
	var spec specs.Spec
	data, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err == nil {
		err = json.Unmarshal(data, &spec)
	}
	if err != nil {
		b.Fatal(err)
	}
	spec.Root = &specs.Root{Path: rootfs, Readonly: true}
	spec.Process.Terminal = false
	spec.Process.Args = []string{"sleep", "1000"}
	if data, err = json.Marshal(&spec); err == nil {
		err = os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644)
	}
	if err != nil {
		b.Fatal(err)
	}
	return bundle, root
}

// runcRun times `runc run -d` of one container (with its cgroup at the
// absolute path cgroupPath), then kills and deletes it untimed.
func runcRun(b *testing.B, runc, root, bundle, cgroupPath, id string) time.Duration {
	// The cgroup path is per container: rewrite it into a copy of the
	// config (untimed).
	var spec specs.Spec
	data, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err == nil {
		err = json.Unmarshal(data, &spec)
	}
	if err != nil {
		b.Fatal(err)
	}
	spec.Linux.CgroupsPath = cgroupPath
	ctBundle := filepath.Join(filepath.Dir(bundle), id)
	if err := os.MkdirAll(ctBundle, 0o755); err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(ctBundle)
	if data, err = json.Marshal(&spec); err == nil {
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
