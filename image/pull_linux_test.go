package image

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/brimnode/brim/internal/testregistry"
	"github.com/brimnode/brim/internal/testutil"
)

func smallImage(t *testing.T, platform, body string) v1.Image {
	return testregistry.Image(t, platform, v1.Config{Cmd: []string{"/bin/sh"}},
		testregistry.Layer(t, tarOf(t, file("hello", body))))
}

func TestPullTLSAndAuth(t *testing.T) {
	testutil.RequireRoot(t)
	reg := testregistry.Start(t, testregistry.Options{TLS: true, Users: map[string]string{"alice": "s3cret"}})
	reg.Push(t, "secure/app:1", smallImage(t, "linux/amd64", "tls"))
	ref := reg.Ref("secure/app:1")
	tlsOnly := map[string]RegistryConfig{reg.Host: {CAFile: reg.CAFile}}

	s := openStore(t, Options{Registries: tlsOnly, AuthFile: reg.AuthFile(t, "alice", "s3cret")})
	if _, err := s.Pull(context.Background(), ref, PullOptions{}); err != nil {
		t.Fatalf("pull with CA and credentials: %v", err)
	}

	cases := map[string]struct {
		opts Options
		want error
		text string
	}{
		"no credentials":    {Options{Registries: tlsOnly}, ErrUnauthorized, reg.Host},
		"wrong credentials": {Options{Registries: tlsOnly, AuthFile: reg.AuthFile(t, "alice", "nope")}, ErrUnauthorized, reg.Host},
		"unknown CA":        {Options{AuthFile: reg.AuthFile(t, "alice", "s3cret")}, nil, "certificate signed by unknown authority"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := openStore(t, c.opts)
			_, err := s.Pull(context.Background(), ref, PullOptions{})
			if err == nil || (c.want != nil && !errors.Is(err, c.want)) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("pull = %v; want %v naming %q", err, c.want, c.text)
			}
			assertClean(t, s)
		})
	}
}

// A registry not listed as insecure is never spoken to in plain HTTP,
// although go-containerregistry would fall back to it on loopback.
func TestPullRefusesPlainHTTP(t *testing.T) {
	testutil.RequireRoot(t)
	reg := testregistry.Start(t, testregistry.Options{})
	reg.Push(t, "app:1", smallImage(t, "linux/amd64", "x"))
	s := openStore(t, Options{})
	_, err := s.Pull(context.Background(), reg.Ref("app:1"), PullOptions{})
	if !errors.Is(err, ErrInsecure) {
		t.Fatalf("pull over plain HTTP = %v, want ErrInsecure", err)
	}
	if _, err := Open(Options{Root: t.TempDir(), Registries: insecure("registry.example.com")}); !errors.Is(err, ErrInsecure) {
		t.Errorf("Open with a non-loopback insecure registry = %v, want ErrInsecure", err)
	}
}

func TestPullMultiArch(t *testing.T) {
	testutil.RequireRoot(t)
	reg := testregistry.Start(t, testregistry.Options{})
	amd := smallImage(t, "linux/amd64", "amd64")
	arm := smallImage(t, "linux/arm64", "arm64")
	idxDigest := reg.PushIndex(t, "multi:1", testregistry.Index(t, arm, amd))
	reg.PushIndex(t, "armonly:1", testregistry.Index(t, arm))
	reg.Push(t, "armsingle:1", arm)

	s := openStore(t, Options{Registries: insecure(reg.Host), Platform: "linux/amd64"})
	img, err := s.Pull(context.Background(), reg.Ref("multi:1"), PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	amdDigest, _ := amd.Digest()
	if img.Platform != "linux/amd64" || img.Digest != amdDigest.String() || img.IndexDigest != idxDigest {
		t.Errorf("pulled %s %s from index %s; want linux/amd64 %s from %s", img.Platform, img.Digest, img.IndexDigest, amdDigest, idxDigest)
	}
	for _, ref := range []string{"armonly:1", "armsingle:1"} {
		_, err := s.Pull(context.Background(), reg.Ref(ref), PullOptions{})
		var pe *PlatformError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "linux/arm64") || !strings.Contains(err.Error(), "linux/amd64") {
			t.Errorf("pull %s = %v; want a PlatformError naming both platforms", ref, err)
		}
	}
	assertClean(t, s)
}

// Each bad input is an error naming its cause, leaves nothing half-made,
// and the store pulls a good image right after.
func TestPullBadInput(t *testing.T) {
	testutil.RequireRoot(t)
	reg := testregistry.Start(t, testregistry.Options{})
	good := smallImage(t, "linux/amd64", "good")
	reg.Push(t, "good:1", good)

	corrupt := smallImage(t, "linux/amd64", "to be corrupted")
	reg.Push(t, "corrupt:1", corrupt)
	layers, _ := corrupt.Layers()
	blobDigest, _ := layers[0].Digest()
	flipBlob(t, reg.BlobPath(blobDigest.String()))

	badGzip := gzipGarbageImage(t)
	reg.Push(t, "badgzip:1", badGzip)
	hostile := testregistry.Image(t, "linux/amd64", v1.Config{},
		testregistry.Layer(t, tarOf(t, symlink("etc", "/etc"), file("etc/cron.d/evil", "x"))))
	reg.Push(t, "hostile:1", hostile)
	dotdot := testregistry.Image(t, "linux/amd64", v1.Config{},
		testregistry.Layer(t, tarOf(t, file("../../evil", "x"))))
	reg.Push(t, "dotdot:1", dotdot)

	nobody := testutil.FreeAddr(t)
	s := openStore(t, Options{Registries: insecure(reg.Host, nobody)})
	zero := "sha256:" + strings.Repeat("0", 64)
	cases := []struct {
		ref  string
		want error
		text []string
	}{
		{nobody + "/app:1", nil, []string{nobody, "connection refused"}},
		{"no.such.host.invalid/app:1", nil, []string{"no.such.host.invalid"}},
		{reg.Ref("good:nosuchtag"), ErrNotFound, []string{"good:nosuchtag"}},
		{reg.Ref("nosuchrepo:1"), ErrNotFound, []string{"nosuchrepo"}},
		{reg.Ref("good@" + zero), ErrNotFound, []string{zero}},
		{reg.Ref("corrupt:1"), ErrDigestMismatch, []string{reg.Ref("corrupt:1"), blobDigest.String()}},
		{reg.Ref("badgzip:1"), nil, []string{"gzip: "}},
		{reg.Ref("hostile:1"), ErrUnsafeLayer, []string{"etc/cron.d/evil", "symlink"}},
		{reg.Ref("dotdot:1"), ErrUnsafeLayer, []string{"../../evil"}},
		{"UPPER/case:1", ErrInvalidReference, []string{"UPPER/case"}},
	}
	for _, c := range cases {
		_, err := s.Pull(context.Background(), c.ref, PullOptions{})
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("pull %s = %v, want %v", c.ref, err, c.want)
			continue
		}
		t.Logf("%v", err)
		for _, text := range c.text {
			if !strings.Contains(err.Error(), text) {
				t.Errorf("pull %s = %q, does not name %q", c.ref, err, text)
			}
		}
		assertClean(t, s)
	}
	if len(s.List()) != 0 {
		t.Errorf("images after bad pulls: %v", s.List())
	}
	if _, err := s.Pull(context.Background(), reg.Ref("good:1"), PullOptions{}); err != nil {
		t.Errorf("pull after the bad ones: %v", err)
	}
	assertClean(t, s)
}

// flipBlob changes every byte of a stored blob, keeping its size: the
// registry serves it as it is.
func flipBlob(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// gzipGarbageImage has a layer whose blob starts like gzip, is not gzip,
// and is named by its true digest.
func gzipGarbageImage(t *testing.T) v1.Image {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(bytes.Repeat([]byte("layer"), 1000))
	_ = zw.Close()
	b := buf.Bytes()
	for i := 20; i < len(b)-8; i++ {
		b[i] ^= 0x5a
	}
	layer := static.NewLayer(b, types.OCILayer)
	return testregistry.Image(t, "linux/amd64", v1.Config{}, layer)
}

func TestPullConcurrentOnce(t *testing.T) {
	testutil.RequireRoot(t)
	reg := testregistry.Start(t, testregistry.Options{})
	shared := testregistry.Layer(t, tarOf(t, file("shared", strings.Repeat("s", 1<<20))))
	a := testregistry.Image(t, "linux/amd64", v1.Config{}, shared, testregistry.Layer(t, tarOf(t, file("a", "a"))))
	b := testregistry.Image(t, "linux/amd64", v1.Config{}, shared, testregistry.Layer(t, tarOf(t, file("b", "b"))))
	reg.Push(t, "a:1", a)
	reg.Push(t, "b:1", b)
	m := &testMetrics{}
	s := openStore(t, Options{Registries: insecure(reg.Host), Metrics: m})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		ref := reg.Ref("a:1")
		if i%2 == 1 {
			ref = reg.Ref("b:1")
		}
		wg.Go(func() {
			_, err := s.Pull(context.Background(), ref, PullOptions{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	unpacked := 0
	for _, p := range m.pulls {
		unpacked += p.Layers
	}
	if unpacked != 3 {
		t.Errorf("layers unpacked by 8 pulls of two images sharing one layer = %d, want 3", unpacked)
	}
	assertClean(t, s)
}

func TestPullMirror(t *testing.T) {
	testutil.RequireRoot(t)
	mirror := testregistry.Start(t, testregistry.Options{})
	upstream := testregistry.Start(t, testregistry.Options{})
	mirror.Push(t, "lib/app:1", smallImage(t, "linux/amd64", "from mirror"))
	upstream.Push(t, "lib/other:1", smallImage(t, "linux/amd64", "from upstream"))
	regs := insecure(mirror.Host)
	regs[upstream.Host] = RegistryConfig{Insecure: true, Mirrors: []string{mirror.Host}}
	s := openStore(t, Options{Registries: regs})

	img, err := s.Pull(context.Background(), upstream.Ref("lib/app:1"), PullOptions{})
	if err != nil {
		t.Fatalf("pull through the mirror: %v", err)
	}
	if img.Refs[0] != upstream.Ref("lib/app:1") {
		t.Errorf("refs = %v, want the upstream name", img.Refs)
	}
	if _, err := s.Pull(context.Background(), upstream.Ref("lib/other:1"), PullOptions{}); err != nil {
		t.Errorf("fall back to upstream when the mirror lacks the image: %v", err)
	}
	_, err = s.Pull(context.Background(), upstream.Ref("lib/none:1"), PullOptions{})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), mirror.Host) || !strings.Contains(err.Error(), upstream.Host) {
		t.Errorf("pull of an image neither has = %v; want ErrNotFound naming both hosts", err)
	}
	assertClean(t, s)
}

// A disk that fills during a pull: ENOSPC, nothing half-made, and the
// store pulls a small image once there is room.
func TestPullDiskFull(t *testing.T) {
	testutil.RequireRoot(t)
	reg := testregistry.Start(t, testregistry.Options{})
	big := make([]byte, 8<<20)
	_, _ = rand.Read(big)
	reg.Push(t, "big:1", testregistry.Image(t, "linux/amd64", v1.Config{},
		testregistry.Layer(t, tarOf(t, file("big", string(big))))))
	reg.Push(t, "small:1", smallImage(t, "linux/amd64", "small"))

	root := t.TempDir()
	if err := syscall.Mount("tmpfs", root, "tmpfs", 0, "size=4m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(root, syscall.MNT_DETACH) })
	s := openStore(t, Options{Root: root + "/images", Registries: insecure(reg.Host)})
	_, err := s.Pull(context.Background(), reg.Ref("big:1"), PullOptions{})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), reg.Ref("big:1")) {
		t.Fatalf("pull onto a full disk = %v, want ENOSPC naming the image", err)
	}
	assertClean(t, s)
	if _, err := s.Pull(context.Background(), reg.Ref("small:1"), PullOptions{}); err != nil {
		t.Errorf("pull after the disk filled: %v", err)
	}
	assertClean(t, s)
}

var _ io.Reader = (*hashReader)(nil)
