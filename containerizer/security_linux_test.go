package containerizer

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/cgroups"
)

// TestTaskCannotReachHostSecrets (issue 13): a task on the host root, as
// the default user or as root, cannot read /etc/shadow or a masked file,
// cannot list /root, gets ENOENT dialling a unix socket in a masked
// directory (the agent's), and writes its sandbox; the default user's
// task runs as that user.
func TestTaskCannotReachHostSecrets(t *testing.T) {
	testutil.RequireRoot(t)
	python, err := exec.LookPath("/usr/bin/python3")
	testutil.Require(t, err == nil, "needs python3 on the host root to dial a unix socket")
	// Outside /tmp, which the container has its own of.
	base, err := os.MkdirTemp("/var/tmp", "brim-test-sec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	// Traversable, like /run: only the mask may stop the task.
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	sockDir := filepath.Join(base, "run")
	if err := os.Mkdir(sockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A world-readable file: only the mask keeps it from the task.
	secret := filepath.Join(base, "secret")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t, filepath.Join(base, "state"))
	c, err := New(Config{
		StateDir: e.stateDir, Isolators: []isolator.Isolator{e.iso}, ShimBinary: e.shim,
		// /mnt too: the sandbox below it must still be there.
		HidePaths: append(append([]string(nil), DefaultHidePaths...), sockDir, secret, "/mnt"),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.all = append(e.all, c)
	e.c = c

	script := strings.Join([]string{
		`echo uid=$(id -u) gid=$(id -g)`,
		`cat /etc/shadow >/dev/null 2>&1 && echo shadow=read || echo shadow=denied`,
		`cat ` + secret + ` 2>/dev/null | grep -q secret && echo secret=read || echo secret=denied`,
		`ls -A /root 2>/dev/null | grep -q . && echo root=listed || echo root=hidden`,
		`ls -A /run 2>/dev/null | grep -q . && echo run=listed || echo run=hidden`,
		python + ` -c 'import socket,sys
s=socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print("socket=connected")
except FileNotFoundError: print("socket=ENOENT")
except OSError as e: print("socket=%s" % e)' ` + sock,
		`echo from-task > /mnt/sandbox/mine && echo sandbox=written`,
	}, "\n")
	for _, tc := range []struct {
		user string
		want []string
	}{
		{"nobody", []string{"uid=65534 gid=65534", "shadow=denied", "secret=denied", "root=hidden", "run=hidden", "socket=ENOENT", "sandbox=written"}},
		// Root (the agent lets it only with --allow-root-tasks) sees the
		// same masks: the masked file is mode 0000 and root has no
		// CAP_DAC_OVERRIDE.
		{"", []string{"uid=0 gid=0", "shadow=denied", "secret=denied", "root=hidden", "run=hidden", "socket=ENOENT", "sandbox=written"}},
	} {
		info := e.launch(Spec{User: tc.user, Command: []string{"sh", "-c", script}, Limits: isolator.Limits{MilliCPUs: 100}})
		if st := e.wait(info.ID); st.Code != 0 {
			t.Fatalf("user %q: exit %+v; stderr: %s\nstdout: %s", tc.user, st, readSandbox(t, info, "stderr"), readSandbox(t, info, "stdout"))
		}
		out := readSandbox(t, info, "stdout")
		for _, w := range tc.want {
			if !strings.Contains(out, w+"\n") {
				t.Errorf("user %q: output lacks %q:\n%s", tc.user, w, out)
			}
		}
		var st syscall.Stat_t
		if err := syscall.Stat(info.SandboxDir, &st); err != nil {
			t.Fatal(err)
		}
		if tc.user == "nobody" && (st.Uid != 65534 || st.Gid != 65534) {
			t.Errorf("sandbox owned by %d:%d, want the task's 65534:65534", st.Uid, st.Gid)
		}
	}
}

// TestBadUserLeavesNothing: an unknown user fails the launch before
// anything is created.
func TestBadUserLeavesNothing(t *testing.T) {
	e := newEnv(t, "")
	_, err := e.c.Launch(context.Background(), Spec{ID: testutil.UniqueName("ct"), User: "no-such-user-brim",
		Command: []string{"true"}, Limits: isolator.Limits{MilliCPUs: 100}})
	if err == nil || !strings.Contains(err.Error(), "no-such-user-brim") {
		t.Fatalf("launch as an unknown user: %v, want an error naming it", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.stateDir, "containers")); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// TestForkBombStopsAtDefaultPids (issue 13): with the cgroup isolator's
// default pids limit, a task that forks without bound stays at it.
func TestForkBombStopsAtDefaultPids(t *testing.T) {
	testutil.RequireRoot(t)
	parent := testutil.NewCgroupParent(t)
	const max = 64
	cg, err := cgroups.New(cgroups.Config{Parent: parent, DefaultPids: max})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Require(t, cg.Features().Pids, "needs the pids controller")
	c, err := New(Config{StateDir: t.TempDir(), Isolators: []isolator.Isolator{cg}, ShimBinary: shimBinary})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	t.Cleanup(func() {
		infos, _ := c.List(ctx)
		for _, info := range infos {
			_ = c.Kill(ctx, info.ID, -1)
			if err := c.Destroy(ctx, info.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	// The subshell forks 4x the limit of sleepers (and may die of a failed
	// fork); the outer shell then reports and stays.
	info, err := c.Launch(ctx, Spec{ID: testutil.UniqueName("bomb"), User: "nobody",
		Command: []string{"sh", "-c", `(for i in $(seq 1 ` + strconv.Itoa(4*max) + `); do sleep 1000 & done) 2>/dev/null; echo forked; sleep 1000`},
		Limits:  isolator.Limits{MilliCPUs: 200, MemoryBytes: 256 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if strings.Contains(readSandbox(t, info, "stdout"), "forked") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task never finished forking")
		}
	}
	pids, err := cg.PIDs(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) > max || len(pids) < max/2 {
		t.Errorf("%d processes in the container, want the fork bomb held at pids.max %d", len(pids), max)
	}
	var st isolator.Statistics
	if err := cg.Usage(ctx, info.ID, &st); err != nil {
		t.Fatal(err)
	}
	if st.PidsLimit != max {
		t.Errorf("pids limit %d, want the default %d", st.PidsLimit, max)
	}
}
