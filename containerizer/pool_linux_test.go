package containerizer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/internal/subid"
	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
)

// poolEnv is a containerizer with the real cgroup isolator (warm
// sandboxes need an isolator.Sandboxer) under a test cgroup parent.
type poolEnv struct {
	t        *testing.T
	parent   string
	stateDir string
	iso      *cgroups.Isolator
	c        *Containerizer
}

func newPoolEnv(t *testing.T, stateDir string, cfg Config) *poolEnv {
	t.Helper()
	testutil.RequireRoot(t)
	parent := testutil.NewCgroupParent(t)
	iso, err := cgroups.New(cgroups.Config{Parent: parent, DefaultPids: cgroups.DefaultPidsMax})
	if err != nil {
		t.Fatal(err)
	}
	if stateDir == "" {
		stateDir = t.TempDir()
	}
	e := &poolEnv{t: t, parent: parent, stateDir: stateDir, iso: iso}
	cfg.StateDir, cfg.Isolators, cfg.ShimBinary, cfg.HidePaths = stateDir, []isolator.Isolator{iso}, smallShimBinary, DefaultHidePaths
	if e.c, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	// Registered after the parent's: runs first.
	t.Cleanup(func() {
		ctx := context.Background()
		infos, _ := e.c.List(ctx)
		for _, info := range infos {
			if err := e.c.Destroy(ctx, info.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		e.c.Close()
	})
	return e
}

// launch launches spec and returns its info and whether it took a warm
// sandbox.
func (e *poolEnv) launch(spec Spec) (*Info, bool) {
	e.t.Helper()
	if spec.ID == "" {
		spec.ID = testutil.UniqueName("pool")
	}
	if spec.Limits.MilliCPUs == 0 {
		spec.Limits.MilliCPUs = 100
	}
	info, err := e.c.Launch(context.Background(), spec)
	if err != nil {
		e.t.Fatalf("launch %s: %v", spec.ID, err)
	}
	ct, err := e.c.get(spec.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return info, ct.sandbox != ""
}

// waitReady waits until the pool has a sandbox ready and makes none.
func (e *poolEnv) waitReady() {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st := e.c.PoolStats()
		if st.Ready > 0 && st.Filling == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no warm sandbox ready: %+v", st)
		}
		e.c.pool.wake()
		time.Sleep(20 * time.Millisecond)
	}
}

// sandboxGroups lists the warm sandboxes' groups under the parent in
// every hierarchy.
func (e *poolEnv) sandboxGroups() []string {
	var out []string
	for _, d := range testutil.CgroupDirs(e.parent) {
		ents, _ := os.ReadDir(d)
		for _, ent := range ents {
			if ent.IsDir() && strings.HasPrefix(ent.Name(), SandboxPrefix) {
				out = append(out, filepath.Join(d, ent.Name()))
			}
		}
	}
	return out
}

// sandboxDirs lists the warm sandboxes' directories in stateDir.
func sandboxDirs(stateDir string) []string {
	dirs, _ := filepath.Glob(filepath.Join(stateDir, "containers", SandboxPrefix+"*"))
	return dirs
}

// waitEmpty waits until no warm sandbox, its groups or its shims are
// left (the shims' pids, dirs in stateDir).
func (e *poolEnv) waitEmpty(what string, shims []int) {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		groups, dirs := e.sandboxGroups(), sandboxDirs(e.stateDir)
		alive := slices.DeleteFunc(slices.Clone(shims), func(pid int) bool { return !running(pid) })
		if len(groups) == 0 && len(dirs) == 0 && len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: warm sandboxes left: groups %v, dirs %v, shims %v", what, groups, dirs, alive)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readyShims returns the pids of the ready sandboxes' shims.
func (e *poolEnv) readyShims() []int {
	p := e.c.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	var pids []int
	for _, sp := range p.shapes {
		for _, sb := range sp.ready {
			pids = append(pids, sb.sp.pid)
		}
	}
	return pids
}

// readySandboxes returns the ready sandboxes.
func (e *poolEnv) readySandboxes() []*sandbox {
	p := e.c.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	var sbs []*sandbox
	for _, sp := range p.shapes {
		sbs = append(sbs, sp.ready...)
	}
	return sbs
}

// TestStuckWarmSandboxGoesCold (issue 35): a launch that takes a warm
// sandbox whose shim or trampoline never answers (stopped) gives up on it
// after WarmClaimTimeout, far below LaunchTimeout, destroys it — shim,
// init, groups, libcontainer state, directory — and launches cold, also
// when the stuck shim's trampoline would exit once the shim is killed.
func TestStuckWarmSandboxGoesCold(t *testing.T) {
	for _, stuck := range []string{"shim", "trampoline"} {
		t.Run(stuck, func(t *testing.T) {
			// A launch that waited for the stuck sandbox would fail after
			// LaunchTimeout.
			e := newPoolEnv(t, "", Config{WarmSandboxes: 1, WarmClaimTimeout: 2 * time.Second, LaunchTimeout: 40 * time.Second})
			first, _ := e.launch(Spec{Command: []string{"true"}}) // demand
			e.wait(first.ID)
			e.waitReady()
			sbs := e.readySandboxes()
			if len(sbs) != 1 {
				t.Fatalf("%d sandboxes ready, want 1", len(sbs))
			}
			sb := sbs[0]
			pid := sb.sp.pid
			if stuck == "trampoline" {
				pid = sb.pid
			}
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if running(pid) { // the test failed: the containerizer left it
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			// The killed shim's trampoline sees its message pipe close and
			// exits, if it can: give it the time a loaded machine may.
			afterClaimShimKilled = func() { time.Sleep(300 * time.Millisecond) }
			t.Cleanup(func() { afterClaimShimKilled = nil })
			info, warm := e.launch(Spec{Command: []string{"sleep", "1000"}})
			if warm {
				t.Fatalf("the launch kept the stuck sandbox %s", sb.name)
			}
			got, err := e.c.Get(context.Background(), info.ID)
			if err != nil || got.State != StateRunning {
				t.Fatalf("cold launch after the stuck sandbox: %+v, %v", got, err)
			}
			for _, p := range []int{sb.sp.pid, sb.pid} {
				if running(p) {
					t.Errorf("process %d of the stuck sandbox still runs", p)
				}
			}
			for _, d := range testutil.CgroupDirs(e.iso.Path(sb.name)) {
				t.Errorf("group %s of the stuck sandbox left", d)
			}
			if _, err := os.Stat(filepath.Join(e.c.runcRoot, sb.name)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("libcontainer state of the stuck sandbox left: %v", err)
			}
			if _, err := os.Stat(sb.dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("directory of the stuck sandbox left: %v", err)
			}
			if e.c.pool.owns(sb.name) {
				t.Errorf("the stuck sandbox %s is back in the pool", sb.name)
			}
		})
	}
}

// probeScript prints what a task can read about itself that a warm
// sandbox could get wrong: user, groups, capabilities, no_new_privs,
// seccomp, umask, namespaces' types, cgroups and their limits, masks,
// mounts, hostname, working directory, environment, descriptors,
// oom_score_adj and limits. A file reads as masked when it yields no
// byte (a /dev/null bind, as a missing one), a directory when it lists
// nothing. Mounts below the host's /tmp and /var/tmp and
// namespace files are left out: other tests on the host make and remove
// them all the time, and a container on the host root sees the host's
// mounts as they were when it was made (a warm sandbox's when the
// sandbox was made). So are /mnt/sandbox's times (made with the
// sandbox: `ls -l` once showed 14:43 for a warm task, 14:44 for a cold
// one).
const probeScript = `
grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp|Seccomp_filters|Umask):' /proc/self/status
echo "id: $(id)"
echo "ns: $(ls /proc/self/ns | tr '\n' ' ')"
echo cgroup:; cat /proc/self/cgroup
echo limits:; cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory/memory.soft_limit_in_bytes /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/cpu/cpu.shares 2>&1
echo limits-v2:; cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory.high /sys/fs/cgroup/memory.low /sys/fs/cgroup/pids.max /sys/fs/cgroup/cpu.weight /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cgroup.type 2>&1
echo view:; ls /sys/fs/cgroup /sys/fs/cgroup/memory | head -40
echo masks:; for p in /proc/kcore /proc/keys /proc/timer_list /proc/sched_debug /sys/firmware /proc/acpi /proc/scsi /etc/shadow /root /run; do if { [ -d $p ] && ls $p 2>/dev/null | grep -q .; } || { [ ! -d $p ] && [ "$(head -c1 $p 2>/dev/null | wc -c)" -gt 0 ]; }; then echo "$p readable"; else echo "$p masked"; fi; done
echo ro:; for p in /proc/sys/kernel/hostname /proc/sysrq-trigger /usr/x /tmp/x /mnt/sandbox/x; do (echo 1 > $p) 2>/dev/null && echo "$p writable" || echo "$p read-only"; done
echo mounts:; awk '$5 !~ /^\/(var\/)?tmp\// && $0 !~ / - nsfs / { s = ""; for (i = 4; i <= NF; i++) s = s " " $i; print s }' /proc/self/mountinfo
echo "hostname: $(hostname)"
echo "cwd: $(pwd)"
echo env:; env | sort
echo fds:; ls -l /proc/self/fd | awk 'NR > 1 { print $1, $9, $10, $11 }'
echo "oom_score_adj: $(cat /proc/self/oom_score_adj)"
echo rlimits:; cat /proc/self/limits
echo sandbox:; stat -c "%A %h %u %g %s %n" /mnt/sandbox
`

// normalise makes two probes comparable: the container's ID, pipe
// inodes and the pid of the probe's own ls differ between any two
// launches.
func normalise(out, id string) string {
	out = strings.ReplaceAll(out, id, "<id>")
	out = regexp.MustCompile(`pipe:\[\d+\]`).ReplaceAllString(out, "pipe:[n]")
	return regexp.MustCompile(`/proc/\d+/fd`).ReplaceAllString(out, "/proc/<ls>/fd")
}

// TestWarmLaunchIsCold (issue 35): a task made from a warm sandbox reads
// in /proc, /sys and its environment what a cold launch's task reads,
// field by field (user, groups, capabilities, no_new_privs, seccomp,
// umask, namespaces, cgroups and limits, masked and read-only paths,
// mounts, hostname, cwd, environment, descriptors, oom_score_adj,
// rlimits), as root and as another user, with and without a user
// namespace; and its init is in new namespaces of every kind a cold
// launch's is.
func TestWarmLaunchIsCold(t *testing.T) {
	userns := testRange
	for _, tc := range []struct {
		name   string
		user   string
		userns *subid.Range
	}{{"root", "", nil}, {"nobody", "nobody", nil}, {"userns-root", "", &userns}} {
		t.Run(tc.name, func(t *testing.T) {
			stateDir := ""
			if tc.userns != nil {
				base, _ := usernsBase(t)
				stateDir = filepath.Join(base, "state")
			}
			e := newPoolEnv(t, stateDir, Config{WarmSandboxes: 2})
			spec := func() Spec {
				return Spec{ID: testutil.UniqueName("same"), Command: []string{"sh", "-c", probeScript},
					User: tc.user, UserNS: tc.userns, Cwd: "/tmp", Env: []string{"A=1", "A=2", "HOME="},
					Limits: isolator.Limits{MilliCPUs: 250, MemoryBytes: 96 << 20, Pids: 77}}
			}
			var outs, nss []string
			for i, wantWarm := range []bool{false, true} {
				if wantWarm {
					e.waitReady()
				}
				info, warm := e.launch(spec())
				if warm != wantWarm {
					t.Fatalf("launch %d: warm %v, want %v", i, warm, wantWarm)
				}
				nss = append(nss, newNamespaces(t, info.Pid))
				if st := e.wait(info.ID); st.Code != 0 {
					t.Fatalf("probe %d: %+v: %s", i, st, readSandbox(t, info, "stderr"))
				}
				outs = append(outs, normalise(readSandbox(t, info, "stdout"), info.ID))
				if err := e.c.Destroy(context.Background(), info.ID); err != nil {
					t.Fatal(err)
				}
			}
			if outs[0] != outs[1] {
				t.Errorf("the warm task sees another container than the cold one:\n%s", lineDiff(outs[0], outs[1]))
			}
			if nss[0] != nss[1] {
				t.Errorf("new namespaces: cold %s, warm %s", nss[0], nss[1])
			}
			if !strings.Contains(outs[0], "/proc/kcore masked") ||
				!strings.Contains(outs[0], "limits:\n100663296") && !strings.Contains(outs[0], "limits-v2:\n100663296") {
				t.Errorf("the probe does not see what a container sees:\n%s", outs[0])
			}
		})
	}
}

// TestWarmOOMAndGroups (issue 35): a container made from a warm sandbox
// runs in the group its limits are written to (cgroup v2: the
// sandbox's, which its init never leaves), an OOM kill at its memory
// limit is reported as such (memory-limit), and its groups go when it
// exits, before the exit is recorded.
func TestWarmOOMAndGroups(t *testing.T) {
	e := newPoolEnv(t, "", Config{WarmSandboxes: 2})
	first, _ := e.launch(Spec{Command: []string{"true"}}) // demand
	e.wait(first.ID)
	e.waitReady()
	sleeper, warm := e.launch(Spec{Command: []string{"sleep", "1000"}, Limits: isolator.Limits{MilliCPUs: 100, MemoryBytes: 64 << 20}})
	if !warm {
		t.Fatal("the sleeper found no warm sandbox")
	}
	checkJoinedEverywhere(t, sleeper.Pid, e.iso.Path(sleeper.ID))
	limit, err := os.ReadFile(filepath.Join(memoryDir(e.iso.Path(sleeper.ID)), memoryLimitFile()))
	if err != nil || strings.TrimSpace(string(limit)) != strconv.Itoa(64<<20) {
		t.Errorf("the sleeper's group's memory limit: %q, %v", limit, err)
	}
	e.waitReady()
	// tail buffers /dev/zero looking for a newline that never comes.
	hog, warm := e.launch(Spec{Command: []string{"tail", "/dev/zero"}, Limits: isolator.Limits{MilliCPUs: 100, MemoryBytes: 32 << 20}})
	if !warm {
		t.Fatal("the hog found no warm sandbox")
	}
	ct, _ := e.c.get(hog.ID)
	group := e.iso.Path(hog.ID) // v2: the sandbox's
	st := e.wait(hog.ID)
	if !st.OOMKilled || st.Reason != ReasonMemoryLimit || st.Signal != 9 {
		t.Errorf("memory hog: %+v, want an OOM kill with reason %q", st, ReasonMemoryLimit)
	}
	for _, p := range []string{group, e.parent + "/" + hog.ID, e.parent + "/" + ct.sandbox} {
		if dirs := testutil.CgroupDirs(p); len(dirs) > 0 {
			t.Errorf("groups left after the container exited: %v", dirs)
		}
	}
}

// memoryDir is the memory group of cgroup path p (v1 or v2).
func memoryDir(p string) string {
	if testutil.CgroupV2() {
		return filepath.Join(testutil.CgroupRoot, p)
	}
	return filepath.Join(testutil.CgroupRoot, "memory", p)
}

// memoryLimitFile is the memory limit's file (v1 or v2).
func memoryLimitFile() string {
	if testutil.CgroupV2() {
		return "memory.max"
	}
	return "memory.limit_in_bytes"
}

// wait waits for container id's exit.
func (e *poolEnv) wait(id string) *ExitStatus {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := e.c.Wait(ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// newNamespaces names the namespaces pid is in that this process is not.
func newNamespaces(t *testing.T, pid int) string {
	t.Helper()
	var out []string
	for _, ns := range []string{"cgroup", "ipc", "mnt", "net", "pid", "user", "uts"} {
		self, err1 := os.Readlink("/proc/self/ns/" + ns)
		its, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
		if err1 != nil || err2 != nil {
			t.Fatalf("namespaces of %d: %v %v", pid, err1, err2)
		}
		if self != its {
			out = append(out, ns)
		}
	}
	return strings.Join(out, ",")
}

// lineDiff shows where a and b differ (diff -u).
func lineDiff(a, b string) string {
	dir, err := os.MkdirTemp("", "brim-diff-")
	if err != nil {
		return err.Error()
	}
	defer os.RemoveAll(dir)
	fa, fb := filepath.Join(dir, "cold"), filepath.Join(dir, "warm")
	if err := os.WriteFile(fa, []byte(a), 0o600); err != nil {
		return err.Error()
	}
	if err := os.WriteFile(fb, []byte(b), 0o600); err != nil {
		return err.Error()
	}
	out, _ := exec.Command("diff", "-u", fa, fb).CombinedOutput()
	return string(out)
}

// TestWarmSandboxNeverReused (issue 35): every launch takes another
// sandbox (its init in namespaces no other had), a sandbox leaves the
// pool when taken and is destroyed with its container (libcontainer's
// state under its name, its groups), never offered again.
func TestWarmSandboxNeverReused(t *testing.T) {
	e := newPoolEnv(t, "", Config{WarmSandboxes: 2})
	first, _ := e.launch(Spec{Command: []string{"true"}}) // demand
	e.wait(first.ID)
	var cts []*container
	mntns := make(map[string]bool) // the live inits' mount namespaces
	for i := 0; i < 4; i++ {
		e.waitReady()
		info, warm := e.launch(Spec{Command: []string{"sleep", "1000"}})
		if !warm {
			t.Fatalf("launch %d found no warm sandbox", i)
		}
		ct, _ := e.c.get(info.ID)
		for _, o := range cts {
			if o.sandbox == ct.sandbox {
				t.Fatalf("sandbox %s used twice", ct.sandbox)
			}
		}
		cts = append(cts, ct)
		if e.c.pool.owns(ct.sandbox) {
			t.Fatalf("sandbox %s still in the pool after its claim", ct.sandbox)
		}
		// Namespaces of the containers running together: never one
		// of another's (the kernel reuses a freed namespace's inode).
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", info.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if mntns[ns] {
			t.Fatalf("launch %d: mount namespace %s of another container", i, ns)
		}
		mntns[ns] = true
	}
	for _, ct := range cts {
		if err := e.c.Kill(context.Background(), ct.spec.ID, -1); err != nil {
			t.Fatal(err)
		}
		if err := e.c.Destroy(context.Background(), ct.spec.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(e.c.runcRoot, ct.sandbox)); !os.IsNotExist(err) {
			t.Errorf("libcontainer state of %s left after Destroy: %v", ct.sandbox, err)
		}
		for _, name := range []string{ct.sandbox, ct.spec.ID} {
			for _, d := range testutil.CgroupDirs(e.iso.Path(name)) {
				t.Errorf("group %s left after Destroy", d)
			}
		}
		if e.c.pool.owns(ct.sandbox) {
			t.Errorf("sandbox %s back in the pool after its container", ct.sandbox)
		}
	}
	st := e.c.PoolStats()
	if st.Claimed != 4 || st.Missed != 1 {
		t.Errorf("claimed %d, missed %d; want 4, 1", st.Claimed, st.Missed)
	}
}

// TestWarmSandboxesGoWithTheAgent (issue 35): the warm sandboxes'
// groups, shims and directories are gone after the containerizer closes
// (the agent stops), and after the agent is killed (its sandboxes
// destroy themselves when their pipe closes) and either a new agent
// recovers or `brim agent cleanup` (Teardown) runs — also when the
// agent dies in the middle of a making, held at a known phase.
func TestWarmSandboxesGoWithTheAgent(t *testing.T) {
	t.Run("stop", func(t *testing.T) {
		e := newPoolEnv(t, "", Config{WarmSandboxes: 3})
		info, _ := e.launch(Spec{Command: []string{"true"}})
		e.wait(info.ID)
		e.waitReady()
		shims := e.readyShims()
		e.c.Close()
		e.waitEmpty("after Close", shims)
	})
	for _, then := range []string{"recover", "cleanup"} {
		t.Run("kill-9-"+then, func(t *testing.T) { killAgentWithPool(t, "pool", then) })
	}
	// The agent killed while it makes a sandbox, held at a phase: after
	// its shim has the directory (no groups yet), and after the groups
	// are made (the shim waits for "prepared"). The shim removes them.
	for _, phase := range []string{"shim", "groups"} {
		t.Run("kill-9-mid-fill-"+phase, func(t *testing.T) { killAgentWithPool(t, "pool-hold-"+phase, "recover") })
	}
}

// killAgentWithPool runs an agent with warm sandboxes (startAgentHelper's
// mode), kills it with SIGKILL, waits for its sandboxes to destroy their
// processes and groups on their own, then recovers (a new agent) or
// cleans up (`brim agent cleanup`, then) and expects nothing of them left.
func killAgentWithPool(t *testing.T, mode, then string) {
	testutil.RequireRoot(t)
	parent := testutil.NewCgroupParent(t)
	stateDir := t.TempDir()
	// A real agent process (this test binary as runAgentHelper) with
	// warm sandboxes ready or being made, killed with SIGKILL.
	pid := startAgentHelper(t, stateDir, parent, `{"first": "true"}`, mode)
	e := &poolEnv{t: t, parent: parent, stateDir: stateDir}
	t.Cleanup(func() {
		// The launch's shim records its exit in the state dir, which
		// goes once it has (the agent was killed right after the launch).
		if first := readShimPid(filepath.Join(stateDir, "containers", "first")); first > 0 {
			waitPidGone(first, time.Minute)
		}
	})
	var shims []int
	for _, d := range sandboxDirs(stateDir) {
		if p := readShimPid(d); p > 0 {
			shims = append(shims, p)
		}
	}
	if len(sandboxDirs(stateDir)) == 0 || mode == "pool" && len(shims) == 0 ||
		mode == "pool-hold-groups" && len(e.sandboxGroups()) == 0 {
		t.Fatalf("the agent's warm sandboxes: dirs %v, shims %v, groups %v", sandboxDirs(stateDir), shims, e.sandboxGroups())
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The sandboxes destroy their containers and groups on their own;
	// their directories wait for the next agent or cleanup.
	for deadline := time.Now().Add(time.Minute); len(e.sandboxGroups()) > 0 || slices.ContainsFunc(shims, running); {
		if time.Now().After(deadline) {
			alive := slices.DeleteFunc(slices.Clone(shims), func(pid int) bool { return !running(pid) })
			for _, d := range sandboxDirs(stateDir) {
				log, _ := os.ReadFile(filepath.Join(d, executor.ShimLogFile))
				t.Logf("%s: %s", filepath.Base(d), log)
			}
			t.Fatalf("a minute after the agent's death: groups %v, shims %v", e.sandboxGroups(), alive)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if then == "cleanup" {
		if _, err := Teardown(context.Background(), stateDir, ""); err != nil {
			t.Fatal(err)
		}
	} else {
		iso, err := cgroups.New(cgroups.Config{Parent: parent})
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(Config{StateDir: stateDir, Isolators: []isolator.Isolator{iso}, ShimBinary: smallShimBinary})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Recover(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	e.waitEmpty("after "+then, shims)
}

// TestPoolShrinksToZero (issue 35): a shape without launches keeps no
// warm sandbox after WarmSandboxIdle, and none is kept while the host's
// available memory is under WarmSandboxMinAvailable (the threshold is
// raised here above what the host has: the reading is the host's).
func TestPoolShrinksToZero(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		e := newPoolEnv(t, "", Config{WarmSandboxes: 2, WarmSandboxIdle: 3 * time.Second})
		info, _ := e.launch(Spec{Command: []string{"true"}})
		e.wait(info.ID)
		e.waitReady()
		shims := e.readyShims()
		e.waitEmpty("idle", shims)
		if st := e.c.PoolStats(); st.Ready != 0 || st.Filling != 0 || st.MemoryBytes != 0 {
			t.Errorf("idle pool: %+v", st)
		}
	})
	t.Run("memory pressure", func(t *testing.T) {
		e := newPoolEnv(t, "", Config{WarmSandboxes: 2})
		info, _ := e.launch(Spec{Command: []string{"true"}})
		e.wait(info.ID)
		e.waitReady()
		if st := e.c.PoolStats(); st.MemoryBytes <= 0 {
			t.Errorf("ready sandboxes hold no memory: %+v", st)
		}
		shims := e.readyShims()
		e.c.pool.mu.Lock()
		e.c.pool.minAvail = memTotal() * 2
		e.c.pool.mu.Unlock()
		e.waitEmpty("memory pressure", shims)
		// Launches go on, cold, and make no sandbox.
		info, warm := e.launch(Spec{Command: []string{"true"}})
		e.wait(info.ID)
		time.Sleep(time.Second)
		if warm || e.c.PoolStats().Ready != 0 || len(e.sandboxGroups()) != 0 {
			t.Errorf("under memory pressure: warm launch %v, %+v", warm, e.c.PoolStats())
		}
	})
}

// TestPoolTarget: K per shape follows the recent launch rate and the
// time a sandbox takes to make, at most the configured bound, 0 when the
// shape is idle or the host under memory pressure.
func TestPoolTarget(t *testing.T) {
	now := time.Unix(1000, 0)
	ago := func(ds ...time.Duration) []time.Time {
		var ts []time.Time
		for _, d := range ds {
			ts = append(ts, now.Add(-d))
		}
		return ts
	}
	many := make([]time.Duration, 100)
	for i := range many {
		many[i] = time.Duration(i) * 10 * time.Millisecond
	}
	for _, tc := range []struct {
		name     string
		recent   []time.Time
		fill     time.Duration
		max      int
		pressure bool
		want     int
	}{
		{"no launch", nil, 100 * time.Millisecond, 4, false, 0},
		{"idle", ago(31 * time.Second), 100 * time.Millisecond, 4, false, 0},
		{"one launch lately", ago(20 * time.Second), 100 * time.Millisecond, 4, false, 1},
		{"one a second", ago(0, time.Second, 2*time.Second, 3*time.Second, 4*time.Second), 100 * time.Millisecond, 4, false, 2},
		{"100 a second, slow fill", ago(many...), 500 * time.Millisecond, 4, false, 4},
		{"100 a second, fast fill, high bound", ago(many...), 20 * time.Millisecond, 16, false, 2},
		{"pressure", ago(0), 100 * time.Millisecond, 4, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &pool{max: tc.max, idle: 30 * time.Second, fillTime: tc.fill}
			sp := &shapePool{recent: tc.recent}
			if got := p.target(sp, now, tc.pressure); got != tc.want {
				t.Errorf("target = %d, want %d", got, tc.want)
			}
		})
	}
}

// startAgentHelper starts this test binary as an agent (runAgentHelper)
// on stateDir and the cgroup parent, launching scripts (JSON: id → sh -c
// script), with warm sandboxes when mode is "pool", waits for its
// "ready" and returns its pid; the test kills it. Cleanup kills it too.
func startAgentHelper(t *testing.T, stateDir, parent, scripts, mode string) int {
	t.Helper()
	agent := exec.Command(os.Args[0], "-test.run=^$")
	agent.Env = append(os.Environ(), agentHelperEnv+"="+scripts,
		"BRIM_TEST_STATE_DIR="+stateDir, "BRIM_TEST_CGROUP_PARENT="+parent, "BRIM_TEST_SHIM="+smallShimBinary)
	if strings.HasPrefix(mode, "pool") {
		agent.Env = append(agent.Env, agentHelperPoolEnv+"=1")
	}
	if phase, ok := strings.CutPrefix(mode, "pool-hold-"); ok {
		agent.Env = append(agent.Env, agentHelperHoldEnv+"="+phase)
	}
	agent.Stderr = os.Stderr
	out, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = agent.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = agent.Process.Kill()
		<-done
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		logs, _ := filepath.Glob(filepath.Join(stateDir, "containers", "*", executor.ShimLogFile))
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", l, data)
		}
		t.Fatalf("agent helper: %q, %v", line, err)
	}
	return agent.Process.Pid
}

// TestWarmLaunchOfAnInstantTask: a warm launch of a task that exits at
// once succeeds and reports its exit (the shim once took the task gone
// before it looked for a trampoline that died).
func TestWarmLaunchOfAnInstantTask(t *testing.T) {
	e := newPoolEnv(t, "", Config{WarmSandboxes: 2})
	first, _ := e.launch(Spec{Command: []string{"true"}})
	e.wait(first.ID)
	for i := 0; i < 3; i++ {
		e.waitReady()
		info, warm := e.launch(Spec{Command: []string{"true"}})
		if !warm {
			t.Fatalf("launch %d found no warm sandbox", i)
		}
		if st := e.wait(info.ID); st.Code != 0 {
			t.Errorf("launch %d: %+v", i, st)
		}
	}
}

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPoolStopsOnFullStateDir: a pool whose state dir is full stops
// filling and says so once; it does not retry every round (a warning
// each quarter second, a sandbox half made and removed each time), and
// nothing of the failed makings stays. Before, each round tried again
// and logged "make warm sandbox … no space left on device".
func TestPoolStopsOnFullStateDir(t *testing.T) {
	stateDir := testutil.SmallTmpfs(t, 16<<20)
	var logs lockedBuffer
	e := newPoolEnv(t, stateDir, Config{WarmSandboxes: 2, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	free := testutil.FillDisk(t, stateDir)
	defer free()
	// The launch fails (its record cannot be written) but counts as
	// demand: the pool tries to make a sandbox of its shape.
	if _, err := e.c.Launch(context.Background(), Spec{ID: testutil.UniqueName("full"), Command: []string{"true"}, Limits: isolator.Limits{MilliCPUs: 100}}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("launch on a full state dir: %v, want ENOSPC", err)
	}
	const stops = "the pool stops filling"
	waitFor(t, func() bool {
		e.c.pool.wake()
		return strings.Contains(logs.String(), stops)
	})
	// More rounds: none may try again within the back-off.
	for range 8 {
		e.c.pool.round()
		waitFor(t, func() bool { return e.c.PoolStats().Filling == 0 })
	}
	out := logs.String()
	if n := strings.Count(out, stops); n != 1 {
		t.Errorf("%q said %d times, want once:\n%s", stops, n, out)
	}
	if strings.Contains(out, "make warm sandbox") {
		t.Errorf("the pool went on making sandboxes on a full state dir:\n%s", out)
	}
	if st := e.c.PoolStats(); st.Ready != 0 {
		t.Errorf("pool on a full state dir: %+v", st)
	}
	if dirs := sandboxDirs(stateDir); len(dirs) > 0 {
		t.Errorf("failed makings left %v", dirs)
	}
}
