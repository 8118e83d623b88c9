package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
)

// TestRecoveryAfterKill9: kill -9 the agent with 20 containers running,
// let some exit while it is down, start it again: all 20 are listed with the
// right state and exit codes; a container the checkpoint does not know is
// destroyed as an orphan; after destroying them nothing of theirs remains.
func TestRecoveryAfterKill9(t *testing.T) {
	a := startAgent(t)
	const n = 20
	want := map[string]int{} // id → exit code, -1 for still running
	var ids []string
	for i := 0; i < n; i++ {
		args := []string{"--cpus", "0.05", "--mem", "16", "--name", fmt.Sprintf("c%02d", i), "--"}
		if i%2 == 0 {
			args = append(args, "sleep", "600")
		} else {
			// Exits once the test creates "go" in its sandbox, while the
			// agent is down.
			args = append(args, "sh", "-c", fmt.Sprintf("while [ ! -e /mnt/sandbox/go ]; do sleep 0.05; done; exit %d", 10+i))
		}
		id := a.run(args...)
		ids = append(ids, id)
		want[id] = -1
		if i%2 == 1 {
			want[id] = 10 + i
		}
	}
	orphan := a.run("--cpus", "0.05", "--mem", "16", "--", "sleep", "600")
	orphanPid := a.inspect(orphan).Pid

	t.Logf("launched %d containers", n+1)
	sandboxes := map[string]string{}
	for _, c := range a.list() {
		sandboxes[c.ID] = c.SandboxDir
	}
	a.kill9()
	// Forget the orphan: the restarted agent has no record of it.
	if err := os.Remove(filepath.Join(a.StateDir, "checkpoint", orphan+".json")); err != nil {
		t.Fatal(err)
	}
	// Let the short tasks exit while the agent is down, and wait until
	// their cgroups hold no process any more.
	for id, code := range want {
		if code < 0 {
			continue
		}
		if err := os.WriteFile(filepath.Join(sandboxes[id], "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		procs := filepath.Join(testutil.CgroupRoot, "pids", a.Parent, id, "cgroup.procs")
		eventually(t, id+" exits", func() bool {
			b, err := os.ReadFile(procs)
			return err != nil || strings.TrimSpace(string(b)) == ""
		})
	}

	t.Logf("short tasks exited; restarting the agent")
	a.start()
	t.Logf("agent restarted")
	list := a.list()
	if len(list) != n {
		t.Fatalf("after restart: %d containers, want %d: %s", len(list), n, sprint(list))
	}
	for _, c := range list {
		code, ok := want[c.ID]
		switch {
		case !ok:
			t.Errorf("unexpected container %s", sprint(c))
		case code < 0 && (c.State != "running" || c.Pid <= 0):
			t.Errorf("%s (%s): want running, got %s", c.ID, c.Name, sprint(c))
		case code >= 0 && (c.State != "exited" || c.Exit == nil || c.Exit.Code != code):
			t.Errorf("%s (%s): want exited %d, got %s exit %s", c.ID, c.Name, code, c.State, sprint(c.Exit))
		}
	}
	// The running ones are managed again: one can be resized and killed.
	a.mustBrim("container", "update", "--mem", "32", ids[0])
	if got := a.cgroupFile("memory", ids[0], "memory.limit_in_bytes"); got != fmt.Sprint(32<<20) {
		t.Errorf("resize after recovery: memory.limit_in_bytes = %s", got)
	}
	a.mustBrim("container", "kill", "--grace", "0s", ids[0])
	if c := a.inspect(ids[0]); c.State != "exited" || c.Exit == nil || c.Exit.Signal != 9 {
		t.Errorf("kill after recovery: %s", sprint(c))
	}
	// The orphan was destroyed on recovery.
	a.assertGone(orphan)
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", orphanPid)); err == nil {
		t.Errorf("orphan's process %d still runs", orphanPid)
	}

	t.Logf("destroying")
	for _, id := range ids {
		a.mustBrim("container", "rm", "-f", id)
	}
	t.Logf("destroyed")
	for _, id := range ids {
		a.assertGone(id)
	}
	if l := a.list(); len(l) != 0 {
		t.Fatalf("after destroy: %s", sprint(l))
	}
}

// TestShutdownKeepsContainers: stopping the agent (SIGTERM) is not killing
// its containers; the next agent manages them again.
func TestShutdownKeepsContainers(t *testing.T) {
	a := startAgent(t)
	id := a.run("--name", "survivor", "--", "sh", "-c", "while [ ! -p /mnt/sandbox/fifo ]; do sleep 0.05; done; read x < /mnt/sandbox/fifo; exit 9")
	c := a.inspect(id)
	if err := syscallMkfifo(filepath.Join(c.SandboxDir, "fifo")); err != nil {
		t.Fatal(err)
	}
	a.stop()
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", c.Pid)); err != nil {
		t.Fatalf("container process %d gone after agent shutdown: %v", c.Pid, err)
	}
	a.start()
	if got := a.inspect("survivor"); got.State != "running" || got.Pid != c.Pid {
		t.Fatalf("after restart: %s", sprint(got))
	}
	// Let it exit through the fifo and check the new agent records it.
	f, err := os.OpenFile(filepath.Join(c.SandboxDir, "fifo"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("go\n"))
	f.Close()
	if w := a.brim("container", "wait", "survivor"); w.code != 9 {
		t.Fatalf("wait after restart: %d %q", w.code, w.stderr)
	}
}

// syscallMkfifo makes a FIFO the task (the agent's default user) can read.
func syscallMkfifo(path string) error { return syscall.Mkfifo(path, 0o644) }

// TestRecoveryQuarantinesCorruptCheckpoint: one torn checkpoint record
// does not stop the agent (kill -9, restart): the other container is
// recovered, the torn record is reported in the log and by `brim agent
// info`, its container keeps running and is listed, update refuses it and
// `rm -f` removes it with its record.
func TestRecoveryQuarantinesCorruptCheckpoint(t *testing.T) {
	a := startAgent(t)
	good := a.run("--cpus", "0.05", "--mem", "16", "--name", "good", "--", "sleep", "600")
	bad := a.run("--cpus", "0.05", "--mem", "16", "--name", "bad", "--", "sleep", "600")
	badPid := a.inspect(bad).Pid
	a.kill9()
	rec := filepath.Join(a.StateDir, "checkpoint", bad+".json")
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rec, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	a.start()

	if c := a.inspect("good"); c.State != "running" || c.ID != good {
		t.Fatalf("good after restart: %s", sprint(c))
	}
	if c := a.inspect(bad); c.State != "running" || c.Pid != badPid {
		t.Fatalf("quarantined container after restart: %s, want running as pid %d", sprint(c), badPid)
	}
	if out := a.mustBrim("container", "inspect", bad); !strings.Contains(out, `"quarantine": "parse checkpoint `+bad+`.json`) {
		t.Errorf("inspect shows no quarantine: %s", out)
	}
	if out := a.mustBrim("agent", "info"); !strings.Contains(out, "quarantined record") || !strings.Contains(out, rec) {
		t.Errorf("agent info does not report %s: %s", rec, out)
	}
	if log, _ := os.ReadFile(a.logPath); !strings.Contains(string(log), "quarantined unreadable checkpoint record") {
		t.Errorf("agent log does not report the record")
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", badPid)); err != nil {
		t.Fatalf("quarantined container's process %d gone: %v", badPid, err)
	}
	if r := a.brim("container", "update", "--mem", "32", bad); r.code == 0 || !strings.Contains(r.stderr, "quarantined") {
		t.Errorf("update of a quarantined container: exit %d: %s", r.code, r.stderr)
	}
	a.mustBrim("container", "rm", "-f", bad)
	a.assertGone(bad)
	if _, err := os.Stat(rec); !os.IsNotExist(err) {
		t.Errorf("rm left the quarantined record: %v", err)
	}
	if out := a.mustBrim("agent", "info"); strings.Contains(out, "quarantined record") {
		t.Errorf("agent info after rm: %s", out)
	}
	a.mustBrim("container", "rm", "-f", good)
	a.assertGone(good)
}
