package image

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/brimnode/brim/internal/testregistry"
	"github.com/brimnode/brim/internal/testutil"
)

// childEnv makes the test binary a pulling process (see TestMain).
const childEnv = "BRIM_IMAGE_TEST_PULL"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(childPull(spec))
	}
	os.Exit(m.Run())
}

// childPull is "ROOT REF INSECURE-HOST": pull REF into the store at ROOT.
func childPull(spec string) int {
	f := strings.Fields(spec)
	s, err := Open(Options{Root: f[0], Registries: map[string]RegistryConfig{f[2]: {Insecure: true}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := s.Pull(context.Background(), f[1], PullOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// stallingProxy forwards to the registry but, for the blob named stall,
// sends its first MiB and then nothing until the test ends: a pull
// caught in the middle of a layer, deterministically.
func stallingProxy(t *testing.T, target, stall string) (host string, stalled <-chan struct{}) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{})
	var once sync.Once
	done := make(chan struct{})
	p := httputil.NewSingleHostReverseProxy(u)
	p.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method == http.MethodGet && strings.HasSuffix(resp.Request.URL.Path, "/blobs/"+stall) {
			resp.Body = &stallBody{r: resp.Body, left: 1 << 20, stalled: func() { once.Do(func() { close(ch) }) }, done: done}
		}
		return nil
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() { close(done); srv.Close() })
	return strings.TrimPrefix(srv.URL, "http://"), ch
}

type stallBody struct {
	r       io.ReadCloser
	left    int
	stalled func()
	done    <-chan struct{}
}

func (b *stallBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.stalled()
		<-b.done
		return 0, io.ErrUnexpectedEOF
	}
	if len(p) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= n
	return n, err
}

func (b *stallBody) Close() error { return b.r.Close() }

// An agent killed with SIGKILL in the middle of unpacking a layer leaves
// no layer a later pull would use: the next Open clears what it left,
// and the next pull unpacks the layer whole.
func TestPullKilledMidLayer(t *testing.T) {
	testutil.RequireRoot(t)
	reg := testregistry.Start(t, testregistry.Options{})
	big := make([]byte, 16<<20)
	_, _ = rand.Read(big)
	bigLayer := testregistry.Layer(t, tarOf(t, file("big", string(big)), file("after", "a")))
	reg.Push(t, "app:1", testregistry.Image(t, "linux/amd64", v1.Config{},
		testregistry.Layer(t, tarOf(t, file("small", "s"))), bigLayer))
	bigDigest, _ := bigLayer.Digest()
	bigDiffID, _ := bigLayer.DiffID()
	proxy, stalled := stallingProxy(t, reg.URL(), bigDigest.String())

	root := filepath.Join(t.TempDir(), "images")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+root+" "+proxy+"/app:1 "+proxy)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	select {
	case <-stalled:
	case <-time.After(2 * time.Minute):
		t.Fatal("the child never reached the big layer")
	}
	// The child has unpacked part of the layer: its file is there, short.
	partial := waitGlob(t, filepath.Join(root, dirTmp, "layer-*", "fs", "big"))
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if st, err := os.Stat(partial); err != nil || st.Size() >= int64(len(big)) {
		t.Fatalf("partial layer file: %v, %v; want one shorter than %d", st, err, len(big))
	}
	if _, err := os.Stat(filepath.Join(root, dirLayers, hexOf(bigDiffID.String()))); err == nil {
		t.Fatal("a half-unpacked layer is in the store")
	}

	s := openStore(t, Options{Root: root, Registries: insecure(reg.Host)})
	if ents, _ := os.ReadDir(filepath.Join(root, dirTmp)); len(ents) != 0 {
		t.Errorf("Open left %v in tmp", names(ents))
	}
	if len(s.List()) != 0 {
		t.Errorf("images after the killed pull: %v", s.List())
	}
	img, err := s.Pull(context.Background(), reg.Ref("app:1"), PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(s.LayerDir(img.Layers[1].DiffID), "big"))
	if err != nil || len(got) != len(big) {
		t.Errorf("big after the second pull: %d bytes, %v; want %d", len(got), err, len(big))
	}
	assertClean(t, s)
}

func waitGlob(t *testing.T, pattern string) string {
	t.Helper()
	for range 2000 {
		if m, _ := filepath.Glob(pattern); len(m) == 1 {
			return m[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("nothing matches %s", pattern)
	return ""
}
