package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/brimnode/brim/internal/testutil"
)

// BenchmarkUnpack unpacks one gzip layer (a tar of the Go tree's
// src/cmd: ~4,400 files, ~64 MB, mostly small, as a language runtime's
// layer is) with the store and with `tar -xzf`, alternately, on the same
// disk, each run starting with nothing dirty on the disk. "unpack" is
// the unpack alone (the store checking both digests);
// "layer" the whole of a layer's making (the store's fetchLayer: unpack,
// syncfs, rename) against tar followed by `sync -f`. Each is reported as
// the median over the iterations of store/tar, in wall and in CPU time.
//
//	go test -run '^$' -bench BenchmarkUnpack -benchtime 5x ./image/
func BenchmarkUnpack(b *testing.B) {
	testutil.RequireRoot(b)
	work := testutil.DiskDir(b)
	layer, diffID, digest, size := benchLayer(b, work)
	s, err := Open(Options{Root: filepath.Join(work, "store")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	spec := layerSpec{Ref: "bench", DiffID: diffID, Digest: digest, Size: size,
		Open: func() (io.ReadCloser, error) { return os.Open(layer) }}
	var r benchRatios
	// Every run starts with nothing dirty on the disk (a syncfs before
	// it, not timed): otherwise a run's syncfs, or the kernel's
	// throttling of writers, would pay for the previous run's data. The
	// store goes first in even iterations, tar in odd ones.
	settle := func() {
		if err := syncFS(work); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		for _, sync := range []bool{false, true} {
			store := func() cost {
				settle()
				if !sync {
					return self(b, func() error {
						rc, _ := spec.Open()
						defer rc.Close()
						_, err := unpackBlob(context.Background(), filepath.Join(work, "nosync"), rc, spec)
						return err
					})
				}
				return self(b, func() error { _, _, err := s.fetchLayer(context.Background(), spec); return err })
			}
			tar := func() cost {
				settle()
				return untar(b, layer, filepath.Join(work, "tar"), sync)
			}
			var sc, tc cost
			if i%2 == 0 {
				sc, tc = store(), tar()
			} else {
				tc, sc = tar(), store()
			}
			name := "unpack"
			if sync {
				name = "layer"
			}
			r.add(name, sc, tc)
			b.StopTimer()
			for _, d := range []string{"nosync", "tar", filepath.Join("store", dirLayers, hexOf(diffID))} {
				if err := os.RemoveAll(filepath.Join(work, d)); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
	}
	r.report(b)
}

// cost is one run's wall and CPU (user+system) time.
type cost struct{ wall, cpu time.Duration }

// benchRatios keeps each iteration's store/tar ratios: the machine is
// shared and noisy, so the median and the spread are reported, not a
// ratio of sums that one slow iteration would skew.
type benchRatios struct {
	names []string
	wall  map[string][]float64
	cpu   map[string][]float64
}

func (r *benchRatios) add(name string, store, tar cost) {
	if r.wall == nil {
		r.wall, r.cpu = map[string][]float64{}, map[string][]float64{}
	}
	if _, ok := r.wall[name]; !ok {
		r.names = append(r.names, name)
	}
	r.wall[name] = append(r.wall[name], store.wall.Seconds()/tar.wall.Seconds())
	r.cpu[name] = append(r.cpu[name], store.cpu.Seconds()/tar.cpu.Seconds())
}

func (r *benchRatios) report(b *testing.B) {
	for _, n := range r.names {
		w, c := r.wall[n], r.cpu[n]
		slices.Sort(w)
		slices.Sort(c)
		b.ReportMetric(w[len(w)/2], n+"-wall-ratio")
		b.ReportMetric(c[len(c)/2], n+"-cpu-ratio")
		b.Logf("%s: store/tar wall ratios %.2f, cpu ratios %.2f", n, w, c)
	}
}

// self runs f in this process and returns its cost.
func self(b *testing.B, f func() error) cost {
	b.Helper()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	start := time.Now()
	if err := f(); err != nil {
		b.Fatal(err)
	}
	wall := time.Since(start)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	return cost{wall: wall, cpu: cpuOf(after) - cpuOf(before)}
}

func cpuOf(r syscall.Rusage) time.Duration {
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

// untar runs `tar -xzf layer -C dst` (as root: owners and modes kept),
// then `sync -f dst` when sync is set, and returns their cost (tar's
// includes its gzip child's).
func untar(b *testing.B, layer, dst string, sync bool) cost {
	b.Helper()
	if err := os.Mkdir(dst, 0o755); err != nil {
		b.Fatal(err)
	}
	cmds := [][]string{{"tar", "-xzf", layer, "-C", dst}}
	if sync {
		cmds = append(cmds, []string{"sync", "-f", dst})
	}
	var c cost
	start := time.Now()
	for _, args := range cmds {
		cmd := exec.Command(args[0], args[1:]...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s: %v: %s", args[0], err, out)
		}
		c.cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	c.wall = time.Since(start)
	return c
}

// benchLayer writes the gzip layer and returns its path, diff ID, digest
// and size.
func benchLayer(b *testing.B, work string) (path, diffID, digest string, size int64) {
	b.Helper()
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatalf("go env GOROOT: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(goroot)), "src", "cmd")
	raw := filepath.Join(work, "layer.tar")
	if out, err := exec.Command("tar", "-C", filepath.Dir(src), "-cf", raw, filepath.Base(src)).CombinedOutput(); err != nil {
		b.Fatalf("tar: %v: %s", err, out)
	}
	path = raw + ".gz"
	in, err := os.Open(raw)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	dh, ch := sha256.New(), sha256.New()
	zw := gzip.NewWriter(io.MultiWriter(out, ch))
	if _, err := io.Copy(io.MultiWriter(zw, dh), in); err != nil {
		b.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	st, err := out.Stat()
	if err != nil {
		b.Fatal(err)
	}
	return path, "sha256:" + hex.EncodeToString(dh.Sum(nil)), "sha256:" + hex.EncodeToString(ch.Sum(nil)), st.Size()
}
