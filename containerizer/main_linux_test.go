package containerizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/containerlog"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
)

// shimBinary is the brim binary the tests start as the shim: $BRIM_BINARY
// (set by the Makefile) or one built by TestMain. smallShimBinary is the
// shim-only binary (cmd/brim-shim): $BRIM_SHIM_BINARY or built.
var shimBinary, smallShimBinary string

func TestMain(m *testing.M) {
	if os.Getenv(agentHelperEnv) != "" {
		os.Exit(runAgentHelper())
	}
	code := func() int {
		shimBinary = os.Getenv("BRIM_BINARY")
		smallShimBinary = os.Getenv("BRIM_SHIM_BINARY")
		if os.Geteuid() == 0 && (shimBinary == "" || smallShimBinary == "") {
			tmp, err := os.MkdirTemp("", "brim-containerizer-test")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(tmp)
			for _, b := range []struct {
				path *string
				pkg  string
				args []string
			}{{&shimBinary, "./cmd/brim", []string{"-tags", "seccomp"}},
				// As the Makefile builds it: static.
				{&smallShimBinary, "./cmd/brim-shim", []string{"-tags", "seccomp osusergo netgo", "-ldflags", "-extldflags -static"}}} {
				if *b.path != "" {
					continue
				}
				*b.path = filepath.Join(tmp, filepath.Base(b.pkg))
				cmd := exec.Command("go", append(append([]string{"build"}, b.args...), "-o", *b.path, b.pkg)...)
				cmd.Dir = ".."
				cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
				if err := cmd.Run(); err != nil {
					fmt.Fprintf(os.Stderr, "build %s for the shim: %v\n", b.pkg, err)
					return 1
				}
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

// cgroupIsolator is a test-only stand-in for isolator/cgroups: it creates
// the container's memory cgroup under a test parent with the memory limit
// and reads memory usage. libcontainer creates and joins the other
// controllers' groups at the same path.
type cgroupIsolator struct {
	parent string

	mu       sync.Mutex
	prepared map[string]int
	isolated map[string]int // pid
	cleaned  map[string]int
	known    map[string]isolator.Limits
}

var _ isolator.Isolator = (*cgroupIsolator)(nil)

func newCgroupIsolator(t testing.TB) *cgroupIsolator {
	return &cgroupIsolator{
		parent:   testutil.NewCgroupParent(t),
		prepared: map[string]int{}, isolated: map[string]int{}, cleaned: map[string]int{},
	}
}

func (i *cgroupIsolator) Name() string { return "test-cgroups" }

func (i *cgroupIsolator) path(id string) string { return i.parent + "/" + id }

func (i *cgroupIsolator) memDir(id string) string { return testutil.CgroupDir("memory", i.path(id)) }

// memFile names a memory file by its v1 name, translated on a v2 host.
func memFile(v1 string) string {
	if !testutil.CgroupV2() {
		return v1
	}
	return map[string]string{"memory.limit_in_bytes": "memory.max", "memory.memsw.limit_in_bytes": "memory.swap.max",
		"memory.usage_in_bytes": "memory.current"}[v1]
}

func (i *cgroupIsolator) Prepare(ctx context.Context, id string, l isolator.Limits, launch *isolator.Launch) error {
	i.mu.Lock()
	i.prepared[id]++
	i.mu.Unlock()
	if err := os.MkdirAll(i.memDir(id), 0o755); err != nil {
		return err
	}
	if err := i.setMemory(id, l.MemoryBytes); err != nil {
		return err
	}
	launch.CgroupPath = i.path(id)
	return nil
}

func (i *cgroupIsolator) setMemory(id string, bytes int64) error {
	if bytes <= 0 {
		return nil
	}
	v := []byte(strconv.FormatInt(bytes, 10))
	if testutil.CgroupV2() {
		// No swap beyond the limit, as v1's memsw = limit.
		if err := os.WriteFile(filepath.Join(i.memDir(id), "memory.swap.max"), []byte("0"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return os.WriteFile(filepath.Join(i.memDir(id), "memory.max"), v, 0)
	}
	limit := filepath.Join(i.memDir(id), "memory.limit_in_bytes")
	memsw := filepath.Join(i.memDir(id), "memory.memsw.limit_in_bytes")
	if _, err := os.Stat(memsw); err != nil {
		return os.WriteFile(limit, v, 0)
	}
	// memsw ≥ limit at all times: shrink the limit first, grow memsw first.
	if err := os.WriteFile(limit, v, 0); err != nil {
		if err := os.WriteFile(memsw, v, 0); err != nil {
			return err
		}
		return os.WriteFile(limit, v, 0)
	}
	return os.WriteFile(memsw, v, 0)
}

func (i *cgroupIsolator) Isolate(ctx context.Context, id string, pid int) error {
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		return fmt.Errorf("isolate %s: init %d: %w", id, pid, err)
	}
	i.mu.Lock()
	i.isolated[id] = pid
	i.mu.Unlock()
	return nil
}

func (i *cgroupIsolator) Update(ctx context.Context, id string, l isolator.Limits) error {
	return i.setMemory(id, l.MemoryBytes)
}

func (i *cgroupIsolator) Usage(ctx context.Context, id string, s *isolator.Statistics) error {
	data, err := os.ReadFile(filepath.Join(i.memDir(id), memFile("memory.usage_in_bytes")))
	if err != nil {
		return fmt.Errorf("usage %s: %w", id, isolator.ErrNotFound)
	}
	s.HasMemory = true
	s.MemUsageBytes, err = strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	return err
}

func (i *cgroupIsolator) Cleanup(ctx context.Context, id string) error {
	i.mu.Lock()
	i.cleaned[id]++
	i.mu.Unlock()
	for _, d := range testutil.CgroupDirs(i.path(id)) {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (i *cgroupIsolator) Recover(ctx context.Context, known map[string]isolator.Limits) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.known = known
	return nil
}

func (i *cgroupIsolator) count(m map[string]int, id string) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return m[id]
}

// env is one test's containerizer with its state dir and isolator.
type env struct {
	t        testing.TB
	stateDir string
	runDir   string // Config.RunDir ("": none)
	shim     string
	// noRecycle: Config.NoRecycleShims.
	noRecycle bool
	iso       *cgroupIsolator
	c         *Containerizer
	all       []*Containerizer // closed on cleanup
}

func newEnv(t testing.TB, stateDir string) *env {
	t.Helper()
	return newEnvWithShim(t, stateDir, shimBinary)
}

func newEnvWithShim(t testing.TB, stateDir, shim string) *env {
	t.Helper()
	return newEnvWith(t, &env{stateDir: stateDir, shim: shim})
}

// newEnvWith completes e (stateDir "": a new temporary one) for test t.
func newEnvWith(t testing.TB, e *env) *env {
	t.Helper()
	testutil.RequireRoot(t)
	if e.stateDir == "" {
		e.stateDir = t.TempDir()
	}
	e.t, e.iso = t, newCgroupIsolator(t)
	t.Cleanup(func() {
		for _, c := range e.all {
			c.Close()
		}
	})
	e.c = e.newContainerizer()
	// Runs before the cgroup parent's cleanup (registered earlier): no
	// container may outlive its test.
	t.Cleanup(func() { e.destroyAll() })
	return e
}

func (e *env) newContainerizer() *Containerizer {
	e.t.Helper()
	c, err := New(Config{
		StateDir:       e.stateDir,
		RunDir:         e.runDir,
		Isolators:      []isolator.Isolator{e.iso},
		ShimBinary:     e.shim,
		KillGrace:      2 * time.Second,
		NoRecycleShims: e.noRecycle,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.all = append(e.all, c)
	return c
}

func (e *env) destroyAll() {
	ctx := context.Background()
	infos, _ := e.c.List(ctx)
	for _, info := range infos {
		if err := e.c.Destroy(ctx, info.ID); err != nil {
			e.t.Errorf("cleanup: %v", err)
		}
	}
}

func (e *env) launch(spec Spec) *Info {
	e.t.Helper()
	if spec.ID == "" {
		spec.ID = testutil.UniqueName("ct")
	}
	info, err := e.c.Launch(context.Background(), spec)
	if err != nil {
		e.t.Fatalf("launch %s: %v", spec.ID, err)
	}
	return info
}

func (e *env) wait(id string) *ExitStatus {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := e.c.Wait(ctx, id)
	if err != nil {
		e.t.Fatalf("wait %s: %v", id, err)
	}
	return st
}

// assertGone checks that nothing of container id is left: directory,
// libcontainer state, cgroups, shim process.
func (e *env) assertGone(id string, shimPid int) {
	e.t.Helper()
	run := e.stateDir
	if e.runDir != "" {
		run = e.runDir
	}
	for _, p := range []string{filepath.Join(e.stateDir, "containers", id), filepath.Join(run, "containers", id), filepath.Join(run, "runc", id)} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			e.t.Errorf("%s still exists (stat: %v)", p, err)
		}
	}
	if dirs := testutil.CgroupDirs(e.iso.path(id)); len(dirs) > 0 {
		e.t.Errorf("cgroups left: %v", dirs)
	}
	if shimPid > 0 {
		if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", shimPid)); err == nil && strings.Contains(string(data), id) {
			e.t.Errorf("shim %d still running: %q", shimPid, data)
		}
		// A recycled shim lives on, out of the container's directory.
		if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", shimPid)); err == nil && strings.Contains(cwd, id) {
			e.t.Errorf("shim %d still in the container's directory %s", shimPid, cwd)
		}
	}
}

// readSandbox returns the container's output on stream name ("stdout" or
// "stderr"), read from its log (internal/containerlog), or the content of
// its sandbox file name.
func readSandbox(t testing.TB, info *Info, name string) string {
	t.Helper()
	if name != "stdout" && name != "stderr" {
		data, err := os.ReadFile(filepath.Join(info.SandboxDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	var out []byte
	err := containerlog.Read(context.Background(), info.LogDir, containerlog.ReadOptions{}, func(r containerlog.Record) error {
		if r.Stream.String() == name {
			out = append(out, r.Output()...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// busyboxRootfs builds a minimal root filesystem from busybox-static.
func busyboxRootfs(t testing.TB) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	testutil.Require(t, err == nil, "busybox-static not installed (make deps)")
	root := filepath.Join(t.TempDir(), "rootfs")
	for _, d := range []string{"bin", "proc", "dev", "sys", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"sh", "sleep", "ls", "cat", "echo", "touch", "true"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", app)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// agentHelperEnv makes the test binary act as an agent (runAgentHelper)
// that a test kills with SIGKILL.
const agentHelperEnv = "BRIM_TEST_AGENT_HELPER"

// agentHelperPoolEnv makes the helper agent use the real cgroup isolator
// and wait, after its launches, for warm sandboxes to be ready.
const agentHelperPoolEnv = "BRIM_TEST_AGENT_POOL"

// agentHelperHoldEnv names a phase of a warm sandbox's making
// (Containerizer.fillPhase) where the helper agent's first making stops
// for good; the helper says "ready" there instead of once a sandbox is.
const agentHelperHoldEnv = "BRIM_TEST_FILL_HOLD"

// runAgentHelper launches the containers in $BRIM_TEST_AGENT_HELPER (a
// JSON object: id → sh -c script) with a Containerizer on
// $BRIM_TEST_STATE_DIR, prints "ready" and blocks until killed.
func runAgentHelper() int {
	iso := &cgroupIsolator{
		parent:   os.Getenv("BRIM_TEST_CGROUP_PARENT"),
		prepared: map[string]int{}, isolated: map[string]int{}, cleaned: map[string]int{},
	}
	isos := []isolator.Isolator{iso}
	if os.Getenv(agentHelperPoolEnv) != "" {
		// Warm sandboxes need the real cgroup isolator.
		cg, err := cgroups.New(cgroups.Config{Parent: iso.parent})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		isos = []isolator.Isolator{cg}
	}
	netIso, err := helperNetwork()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if netIso != nil {
		isos = append(isos, netIso)
	}
	c, err := New(Config{StateDir: os.Getenv("BRIM_TEST_STATE_DIR"), Isolators: isos, ShimBinary: os.Getenv("BRIM_TEST_SHIM")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	hold := os.Getenv(agentHelperHoldEnv)
	if hold != "" {
		c.fillHold = func(phase string) {
			if phase == hold {
				fmt.Println("ready")
				select {}
			}
		}
	}
	var scripts map[string]string
	if err := json.Unmarshal([]byte(os.Getenv(agentHelperEnv)), &scripts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for id, cmd := range scripts {
		if _, err := c.Launch(context.Background(), Spec{ID: id, Command: []string{"sh", "-c", cmd}, Limits: isolator.Limits{MilliCPUs: 100, Network: netIso != nil}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if hold != "" {
		select {} // "ready" comes from the held making
	}
	if os.Getenv(agentHelperPoolEnv) != "" {
		for deadline := time.Now().Add(2 * time.Minute); ; {
			if st := c.PoolStats(); st.Ready > 0 && st.Filling == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	fmt.Println("ready")
	if netIso != nil {
		helperChurn(c)
	}
	select {}
}
