package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/brimnode/brim/internal/testutil"
)

// The lifecycle commands of issue 33 against a real agent: ls filters and
// formats, top, pause (the freezer), stop of a paused container, restart
// (same ID and name, a new process, the logs kept).
func TestContainerLifecycleCommands(t *testing.T) {
	a := startAgent(t)
	web := a.run("--name", "web", "--label", "app=web", "--", "sh", "-c", "echo run; exec sleep 1000")
	job := a.run("--name", "job", "--label", "app=batch", "--", "true")
	eventually(t, "job exits", func() bool { return a.inspect(job).State == "exited" })

	expect := func(r result, code int, stdout string) {
		t.Helper()
		if r.code != code || r.stdout != stdout {
			t.Errorf("exit %d, stdout %q (stderr %q); want %d, %q", r.code, r.stdout, r.stderr, code, stdout)
		}
	}
	expect(a.brim("container", "ls", "--filter", "state=running", "--format", "{{.ID}} {{.Name}}"), 0, web+" web\n")
	expect(a.brim("container", "ls", "-f", "label=app", "-f", "name=^j", "-q"), 0, job+"\n")
	expect(a.brim("container", "ls", "-f", "state=exited", "-f", "state=running", "-f", "label=app=web", "--format", "{{.Name}} {{.Label \"app\"}}"), 0, "web web\n")
	r := a.brim("container", "ls", "-f", "state=exited", "--format", "json")
	var row map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &row); err != nil || row["Name"] != "job" || row["Exit"] != "0" || row["CPUMode"] != "shares" {
		t.Errorf("ls --format json: %q, %v", r.stdout, err)
	}

	top := a.mustBrim("container", "top", "web")
	if !regexp.MustCompile(`(?m)^PID\s+PPID\s+USER\s+STAT\s+TIME\s+CMD\n\d+\s+\d+\s+nobody\s+S\s+00:00:00\s+sleep 1000$`).MatchString(top) {
		t.Errorf("top:\n%s", top)
	}

	expect(a.brim("container", "pause", "web"), 0, "web\n")
	if s := strings.TrimSpace(a.cgroupFile("freezer", web, "freezer.state")); s != "FROZEN" {
		t.Errorf("paused: freezer.state %s", s)
	}
	expect(a.brim("container", "ls", "-f", "state=paused", "-q"), 0, web+"\n")
	if r := a.brim("container", "pause", "web"); r.code != 1 || !strings.Contains(r.stderr, "container is paused") {
		t.Errorf("second pause: %+v", r)
	}
	// A stop thaws first: SIGTERM (ignored by the container's init),
	// then SIGKILL after -t.
	expect(a.brim("container", "stop", "-t", "1", "web"), 0, "web\n")
	if c := a.inspect(web); c.State != "exited" || c.Exit == nil || c.Exit.Signal != 9 {
		t.Errorf("stopped paused container: %+v", c)
	}

	before := a.inspect(web)
	expect(a.brim("container", "restart", "web"), 0, "web\n")
	after := a.inspect(web)
	if after.ID != web || after.State != "running" || after.Pid == 0 || after.Pid == before.Pid || after.Exit != nil {
		t.Errorf("restarted: %+v (before %+v)", after, before)
	}
	var v struct{ Restarts int }
	_ = json.Unmarshal([]byte(a.mustBrim("container", "inspect", "web")), &v)
	if v.Restarts != 1 {
		t.Errorf("restarts %d, want 1", v.Restarts)
	}
	eventually(t, "the second run's output", func() bool { return a.mustBrim("container", "logs", "web") == "run\nrun\n" })
	if r := a.brim("container", "unpause", "web"); r.code != 1 || !strings.Contains(r.stderr, "not paused") {
		t.Errorf("unpause of a running container: %+v", r)
	}
}

// screenSeq matches the escape sequences of the stats screen.
var screenSeq = regexp.MustCompile("\x1b\\[[0-9;?]*[A-Za-z]")

// frames splits a terminal's output into the frames drawn (from a home to
// the clear of the rest of the screen), each as its lines.
func frames(out string) [][]string {
	var fs [][]string
	for _, f := range strings.Split(out, "\x1b[H")[1:] {
		body, _, done := strings.Cut(f, "\x1b[J")
		if !done {
			break
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
			lines = append(lines, screenSeq.ReplaceAllString(strings.TrimSuffix(l, "\r"), ""))
		}
		fs = append(fs, lines)
	}
	return fs
}

// stats --watch on a terminal redraws in place: a frame over the last, no
// more lines than the terminal has rows less one (it never scrolls), none
// wider than it, a NAME column; after a resize the frames fit the new
// width; an interrupt gives the cursor back.
func TestStatsWatchOnTerminal(t *testing.T) {
	a := startAgent(t)
	a.run("--name", "a-rather-long-container-name", "--", "sleep", "1000")
	a.run("--name", "db", "--", "sleep", "1000")
	master, slave := testutil.OpenPTY(t, 100, 10)
	cmd := exec.Command(brimBinary, "container", "stats", "--watch", "--interval", "300ms", "--socket", a.Socket)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill() // this test's own process
			<-exited
		}
	})
	var out bytes.Buffer
	buf := make([]byte, 8192)
	read := func(what string, done func() bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("%s never came; output %q", what, out.String())
			}
			_ = master.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, _ := master.Read(buf)
			out.Write(buf[:n])
		}
	}
	read("three frames", func() bool { return len(frames(out.String())) >= 3 })
	if !strings.HasPrefix(out.String(), "\x1b[2J\x1b[?25l\x1b[H") {
		t.Errorf("the screen is not cleared first: %q", out.String()[:min(out.Len(), 40)])
	}
	for _, f := range frames(out.String()) {
		if len(f) != 3 || len(f) > 9 || !strings.Contains(f[0], "NAME") || !strings.Contains(strings.Join(f, "\n"), "a-rather-long…") {
			t.Errorf("frame of %d lines (want the header and 2 rows, at most 9):\n%s", len(f), strings.Join(f, "\n"))
		}
		for _, l := range f {
			if n := utf8.RuneCountInString(l); n > 100 {
				t.Errorf("%d columns: %q", n, l)
			}
		}
	}
	mark := out.Len()
	testutil.ResizePTY(t, master, 40, 10)
	read("a frame at 40 columns", func() bool {
		for _, f := range frames(out.String()[mark:]) {
			if len(f) > 0 && utf8.RuneCountInString(f[0]) == 40 {
				return true
			}
		}
		return false
	})
	for _, f := range frames(out.String()[mark:])[1:] {
		for _, l := range f {
			if utf8.RuneCountInString(l) > 40 {
				t.Errorf("after the resize, %d columns: %q", utf8.RuneCountInString(l), l)
			}
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	read("the cursor back", func() bool { return strings.HasSuffix(out.String(), "\x1b[?25h") })
	if err := <-exited; err != nil {
		t.Errorf("stats --watch ended with %v", err)
	}
	exited <- nil // for the cleanup
}

// brim __complete against a real agent lists its containers' IDs and
// names, only the paused ones for unpause.
func TestCompletionFromAgent(t *testing.T) {
	a := startAgent(t)
	web := a.run("--name", "web", "--", "sleep", "1000")
	idle := a.run("--", "sleep", "1000")
	a.mustBrim("container", "pause", idle)
	r := runBrim(t, "__complete", "container", "inspect", "--socket", a.Socket, "")
	for _, want := range []string{web + "\tweb, running\n", "web\t" + web + ", running\n", idle + "\t" + idle + ", paused\n", ":4\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("__complete container inspect lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runBrim(t, "__complete", "container", "unpause", "--socket", a.Socket, "")
	if !strings.Contains(r.stdout, idle+"\t") || strings.Contains(r.stdout, web) {
		t.Errorf("__complete container unpause:\n%s", r.stdout)
	}
}

// Each message of issue 33 says the truth against a real agent.
func TestMessagesSayTheTruth(t *testing.T) {
	a := startAgent(t)
	expect := func(r result, code int, stderr string) {
		t.Helper()
		if r.code != code || !strings.Contains(r.stderr, stderr) {
			t.Errorf("exit %d, stderr %q; want %d saying %q", r.code, r.stderr, code, stderr)
		}
	}
	// Before: "mkdir /missing: read-only file system".
	expect(a.brim("container", "run", "--cwd", "/missing", "--", "true"), 1,
		"/missing: no such file or directory in the container's root filesystem, which is read-only; use an existing directory, or one below /tmp or /mnt/sandbox")
	if r := a.brim("container", "run", "--cwd", "/tmp/made/here", "--wait", "--", "sh", "-c", "pwd"); r.code != 0 {
		t.Errorf("--cwd below /tmp: %+v", r)
	}
	// Before: exit 137 and not a word.
	expect(a.brim("container", "run", "--mem", "16", "--wait", "--", "sh", "-c", `x=$(head -c 200000000 /dev/zero | tr "\0" a); echo ${#x}`), 137,
		"was killed by the kernel's OOM killer at its memory limit (16 MiB); exit 137")
	// Before: "--cpus 1e+09: must be a positive number".
	expect(a.brim("container", "run", "--cpus", "1e9", "--", "true"), 1, "asked cpus:1000000000, free cpus:2 (more than this agent's total, cpus:2)")
	// Before: "update: give at least one of …".
	expect(a.brim("container", "update", "--mem", "0", "x"), 2, "update: --mem 0: must be a positive number MiB")
	// Before: x=Inf was "encode POST /weights: json: unsupported value: +Inf", 1e308 accepted.
	expect(runBrim(t, "weights", "--master", "127.0.0.1:1", "x=Inf"), 2, `"x=Inf": weight +Inf: want a number from 1e-06 to 1e+06`)
	expect(runBrim(t, "weights", "--master", "127.0.0.1:1", "x=1e308"), 2, "weight 1e+308: want a number from 1e-06 to 1e+06")

	// An agent whose socket path is too long refuses before it creates
	// anything ("bind: invalid argument" after making the directory).
	dir := t.TempDir()
	sock := filepath.Join(dir, strings.Repeat("s", 100), "agent.sock")
	r := runBrim(t, "agent", "--socket", sock, "--state-dir", filepath.Join(dir, "state"), "--cgroup-parent", testutil.UniqueName("brim-test"))
	expect(r, 2, "is "+strconv.Itoa(len(sock))+" bytes: a unix socket's path may have at most 107")
	for _, p := range []string{filepath.Dir(sock), filepath.Join(dir, "state")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the refused agent made %s", p)
		}
	}
	// cpus:100000 on this host was accepted silently.
	r = runBrim(t, "agent", "--resources", "cpus:100000;mem:100", "--socket", filepath.Join(dir, "a.sock"), "--state-dir", filepath.Join(dir, "state"),
		"--cgroup-parent", testutil.UniqueName("brim-test"))
	expect(r, 2, `--resources "cpus:100000;mem:100": cpus 100000 exceeds the host's`)
	expect(runBrim(t, "container", "ls", "--socket", sock), 2, "a unix socket's path may have at most 107")
}

// cgroupInt reads one integer of a container's v1 cgroup file ("key"
// names a line of a key-value file such as cpu.stat; "" the file's only
// value).
func cgroupInt(t *testing.T, a *agentProc, ctrl, id, file, key string) int64 {
	t.Helper()
	s := strings.TrimSpace(a.cgroupFile(ctrl, id, file))
	if key != "" {
		for _, l := range strings.Split(s, "\n") {
			if k, v, ok := strings.Cut(l, " "); ok && k == key {
				s = v
			}
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s %s %s: %v", file, key, s, err)
	}
	return n
}

// With --cpu-limit-mode quota, --cpus 0.5 is a cap: a busy loop is
// throttled and never gets more than 50 ms of cpu per 100 ms period; in
// shares mode the same container gets a weight and no cap. ls and
// inspect say which; update keeps or changes the mode.
func TestCPULimitModeQuota(t *testing.T) {
	a := startAgent(t, "--cpu-limit-mode", "quota")
	if info := a.mustBrim("agent", "info"); !regexp.MustCompile(`(?m)^cpu limit mode\s+quota`).MatchString(info) {
		t.Errorf("agent info:\n%s", info)
	}
	// Two spinning processes: the quota is spent within each period even
	// on a busy host.
	busy := a.run("--name", "busy", "--cpus", "0.5", "--", "sh", "-c", "while :; do :; done & while :; do :; done")
	weighted := a.run("--name", "weighted", "--cpus", "0.5", "--cpu-limit-mode", "shares", "--", "sleep", "1000")
	if got := a.mustBrim("container", "ls", "--format", "{{.Name}} {{.CPUMode}}"); got != "busy quota\nweighted shares\n" {
		t.Errorf("ls: %q", got)
	}
	if q, s := cgroupInt(t, a, "cpu", busy, "cpu.cfs_quota_us", ""), cgroupInt(t, a, "cpu", busy, "cpu.shares", ""); q != 50000 || s != 1024 {
		t.Errorf("quota mode: cfs_quota_us %d shares %d, want 50000 and 1024", q, s)
	}
	if q, s := cgroupInt(t, a, "cpu", weighted, "cpu.cfs_quota_us", ""), cgroupInt(t, a, "cpu", weighted, "cpu.shares", ""); q != -1 || s != 512 {
		t.Errorf("shares mode: cfs_quota_us %d shares %d, want -1 and 512", q, s)
	}
	usage0, periods0 := cgroupInt(t, a, "cpuacct", busy, "cpuacct.usage", ""), cgroupInt(t, a, "cpu", busy, "cpu.stat", "nr_periods")
	eventually(t, "the busy loop is throttled", func() bool { return cgroupInt(t, a, "cpu", busy, "cpu.stat", "nr_throttled") > 0 })
	eventually(t, "ten periods", func() bool { return cgroupInt(t, a, "cpu", busy, "cpu.stat", "nr_periods") >= periods0+10 })
	usage, periods := cgroupInt(t, a, "cpuacct", busy, "cpuacct.usage", ""), cgroupInt(t, a, "cpu", busy, "cpu.stat", "nr_periods")
	// The kernel's bound, whatever the load: the quota per period, plus a
	// period and a bandwidth slice (5 ms) per cpu of slack.
	if bound := (periods - periods0 + 1) * (50 + 2*5) * int64(time.Millisecond); usage-usage0 > bound {
		t.Errorf("quota 0.5: %v of cpu in %d periods, more than %v", time.Duration(usage-usage0), periods-periods0, time.Duration(bound))
	}
	// Updates: cpus in the container's own mode; a mode changed.
	a.mustBrim("container", "update", "--cpus", "0.25", "busy")
	if q := cgroupInt(t, a, "cpu", busy, "cpu.cfs_quota_us", ""); q != 25000 {
		t.Errorf("update --cpus 0.25 in quota mode: cfs_quota_us %d", q)
	}
	a.mustBrim("container", "update", "--cpu-limit-mode", "both", "weighted")
	if q, s := cgroupInt(t, a, "cpu", weighted, "cpu.cfs_quota_us", ""), cgroupInt(t, a, "cpu", weighted, "cpu.shares", ""); q != 50000 || s != 512 {
		t.Errorf("update --cpu-limit-mode both: cfs_quota_us %d shares %d", q, s)
	}
	if !strings.Contains(a.mustBrim("container", "inspect", "weighted"), `"cpuLimitMode": "both"`) {
		t.Error("inspect does not say the mode")
	}
}

// The .deb ships the shell completion and a manual page per command.
func TestDebShipsCompletionAndManual(t *testing.T) {
	deb := os.Getenv("BRIM_DEB")
	testutil.Require(t, deb != "", "BRIM_DEB not set (make test builds the package)")
	out, err := exec.Command("dpkg-deb", "-c", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"./usr/share/bash-completion/completions/brim", "./usr/share/zsh/vendor-completions/_brim",
		"./usr/share/fish/vendor_completions.d/brim.fish", "./usr/share/man/man1/brim.1.gz", "./usr/share/man/man1/brim-container-stop.1.gz"} {
		if !strings.Contains(string(out), " "+p+"\n") {
			t.Errorf("%s lacks %s", deb, p)
		}
	}
	if n := strings.Count(string(out), "./usr/share/man/man1/brim"); n < 40 {
		t.Errorf("%d manual pages", n)
	}
}

// A restart of a container run from an image runs it again from the
// same image (by its ID, never pulled), its command as first resolved:
// the image's defaults are not laid again over the record's.
func TestRestartImageContainer(t *testing.T) {
	reg := startImageRegistry(t)
	a := startAgent(t, "--image-insecure-registry", reg.Host)
	c := a.run("--image", reg.ref, "--name", "plain", "--wait")
	before := a.inspectImage(c)
	a.mustBrim("container", "restart", "plain")
	if r := a.brim("container", "wait", "plain"); r.code != 0 {
		t.Fatalf("the restarted run: %+v", r)
	}
	if out := a.mustBrim("container", "logs", "plain"); out != "from the image\nfrom the image\n" {
		t.Errorf("logs after the restart: %q", out)
	}
	if after := a.inspectImage(c); after.ImageID != before.ImageID || after.Image != reg.ref {
		t.Errorf("restarted from %+v, was %+v", after, before)
	}
}
