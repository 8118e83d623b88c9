package integration

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/console"
)

// ptyCmd is a brim command whose stdio is the slave of a pseudo-terminal
// the test holds the master of, as a person's shell would run it: brim
// is the session leader and the terminal its controlling terminal, so a
// resize of the master sends it SIGWINCH.
type ptyCmd struct {
	t      *testing.T
	master console.Console
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	read   chan struct{} // closed once the master's reader ends
	exited chan struct{}
	err    error
}

func startPty(t *testing.T, width, height uint16, args ...string) *ptyCmd {
	t.Helper()
	master, slavePath, err := console.NewPty()
	if err != nil {
		t.Fatal(err)
	}
	if err := master.Resize(console.WinSize{Width: width, Height: height}); err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(slavePath, os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &ptyCmd{t: t, master: master, read: make(chan struct{}), exited: make(chan struct{})}
	p.cmd = exec.Command(brimBinary, args...)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = slave, slave, slave
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	go func() {
		defer close(p.read)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		master.Close()
		<-p.read
		if t.Failed() {
			t.Logf("terminal:\n%q", p.output())
		}
	})
	return p
}

func (p *ptyCmd) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitFor waits until the terminal shows s (after from bytes of output)
// and returns the output's length after it.
func (p *ptyCmd) waitFor(s string, from int) int {
	p.t.Helper()
	var at int
	eventually(p.t, "the terminal shows "+s, func() bool {
		out := p.output()
		if i := strings.Index(out[from:], s); i >= 0 {
			at = from + i + len(s)
			return true
		}
		return false
	})
	return at
}

func (p *ptyCmd) write(s string) {
	p.t.Helper()
	if _, err := p.master.Write([]byte(s)); err != nil {
		p.t.Fatal(err)
	}
}

// exitCode waits for brim to exit and returns its code.
func (p *ptyCmd) exitCode() int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		p.t.Fatal("brim did not exit")
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		p.t.Fatal(p.err)
	}
	return 0
}

// TestExecTerminal: `brim container exec -i -t` through a real
// pseudo-terminal: the command gets a terminal of its own in the
// container (with the client's size), the client's window-size changes
// reach it (SIGWINCH → resize message → TIOCSWINSZ), typed input reaches
// it, and brim exits with the command's exit code.
func TestExecTerminal(t *testing.T) {
	a := startAgent(t)
	id := a.run("--", "sleep", "600")
	p := startPty(t, 80, 24, "container", "exec", "--socket", a.Socket, "-i", "-t", id, "--",
		"sh", "-c", `tty; stty size; echo ready; while read l; do [ "$l" = quit ] && exit 3; stty size; done`)
	at := p.waitFor("ready", 0)
	head := p.output()[:at]
	if !strings.Contains(head, "/dev/pts/") {
		t.Errorf("the command has no terminal in the container: %q", head)
	}
	if !strings.Contains(head, "24 80") {
		t.Errorf("the command's terminal is not the client's size 80x24: %q", head)
	}
	if err := p.master.Resize(console.WinSize{Width: 132, Height: 43}); err != nil {
		t.Fatal(err)
	}
	// The resize travels beside the input: ask until the size is seen.
	eventually(t, "the container's terminal takes the client's new size", func() bool {
		p.write("size\n")
		time.Sleep(20 * time.Millisecond)
		return strings.Contains(p.output()[at:], "43 132")
	})
	p.write("quit\n")
	if code := p.exitCode(); code != 3 {
		t.Fatalf("brim exec exited %d, want the command's 3", code)
	}
}

// TestExecStreamsAndExitCodes: without a terminal, stdout and stderr stay
// apart, stdin is streamed and its end closes the command's stdin, the
// exit code (and 128+signal) passes through, and the command runs in the
// container's cgroups.
func TestExecStreamsAndExitCodes(t *testing.T) {
	a := startAgent(t)
	id := a.run("--", "sleep", "600")
	r := runBrim(t, "container", "exec", "--socket", a.Socket, id, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if r.code != 7 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Fatalf("exec: exit %d, stdout %q, stderr %q; want 7, out, err", r.code, r.stdout, r.stderr)
	}
	r = runBrim(t, "container", "exec", "--socket", a.Socket, id, "--", "sh", "-c", "kill -9 $$")
	if r.code != 137 {
		t.Fatalf("exec killed by SIGKILL: exit %d, want 137", r.code)
	}
	cmd := exec.Command(brimBinary, "container", "exec", "--socket", a.Socket, "-i", id, "--", "sh", "-c", "wc -c; cat /proc/self/cgroup")
	cmd.Stdin = strings.NewReader(strings.Repeat("x", 200_000))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("exec -i: %v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if strings.TrimSpace(lines[0]) != "200000" {
		t.Fatalf("exec -i counted %q bytes of stdin, want 200000", lines[0])
	}
	checkExecCgroups(t, a, id, lines[1:])
}

// statusFields are the /proc/PID/status lines an exec is compared on.
var statusFields = []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters", "Uid", "Gid"}

// namespaces are the namespaces an exec must share with the container's
// init (/proc/PID/ns/NAME).
var namespaces = []string{"mnt", "pid", "net", "ipc", "uts", "user", "cgroup"}

// privileges reads statusFields from a status file's text.
func privileges(status string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		for _, f := range statusFields {
			if k == f {
				m[k] = strings.Join(strings.Fields(v), " ")
			}
		}
	}
	return m
}

// sleepingInitStatus waits until the container init pid runs sleep (its
// set-up, or a warm sandbox's trampoline, done) and returns its
// /proc/PID/status.
func sleepingInitStatus(t *testing.T, pid int) string {
	t.Helper()
	eventually(t, "the init runs sleep (its set-up done)", func() bool {
		exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
		return strings.HasSuffix(exe, "/sleep")
	})
	init, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	return string(init)
}

// checkExecNamespaces checks that an exec in container id shares the
// namespaces of its init pid.
func checkExecNamespaces(t *testing.T, a *agentProc, id string, pid int) {
	t.Helper()
	var ns, initNS []string
	for _, n := range namespaces {
		ns = append(ns, "/proc/self/ns/"+n)
		l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/" + n)
		if err != nil {
			t.Fatal(err)
		}
		initNS = append(initNS, l)
	}
	r := runBrim(t, append([]string{"container", "exec", "--socket", a.Socket, id, "--", "readlink"}, ns...)...)
	if got := strings.Fields(r.stdout); r.code != 0 || sprint(got) != sprint(initNS) {
		t.Fatalf("exec's namespaces %v (exit %d, %s), want the init's %v", got, r.code, r.stderr, initNS)
	}
}

// checkExecCgroups checks that lines, an exec's /proc/self/cgroup (among
// other lines), put it in container id's memory, cpu and pids groups.
func checkExecCgroups(t *testing.T, a *agentProc, id string, lines []string) {
	t.Helper()
	for _, ctrl := range []string{"memory", "cpu", "pids"} {
		found := false
		for _, l := range lines {
			if f := strings.SplitN(l, ":", 3); len(f) == 3 && strings.Contains(","+f[1]+",", ","+ctrl+",") {
				found = strings.HasSuffix(f[2], a.Parent+"/"+id) || f[2] == "/"
			}
		}
		if !found {
			t.Errorf("exec'd process not in the container's %s cgroup: %q", ctrl, lines)
		}
	}
}

// TestExecConfinement: an exec has exactly the privileges of the
// container's init (capabilities, no_new_privs, seccomp, uid and gid,
// compared on their /proc/PID/status) and its namespaces, as the container's user and as
// root in a root container; --user root is refused in a container that
// does not run as root, and leaves nothing running.
func TestExecConfinement(t *testing.T) {
	a := startAgent(t, "--allow-root-tasks")
	for _, user := range []string{"nobody", "root"} {
		t.Run(user, func(t *testing.T) {
			id := a.run("--user", user, "--", "sleep", "600")
			pid := a.inspect(id).Pid
			init := sleepingInitStatus(t, pid)
			r := runBrim(t, "container", "exec", "--socket", a.Socket, id, "--", "cat", "/proc/self/status")
			if r.code != 0 {
				t.Fatalf("exec: exit %d: %s", r.code, r.stderr)
			}
			out := r.stdout
			want, got := privileges(init), privileges(out)
			if len(want) < 9 || sprint(got) != sprint(want) {
				t.Fatalf("exec's privileges differ from the init's:\nexec %v\ninit %v", got, want)
			}
			if want["NoNewPrivs"] != "1" {
				t.Errorf("the init has no no_new_privs: %v", want)
			}
			checkExecNamespaces(t, a, id, pid)
		})
	}
	id := a.run("--user", "nobody", "--", "sleep", "600")
	for _, root := range []string{"root", "0", "0:0"} {
		r := runBrim(t, "container", "exec", "--socket", a.Socket, "--user", root, id, "--", "id")
		if r.code != 1 || !strings.Contains(r.stderr, "root") || !strings.Contains(r.stderr, "not") {
			t.Errorf("exec --user %s in a nobody container: exit %d, %q; want refused (1) naming root", root, r.code, r.stderr)
		}
	}
	if procs := a.cgroupFile("pids", id, "cgroup.procs"); strings.Count(procs, "\n") != 0 {
		t.Errorf("refused execs left processes in the container: %q", procs)
	}
}

// TestExecEndsWithContainer: a running exec is killed with its container
// (rm -f leaves no process and no cgroup), and one whose session breaks
// (the agent killed) is killed by the shim.
func TestExecEndsWithContainer(t *testing.T) {
	a := startAgent(t)
	id := a.run("--", "sleep", "600")
	start := func() (*exec.Cmd, chan error) {
		cmd := exec.Command(brimBinary, "container", "exec", "--socket", a.Socket, "-i", id, "--", "sleep", "1000")
		stdin, err := cmd.StdinPipe() // held open: the session lasts
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stdin.Close() })
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		eventually(t, "the exec runs in the container", func() bool {
			return strings.Count(a.cgroupFile("pids", id, "cgroup.procs"), "\n") >= 1
		})
		return cmd, done
	}
	_, done := start()
	a.kill9()
	if err := <-done; err == nil {
		t.Error("exec returned 0 when its agent died")
	}
	eventually(t, "the shim kills the exec whose session broke", func() bool {
		return strings.Count(a.cgroupFile("pids", id, "cgroup.procs"), "\n") == 0
	})
	a.start()

	_, done = start()
	a.mustBrim("container", "rm", "-f", id)
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 137 {
			t.Errorf("exec of a removed container: %v, want exit 137 (killed)", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("exec did not end with its container")
	}
	a.assertGone(id)
}
