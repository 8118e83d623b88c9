package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

// TestDemo runs `make demo`'s script (hack/demo.sh) against the binary
// under test: an agent with two containers and a live resize, then brim
// dev with two DRF frameworks whose dominant shares the script checks
// against the DRF paper's prediction, brim run's exit code, and a task
// from an OCI image the script builds and pushes to a loopback registry. The script
// exits non-zero when a check fails; the test also checks that it left no
// cgroup parent or temp dir behind.
func TestDemo(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.SkipUnless(t, !testing.Short(), "the demo runs real containers (not in -short)")
	_, err := exec.LookPath("jq")
	testutil.Require(t, err == nil, "jq not installed (make deps)")
	_, err = exec.LookPath("go")
	testutil.Require(t, err == nil, "go not on PATH (the demo builds examples/drf-demo)")
	for _, tool := range []string{"docker-registry", "skopeo"} {
		_, err = exec.LookPath(tool)
		testutil.Require(t, err == nil, tool+" not installed (make deps): the demo runs a task from an image it pushes to a loopback registry")
	}

	// The script names its cgroup parents after the tag and makes its temp
	// dir under TMPDIR; it removes them itself, these cleanups are for when
	// it could not.
	tag := strings.TrimPrefix(testutil.UniqueName("t"), "t-")
	parents := []string{"/brim-demo-" + tag, "/brim-demo-dev-" + tag}
	for _, p := range parents {
		t.Cleanup(func() { testutil.RemoveCgroupTree(t, p) })
	}
	tmp := t.TempDir()

	// A bound, not a timed assertion: the script itself waits at most a
	// few tens of seconds for each step.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("..", "hack", "demo.sh"))
	cmd.Env = append(os.Environ(), "BRIM_BINARY="+brimBinary, "BRIM_DEMO_TAG="+tag, "TMPDIR="+tmp)
	// On timeout, SIGTERM lets the script's trap remove what it made.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	text := out.String()
	if err != nil {
		t.Fatalf("hack/demo.sh: %v\n%s", err, text)
	}
	for _, want := range []string{
		"ok burner resized live to 1.5 cpus",
		"ok converged: A runs 3 tasks, B runs 2",
		"ok both dominant shares are 2/3, as DRF predicts",
		"ok brim run exited 3",
		"demo: all checks passed",
	} {
		if !strings.Contains(stripANSI(text), want) {
			t.Errorf("demo output lacks %q\n%s", want, text)
		}
	}

	for _, parent := range parents {
		left, err := filepath.Glob(filepath.Join(testutil.CgroupRoot, "*", parent))
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Errorf("cgroup parent %s left behind: %v", parent, left)
		}
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) > 0 {
		t.Errorf("temp dir %s left behind: %v (read dir: %v)", tmp, left, err)
	}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

func stripANSI(s string) string { return ansi.ReplaceAllString(s, "") }
