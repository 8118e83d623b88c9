package containerizer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/brimnode/brim/image"
	"github.com/brimnode/brim/internal/testregistry"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
)

// BenchmarkImageLaunch measures what running from an image costs a launch
// (issue 32), each figure beside the same launch on the host root
// (read-only bind of /, the agent's masked paths) in the same iteration,
// with the same containerizer, shim (brim-shim), cgroup isolator and
// warm-shim pool:
//   - cold: pull of a 3-layer busybox image from a registry on loopback
//     into an empty cache, then the first launch from it (Launch from the
//     call to "user process running", as BenchmarkLaunch);
//   - warm: a launch from the cached image (the snapshot's Prepare, the
//     overlay mount in the shim's namespace, its mount points) against a
//     launch on the host root: warm/host-root p50 is the cost of overlay
//     per launch (goal ≤ 1.1);
//   - burst: 20 launches at once from the one image, against 20 at once
//     on the host root: the wall time until all run, and its ratio;
//   - userns: a warm launch from the image into a user namespace (its
//     layers id-mapped), against the warm launch without one.
//
// Order within an iteration is random, and each launch waits until the
// warm shims have settled (see settle).
func BenchmarkImageLaunch(b *testing.B) {
	testutil.RequireRoot(b)
	parent := testutil.NewCgroupParent(b)
	cg, err := cgroups.New(cgroups.Config{Parent: parent, DefaultPids: cgroups.DefaultPidsMax})
	if err != nil {
		b.Fatal(err)
	}
	reg := testregistry.Start(b, testregistry.Options{})
	ref := reg.Ref("bench:1")
	reg.Push(b, "bench:1", benchImage(b))
	pullOpts := image.Options{Registries: map[string]image.RegistryConfig{reg.Host: {Insecure: true}}}
	stateDir := traversableTempDir(b) // the user namespace's root reaches the containers
	steady := pullOpts
	steady.Root = filepath.Join(stateDir, "images")
	store, err := image.Open(steady)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	c, err := New(Config{StateDir: stateDir, Isolators: []isolator.Isolator{cg}, ShimBinary: smallShimBinary,
		HidePaths: DefaultHidePaths, Images: store})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx := context.Background()
		infos, _ := c.List(ctx)
		for _, info := range infos {
			_ = c.Kill(ctx, info.ID, -1)
			if err := c.Destroy(ctx, info.ID); err != nil {
				b.Errorf("cleanup: %v", err)
			}
		}
		c.Close()
	})
	variants := []*launchVariant{{name: "image", c: c}}
	bn := &imageBench{b: b, c: c, store: store, ref: ref, limits: isolator.Limits{MilliCPUs: 100}}
	b.ResetTimer()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		for _, k := range rand.Perm(3) {
			settle(b, variants)
			switch k {
			case 0:
				bn.cold(stateDir, pullOpts, i)
				settle(b, variants)
				bn.host = append(bn.host, bn.launch(Spec{}))
			case 1:
				userns := testRange
				for _, j := range rand.Perm(3) {
					settle(b, variants)
					switch j {
					case 0:
						bn.warm = append(bn.warm, bn.launch(Spec{Image: bn.img.ID}))
					case 1:
						bn.host = append(bn.host, bn.launch(Spec{}))
					case 2:
						bn.userns = append(bn.userns, bn.launch(Spec{Image: bn.img.ID, UserNS: &userns}))
					}
				}
			case 2:
				for _, j := range rand.Perm(2) {
					settle(b, variants)
					if j == 0 {
						bn.burstImage = append(bn.burstImage, bn.burst(Spec{Image: bn.img.ID}))
					} else {
						bn.burstHost = append(bn.burstHost, bn.burst(Spec{}))
					}
				}
			}
		}
	}
	bn.report()
}

// burstN is how many containers a burst launches at once.
const burstN = 20

type imageBench struct {
	b      *testing.B
	c      *Containerizer
	store  *image.Store
	ref    string
	img    image.Image
	limits isolator.Limits

	coldTimes, warm, host []time.Duration
	userns                []time.Duration
	burstImage, burstHost []time.Duration
}

// benchImage is busybox under two small layers: three in all.
func benchImage(b *testing.B) v1.Image {
	mid := testregistry.Layer(b, testregistry.TarEntries(b, testregistry.Entry{Name: "etc/"},
		testregistry.Entry{Name: "etc/motd", Body: []byte("bench\n")}))
	top := testregistry.Layer(b, testregistry.TarEntries(b, testregistry.Entry{Name: "srv/"},
		testregistry.Entry{Name: "srv/app", Body: make([]byte, 64<<10)}))
	return testregistry.BusyboxImage(b, v1.Config{Cmd: []string{"sleep", "1000"}}, mid, top)
}

// cold pulls the image into a fresh, empty cache and launches it, timed
// from the pull's call to the user process running; the container and
// the cache go untimed. The steady store (bn.store) then gets the image
// for the warm and burst launches.
func (bn *imageBench) cold(stateDir string, opts image.Options, i int) {
	b := bn.b
	opts.Root = filepath.Join(b.TempDir(), "cold")
	s, err := image.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	// A containerizer on the cold store, sharing the state dir's layout
	// but not its containers: its own subdirectory.
	c, err := New(Config{StateDir: filepath.Join(stateDir, fmt.Sprintf("cold-%d", i)), Isolators: bn.c.cfg.Isolators,
		ShimBinary: smallShimBinary, Images: s, WarmShims: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	settle(b, []*launchVariant{{c: c}})
	ctx := context.Background()
	id := testutil.UniqueName("cold")
	b.StartTimer()
	start := time.Now()
	img, err := s.Pull(ctx, bn.ref, image.PullOptions{})
	if err == nil {
		_, err = c.Launch(ctx, Spec{ID: id, Image: img.ID, Command: img.Config.Cmd, Env: img.Config.Env, Limits: bn.limits})
	}
	d := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	bn.coldTimes = append(bn.coldTimes, d)
	if err := c.Kill(ctx, id, -1); err != nil {
		b.Fatal(err)
	}
	if err := c.Destroy(ctx, id); err != nil {
		b.Fatal(err)
	}
	if bn.img.ID == "" {
		if bn.img, err = bn.store.Pull(ctx, bn.ref, image.PullOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// launch times one launch of spec (sleep 1000), then kills and destroys
// it untimed.
func (bn *imageBench) launch(spec Spec) time.Duration {
	b := bn.b
	bn.needImage()
	ctx := context.Background()
	spec.ID, spec.Command, spec.Limits = testutil.UniqueName("bench"), []string{"sleep", "1000"}, bn.limits
	b.StartTimer()
	start := time.Now()
	_, err := bn.c.Launch(ctx, spec)
	d := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if err := bn.c.Kill(ctx, spec.ID, -1); err != nil {
		b.Fatal(err)
	}
	if err := bn.c.Destroy(ctx, spec.ID); err != nil {
		b.Fatal(err)
	}
	return d
}

// burst times burstN launches of spec at once, until the last runs;
// then kills and destroys them untimed.
func (bn *imageBench) burst(spec Spec) time.Duration {
	b := bn.b
	bn.needImage()
	ctx := context.Background()
	ids := make([]string, burstN)
	errs := make([]error, burstN)
	var wg sync.WaitGroup
	b.StartTimer()
	start := time.Now()
	for i := range ids {
		s := spec
		s.ID, s.Command, s.Limits = testutil.UniqueName("burst"), []string{"sleep", "1000"}, bn.limits
		ids[i] = s.ID
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = bn.c.Launch(ctx, s)
		}()
	}
	wg.Wait()
	d := time.Since(start)
	b.StopTimer()
	for i, id := range ids {
		if errs[i] != nil {
			b.Fatal(errs[i])
		}
		if err := bn.c.Kill(ctx, id, -1); err != nil {
			b.Fatal(err)
		}
		if err := bn.c.Destroy(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	return d
}

// needImage pulls the image into the steady store if a cold round has
// not yet.
func (bn *imageBench) needImage() {
	if bn.img.ID != "" {
		return
	}
	img, err := bn.store.Pull(context.Background(), bn.ref, image.PullOptions{})
	if err != nil {
		bn.b.Fatal(err)
	}
	bn.img = img
}

func (bn *imageBench) report() {
	b := bn.b
	host := percentile(bn.host, 50)
	b.ReportMetric(ms(host), "host-root-p50-ms")
	b.ReportMetric(ms(percentile(bn.coldTimes, 50)), "cold-pull+launch-p50-ms")
	b.ReportMetric(float64(percentile(bn.coldTimes, 50))/float64(host), "cold/host-root-p50-ratio")
	warm := percentile(bn.warm, 50)
	b.ReportMetric(ms(warm), "warm-image-p50-ms")
	b.ReportMetric(ms(percentile(bn.warm, 90)), "warm-image-p90-ms")
	b.ReportMetric(float64(warm)/float64(host), "warm/host-root-p50-ratio")
	b.ReportMetric(ms(percentile(bn.userns, 50)), "warm-image-userns-p50-ms")
	b.ReportMetric(float64(percentile(bn.userns, 50))/float64(warm), "userns/warm-image-p50-ratio")
	bi, bh := percentile(bn.burstImage, 50), percentile(bn.burstHost, 50)
	b.ReportMetric(ms(bi), "burst20-image-p50-ms")
	b.ReportMetric(ms(bh), "burst20-host-root-p50-ms")
	b.ReportMetric(float64(bi)/float64(bh), "burst20-image/host-root-p50-ratio")
}
