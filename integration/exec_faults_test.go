package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/brimnode/brim/internal/testregistry"
)

// shimPid reads the pid of container id's shim.
func (a *agentProc) shimPid(id string) int {
	a.t.Helper()
	b, err := os.ReadFile(filepath.Join(a.StateDir, "containers", id, "shim.pid"))
	if err != nil {
		a.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		a.t.Fatal(err)
	}
	return pid
}

// stdioFds lists pid's open pipes and terminals (what an exec session
// holds beside its socket; the agent's calls come and go on sockets).
func stdioFds(t *testing.T, pid int) []string {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	fds, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, fd := range fds {
		target, _ := os.Readlink(filepath.Join(dir, fd.Name()))
		if strings.HasPrefix(target, "pipe:") || strings.Contains(target, "ptmx") || strings.HasPrefix(target, "/dev/pts/") {
			out = append(out, fd.Name()+"->"+target)
		}
	}
	return out
}

// procCount counts the processes in container id (its pids cgroup).
func (a *agentProc) procCount(id string) int {
	a.t.Helper()
	return len(strings.Fields(a.cgroupFile("pids", id, "cgroup.procs")))
}

// TestExecClientKilled: an exec whose client is killed (-9) mid-session,
// with and without a terminal, ends with everything it started (a shell
// and its background and foreground children: nothing is left in the
// container), and the shim holds no more descriptors than before (no pty
// master, pipe or socket leaks).
func TestExecClientKilled(t *testing.T) {
	a := startAgent(t)
	id := a.run("--", "sleep", "600")
	shim := a.shimPid(id)
	eventually(t, "the container runs its init only", func() bool { return a.procCount(id) == 1 })
	script := `trap "" HUP; sleep 1001 & sleep 1002 & echo ready; sleep 1003`
	for _, tty := range []bool{false, true} {
		t.Run("tty="+strconv.FormatBool(tty), func(t *testing.T) {
			base := stdioFds(t, shim)
			var kill func()
			if tty {
				p := startPty(t, 80, 24, "container", "exec", "--socket", a.Socket, "-i", "-t", id, "--", "sh", "-c", script)
				p.waitFor("ready", 0)
				kill = func() { _ = p.cmd.Process.Kill(); p.exitCode() }
			} else {
				cmd := exec.Command(brimBinary, "container", "exec", "--socket", a.Socket, "-i", id, "--", "sh", "-c", script)
				stdin, err := cmd.StdinPipe() // held open: the session lasts
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { stdin.Close() })
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				kill = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
			}
			eventually(t, "the exec's shell and its three sleeps run", func() bool { return a.procCount(id) == 5 })
			// The session's own: pipes are told apart by inode.
			session := map[string]bool{}
			for _, fd := range stdioFds(t, shim) {
				session[fd] = true
			}
			for _, fd := range base {
				delete(session, fd)
			}
			if len(session) == 0 {
				t.Fatalf("the shim holds no more pipes or terminals during an exec than before (%v): the test sees no session", base)
			}
			kill()
			t.Cleanup(func() {
				if t.Failed() {
					out, _ := exec.Command("ps", "-o", "pid,ppid,pgid,sid,stat,args", "--ppid", strconv.Itoa(a.inspect(id).Pid)).CombinedOutput()
					t.Logf("container processes:\n%s\nshim's stdio: %v, before %v", out, stdioFds(t, shim), base)
				}
			})
			eventually(t, "nothing the exec started is left in the container", func() bool { return a.procCount(id) == 1 })
			eventually(t, "the shim closes the session's pipes and terminal", func() bool {
				for _, fd := range stdioFds(t, shim) {
					if session[fd] {
						return false
					}
				}
				return true
			})
		})
	}
	if st := a.inspect(id).State; st != "running" {
		t.Fatalf("the container after its execs' clients died: %s, want running", st)
	}
	// An exec that exits, its client still there, leaves what it started
	// in the background running, as docker exec does.
	r := runBrim(t, "container", "exec", "--socket", a.Socket, id, "--", "sh", "-c", "sleep 1004 >/dev/null 2>&1 & exit 0")
	if r.code != 0 {
		t.Fatalf("exec: exit %d: %s", r.code, r.stderr)
	}
	if n := a.procCount(id); n != 2 {
		t.Errorf("after an exec that started a background process and exited: %d processes, want the init and that one", n)
	}
}

// TestExecFaults: exec and attach never wait forever on a shim that does
// not answer (SIGSTOPped: the connection is accepted and nothing comes)
// nor on one without its socket, say so naming the container once, and
// an exec into a container that has exited says so.
func TestExecFaults(t *testing.T) {
	a := startAgent(t)
	done := a.run("--wait", "--", "true")
	if st := a.inspect(done).State; st != "exited" {
		t.Fatalf("the container run with --wait: %s, want exited", st)
	}
	r := a.brimWithin(hungShimBound, "container", "exec", "--socket", a.Socket, done, "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "not running") {
		t.Errorf("exec into an exited container: exit %d, %q; want 1, not running", r.code, r.stderr)
	}
	r = a.brimWithin(hungShimBound, "container", "attach", done)
	if r.code != 1 || !strings.Contains(r.stderr, "not running") {
		t.Errorf("attach to an exited container: exit %d, %q; want 1, not running", r.code, r.stderr)
	}

	hung := a.run("-d", "-i", "--", "sleep", "600")
	a.stopShimOf(hung)
	began := time.Now()
	r = a.brimWithin(hungShimBound, "container", "exec", "--socket", a.Socket, hung, "--", "true")
	t.Logf("exec through a stopped shim returned after %v", time.Since(began).Round(time.Millisecond))
	if r.code == 0 || !strings.Contains(r.stderr, "shim") || strings.Count(r.stderr, hung) != 1 {
		t.Errorf("exec through a stopped shim: exit %d, %q; want an error naming the shim", r.code, r.stderr)
	}
	t.Logf("exec through a stopped shim: %s", strings.TrimSpace(r.stderr))
	began = time.Now()
	r = a.brimWithin(hungShimBound, "container", "attach", hung)
	t.Logf("attach through a stopped shim returned after %v", time.Since(began).Round(time.Millisecond))
	if r.code == 0 || !strings.Contains(r.stderr, "shim") {
		t.Errorf("attach through a stopped shim: exit %d, %q; want an error naming the shim", r.code, r.stderr)
	}
	if n := strings.Count(r.stderr, hung); n != 1 {
		t.Errorf("attach's error names the container %d times, want once: %q", n, r.stderr)
	}
	t.Logf("attach through a stopped shim: %s", strings.TrimSpace(r.stderr))
	_ = syscall.Kill(a.shimPid(hung), syscall.SIGCONT)

	nosock := a.run("-d", "-i", "--", "sleep", "600")
	if err := os.Remove(filepath.Join(a.StateDir, "containers", nosock, "shim.sock")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"exec", "--socket", a.Socket, nosock, "--", "true"}, {"attach", nosock}} {
		r = a.brimWithin(hungShimBound, append([]string{"container"}, args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "shim.sock") {
			t.Errorf("%s through a shim without its socket: exit %d, %q; want 1 naming the socket", args[0], r.code, r.stderr)
		}
	}
}

// TestExecPaused: exec and attach into a paused container are refused at
// once, saying it is paused (an exec there joined the frozen cgroup and
// hung until the shim's deadline, then ran when the container was
// unpaused), leave nothing behind, and work again after unpause.
func TestExecPaused(t *testing.T) {
	a := startAgent(t)
	id := a.run("-d", "-i", "--", "sleep", "600")
	a.mustBrim("container", "pause", id)
	for _, args := range [][]string{{"exec", "--socket", a.Socket, id, "--", "true"}, {"attach", id}} {
		r := a.brimWithin(hungShimBound, append([]string{"container"}, args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "paused") || !strings.Contains(r.stderr, "unpause") {
			t.Errorf("%s into a paused container: exit %d, %q; want 1, paused, unpause", args[0], r.code, r.stderr)
		}
	}
	a.mustBrim("container", "unpause", id)
	if n := a.procCount(id); n != 1 {
		t.Errorf("refused execs left %d processes in the container, want its init only", n)
	}
	r := runBrim(t, "container", "exec", "--socket", a.Socket, id, "--", "sh", "-c", "exit 3")
	if r.code != 3 {
		t.Errorf("exec after unpause: exit %d, %q; want 3", r.code, r.stderr)
	}
}

// TestExecImageUser: in a container run from an image, exec's users are
// the image's (its /etc/passwd), as the container's own is: by default
// the container's user, by name with --user; never the host's entry of
// that name (the host has no "app": the exec was refused, and a name the
// host has too would have run as the host's uid).
func TestExecImageUser(t *testing.T) {
	reg := testregistry.Start(t, testregistry.Options{})
	etc := testregistry.Layer(t, testregistry.TarEntries(t,
		testregistry.Entry{Name: "etc/"},
		testregistry.Entry{Name: "etc/passwd", Body: []byte("root:x:0:0:root:/root:/bin/sh\napp:x:4242:4243:app:/:/bin/sh\nnobody:x:4244:4245:nobody:/:/bin/sh\n")},
		testregistry.Entry{Name: "etc/group", Body: []byte("root:x:0:\napp:x:4243:\nnobody:x:4245:\n")}))
	reg.Push(t, "users:1", testregistry.BusyboxImage(t, v1.Config{User: "app"}, etc))
	a := startAgent(t, "--image-insecure-registry", reg.Host)
	id := a.run("--image", reg.Ref("users:1"), "--", "sleep", "600")
	for _, tc := range []struct {
		user, want string
	}{
		{"", "4242:4243"},
		{"app", "4242:4243"},
		{"nobody", "4244:4245"}, // the host's nobody is 65534
	} {
		args := []string{"container", "exec", "--socket", a.Socket}
		if tc.user != "" {
			args = append(args, "--user", tc.user)
		}
		r := runBrim(t, append(args, id, "--", "sh", "-c", `echo $(id -u):$(id -g)`)...)
		if r.code != 0 || strings.TrimSpace(r.stdout) != tc.want {
			t.Errorf("exec --user %q in the image container: exit %d, %q %q; want %s", tc.user, r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

// startHeld starts the CLI with a stdin pipe it holds open (a session
// that lasts) and returns it; the cleanup ends it.
func startHeld(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(brimBinary, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// TestExecOthersRefused: the agent's socket is root's: another user's
// exec is refused before it reaches the agent, and runs nothing.
func TestExecOthersRefused(t *testing.T) {
	a := startAgent(t)
	id := a.run("--", "sleep", "600")
	// Let uid 65534 reach the socket itself, so that its mode decides.
	for dir := filepath.Dir(a.Socket); dir != "/" && dir != os.TempDir(); dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(brimBinary, "container", "exec", "--socket", a.Socket, id, "--", "true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "permission denied") {
		t.Errorf("exec as uid 65534: %v, %q; want exit 1, permission denied", err, out)
	}
	if n := a.procCount(id); n != 1 {
		t.Errorf("a refused exec left %d processes in the container, want its init only", n)
	}
}
