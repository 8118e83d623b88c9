package integration

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/brimnode/brim/containerizer"
	"github.com/brimnode/brim/internal/testutil"
)

// TestBadInput: each bad input gets a clear error naming the problem, a
// non-zero exit, and leaves nothing behind.
func TestBadInput(t *testing.T) {
	a := startAgent(t)
	expect := func(r result, code int, parts ...string) {
		t.Helper()
		if r.code != code {
			t.Errorf("exit %d, want %d (stderr %q)", r.code, code, r.stderr)
		}
		for _, p := range parts {
			if !strings.Contains(r.stderr, p) {
				t.Errorf("stderr %q does not contain %q", r.stderr, p)
			}
		}
	}
	// Warm sandboxes (named containerizer.SandboxPrefix…, which no
	// container ID may start with) are the agent's own inventory, made
	// ahead of launches whatever their input: not something a bad input
	// left. Everything else counts.
	warm := func(name string) bool { return strings.HasPrefix(name, containerizer.SandboxPrefix) }
	nothingLeft := func() {
		t.Helper()
		if l := a.list(); len(l) != 0 {
			t.Errorf("containers left: %s", sprint(l))
		}
		for _, sub := range []string{"checkpoint", "containers"} {
			ents, _ := os.ReadDir(filepath.Join(a.StateDir, sub))
			ents = slices.DeleteFunc(ents, func(e os.DirEntry) bool { return sub == "containers" && warm(e.Name()) })
			if len(ents) != 0 {
				t.Errorf("%s left in %s", sprint(ents), sub)
			}
		}
		dirs, _ := filepath.Glob(filepath.Join(testutil.CgroupRoot, "*", a.Parent, "*", "cgroup.procs"))
		dirs = slices.DeleteFunc(dirs, func(d string) bool { return warm(filepath.Base(filepath.Dir(d))) })
		if len(dirs) != 0 {
			t.Errorf("container cgroups left: %v", dirs)
		}
	}

	t.Run("malformed resources", func(t *testing.T) {
		state := filepath.Join(t.TempDir(), "state")
		r := runBrim(t, "agent", "--state-dir", state, "--socket", filepath.Join(t.TempDir(), "s.sock"), "--resources", "cpus:2;mem:lots")
		expect(r, 2, "mem:lots")
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("state dir created: %v", err)
		}
	})
	t.Run("bad security flags", func(t *testing.T) {
		for _, tc := range []struct {
			flags []string
			parts []string
		}{
			{[]string{"--default-user", "no-such-user-brim"}, []string{"no-such-user-brim"}},
			{[]string{"--default-user", "root"}, []string{"root", "--allow-root-tasks"}},
			{[]string{"--default-pids", "-1"}, []string{"--default-pids"}},
			{[]string{"--hide-paths", "etc/shadow"}, []string{"etc/shadow"}},
		} {
			state := filepath.Join(t.TempDir(), "state")
			args := append([]string{"agent", "--state-dir", state, "--socket", filepath.Join(t.TempDir(), "s.sock")}, tc.flags...)
			expect(runBrim(t, args...), 2, tc.parts...)
			if _, err := os.Stat(state); !os.IsNotExist(err) {
				t.Errorf("%v: state dir created: %v", tc.flags, err)
			}
		}
	})
	t.Run("io throttle without a disk", func(t *testing.T) {
		// A QoS controller that throttles io throttles the state dir's
		// disk: on tmpfs there is none.
		shm, err := os.MkdirTemp("/dev/shm", "brim-it-")
		if err != nil {
			t.Fatalf("no /dev/shm for a tmpfs state dir: %v", err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(shm) })
		state := filepath.Join(shm, "state")
		r := runBrim(t, "agent", "--state-dir", state, "--socket", filepath.Join(t.TempDir(), "s.sock"),
			"--qos", "interference", "--qos-opt", "io-throttle=1048576")
		expect(r, 1, "io-throttle", "not a block device")
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("state dir created: %v", err)
		}
	})
	t.Run("unknown container", func(t *testing.T) {
		for _, sub := range [][]string{{"kill"}, {"wait"}, {"logs"}, {"stats"}, {"inspect"}, {"rm"}, {"update", "--mem", "10"}} {
			expect(a.brim(append(append([]string{"container"}, sub...), "nosuch")...), 1, `container "nosuch" not found`)
		}
	})
	t.Run("command not found", func(t *testing.T) {
		expect(a.brim("container", "run", "--", "/no/such/command"), 1, "/no/such/command", "not found")
		expect(a.brim("container", "run", "--", "no-such-command-xyz"), 1, "no-such-command-xyz", "not found")
		nothingLeft()
	})
	t.Run("more resources than the agent has", func(t *testing.T) {
		expect(a.brim("container", "run", "--cpus", "4", "--", "true"), 1, "insufficient resources: asked cpus:4, free cpus:2")
		expect(a.brim("container", "run", "--mem", "4096", "--", "true"), 1, "insufficient resources: asked mem:4096, free mem:2048")
		nothingLeft()
	})
	t.Run("duplicate name", func(t *testing.T) {
		id := a.run("--name", "dup", "--", "sleep", "600")
		expect(a.brim("container", "run", "--name", "dup", "--", "sleep", "600"), 1, `"dup"`, "already in use", id)
		if l := a.list(); len(l) != 1 {
			t.Errorf("want 1 container, got %s", sprint(l))
		}
		a.mustBrim("container", "rm", "-f", "dup")
		a.assertGone(id)
		nothingLeft()
	})
	t.Run("dead socket", func(t *testing.T) {
		dir := t.TempDir()
		missing := filepath.Join(dir, "missing.sock")
		expect(runBrim(t, "container", "ls", "--socket", missing), 1,
			"cannot reach the agent at "+missing, "no such file or directory", "(is brim agent running?)")
		stale := filepath.Join(dir, "stale.sock")
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		l.SetUnlinkOnClose(false)
		l.Close()
		expect(runBrim(t, "container", "run", "--socket", stale, "--", "true"), 1,
			"cannot reach the agent at "+stale, "connection refused")
	})
	t.Run("second agent on a live socket", func(t *testing.T) {
		state := filepath.Join(t.TempDir(), "state")
		expect(runBrim(t, "agent", "--state-dir", state, "--socket", a.Socket, "--cgroup-parent", a.Parent+"-x", "--resources", "cpus:1;mem:100"),
			1, "another agent is running", a.Socket)
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("state dir created: %v", err)
		}
		if c, err := net.Dial("unix", a.Socket); err != nil {
			t.Errorf("the first agent's socket is gone: %v", err)
		} else {
			c.Close()
		}
	})
	t.Run("usage errors", func(t *testing.T) {
		expect(a.brim("container", "run"), 2, "give a command (-- CMD [ARG…]) or an --image")
		expect(a.brim("container", "run", "--cpus", "-1", "--", "true"), 2, "--cpus")
		expect(a.brim("container", "run", "--cpus", "abc", "--", "true"), 2, "--cpus")
		expect(a.brim("container", "update", "x"), 2, "--cpus, --mem, --pids")
		expect(a.brim("container", "kill"), 2, "accepts 1 arg")
		expect(a.brim("container", "run", "--name", "bad name", "--", "true"), 1, `name "bad name"`)
		expect(a.brim("container", "run", "--env", "NOEQUALS", "--", "true"), 1, `env "NOEQUALS"`)
		expect(a.brim("container", "run", "--rootfs", "/no/such/rootfs", "--", "true"), 1, `rootfs "/no/such/rootfs"`)
		nothingLeft()
	})
}
