package integration

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

// debRoot is a Debian system for one test, made from the cached
// debootstrap root (hack/debroot.sh, $BRIM_DEBROOT) as a booted host would
// look to a package: an overlay over the cache (which stays untouched),
// with /proc, the host's /sys (cgroups included) and /dev, and a tmpfs
// /run. It lives in a mount namespace of its own, held by a sleeping
// process, so nothing of it is visible on the host or outlives the test;
// every command runs chrooted into it, in that namespace.
//
// systemd does not run there (it is not PID 1 on these machines):
// debUnit plays its part for the package's units.
type debRoot struct {
	t      *testing.T
	dir    string // the root, as the namespace sees it (the overlay's mount point)
	holder *exec.Cmd
	mntNS  string // the namespace, as /proc/PID/ns/mnt reads ("mnt:[…]")
	dev    uint64 // the overlay's device: the root of every process chrooted into it
	notify *notifySocket
	logDir string // daemons' output, on the host
}

// debPath is the PATH systemd gives services, and the one commands run with.
const debPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// newDebRoot mounts a fresh Debian root over the cache. Its cleanup kills
// every process left in its mount namespace (daemons, shims) and then the
// holder, which takes the namespace and its mounts with it.
func newDebRoot(t *testing.T) *debRoot {
	t.Helper()
	testutil.RequireRoot(t)
	cache := os.Getenv("BRIM_DEBROOT")
	testutil.Require(t, cache != "", "BRIM_DEBROOT not set (make test makes the root: hack/debroot.sh)")
	if _, err := os.Stat(filepath.Join(cache, "etc", "debian_version")); err != nil {
		t.Fatalf("BRIM_DEBROOT=%s is not a Debian root (make debroot): %v", cache, err)
	}
	for _, tool := range []string{"nsenter", "unshare", "chroot"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
	}
	base := t.TempDir()
	r := &debRoot{t: t, dir: filepath.Join(base, "root"), logDir: filepath.Join(base, "log")}
	for _, d := range []string{"upper", "work", "root", "log", "notify"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.notify = listenNotify(t, filepath.Join(base, "notify", "notify"))
	// The namespace's mounts. /run/systemd holds the notify socket only:
	// no /run/systemd/system, so maintainer scripts see no running systemd
	// (which is true) and call no systemctl.
	script := `set -e
mount -t overlay overlay -o "lowerdir=$1,upperdir=$2/upper,workdir=$2/work" "$3"
mount -t proc proc "$3/proc"
mount --rbind /sys "$3/sys"
mount --rbind /dev "$3/dev"
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$3/run"
mkdir "$3/run/systemd"
mount --bind "$2/notify" "$3/run/systemd"
echo ready
exec sleep infinity`
	holder := exec.Command("sh", "-c", script, "sh", cache, base, r.dir)
	holder.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS} // and / made rprivate by Go
	var errb bytes.Buffer
	holder.Stderr = &errb
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	r.holder = holder
	t.Cleanup(r.cleanup)
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		_ = holder.Wait()
		t.Fatalf("mount the Debian root: %s", errb.String())
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", holder.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if self, _ := os.Readlink("/proc/self/ns/mnt"); self == ns {
		t.Fatal("the Debian root's mount namespace is the test's own")
	}
	r.mntNS = ns
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/root%s", holder.Process.Pid, r.dir), &st); err != nil {
		t.Fatal(err)
	}
	r.dev = st.Dev
	return r
}

// cleanup kills what is left of the root's processes, then the holder
// (which takes the namespace and its mounts with it). A daemon still
// running is a test failure (it was not stopped), but it must not outlive
// the test either way. Containers are the cgroup parent's cleanup's.
func (r *debRoot) cleanup() {
	t := r.t
	for _, pid := range r.leftovers() {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		msg := fmt.Sprintf("cleanup: process %d left in the Debian root (%q); killing it", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
		if t.Failed() {
			t.Log(msg)
		} else {
			t.Error(msg)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = r.holder.Process.Kill()
	_ = r.holder.Wait()
	if t.Failed() {
		logs, _ := filepath.Glob(filepath.Join(r.logDir, "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", filepath.Base(l), b)
		}
	}
}

// leftovers lists the processes of the root but its holder: those in its
// mount namespace, and those chrooted into it from a namespace of their
// own (the units, as debUnit runs them, and the agent's shims), whose root
// is on the overlay's device.
func (r *debRoot) leftovers() []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == r.holder.Process.Pid {
			continue
		}
		var st syscall.Stat_t
		if ns, err := os.Readlink(d + "/ns/mnt"); err == nil && ns == r.mntNS {
			out = append(out, pid)
		} else if syscall.Stat(d+"/root", &st) == nil && st.Dev == r.dev {
			out = append(out, pid)
		}
	}
	return out
}

// command is argv run as root inside the root, with systemd's PATH and
// nothing else of the test's environment.
func (r *debRoot) command(argv ...string) *exec.Cmd {
	args := []string{"--target", strconv.Itoa(r.holder.Process.Pid), "--mount", "--",
		"chroot", r.dir, "/usr/bin/env", "-i", "PATH=" + debPath}
	return exec.Command("nsenter", append(args, argv...)...)
}

// run runs argv inside the root and returns its output and exit status
// (an error other than a non-zero exit fails the test).
func (r *debRoot) run(stdin io.Reader, argv ...string) (string, int) {
	r.t.Helper()
	cmd := r.command(argv...)
	cmd.Stdin = stdin
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		r.t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return string(out), 0
}

// must runs argv inside the root and fails the test unless it exits 0.
func (r *debRoot) must(argv ...string) string {
	r.t.Helper()
	out, code := r.run(nil, argv...)
	if code != 0 {
		r.t.Fatalf("%s: exit %d:\n%s", strings.Join(argv, " "), code, out)
	}
	return out
}

// install copies the package file deb into the root and installs it with
// dpkg, which fails on a dependency the root lacks (it has only what the
// package declares, hack/debroot.sh) or a failing maintainer script.
func (r *debRoot) install(deb string) {
	r.t.Helper()
	f, err := os.Open(deb)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	if out, code := r.run(f, "sh", "-c", "cat > /tmp/brim.deb"); code != 0 {
		r.t.Fatalf("copy the package in: %s", out)
	}
	r.must("dpkg", "-i", "/tmp/brim.deb")
}

// writeFile writes data to path inside the root (appending with
// appendTo), as root.
func (r *debRoot) writeFile(path string, data []byte, appendTo bool) {
	r.t.Helper()
	redir := ">"
	if appendTo {
		redir = ">>"
	}
	if out, code := r.run(bytes.NewReader(data), "sh", "-c", `cat `+redir+` "$1"`, "sh", path); code != 0 {
		r.t.Fatalf("write %s: exit %d: %s", path, code, out)
	}
}

// stat returns "OWNER:GROUP MODE" of path inside the root (mode in
// octal), or "missing".
func (r *debRoot) stat(path string) string {
	r.t.Helper()
	out, code := r.run(nil, "stat", "-c", "%U:%G %a", path)
	if code != 0 {
		return "missing"
	}
	return strings.TrimSpace(out)
}

// exists reports whether path exists inside the root (symlinks not followed).
func (r *debRoot) exists(path string) bool {
	r.t.Helper()
	_, code := r.run(nil, "sh", "-c", `[ -e "$1" ] || [ -L "$1" ]`, "sh", path)
	return code == 0
}

// debUnit is a systemd service unit of the package, read from the root
// and run the way systemd 252 would run it, for the keys it sets that
// decide what the process may reach: the user and group, the directories
// systemd makes and owns for it (StateDirectory=, RuntimeDirectory=,
// ConfigurationDirectory= with their modes), UMask=, ProtectSystem=strict
// and PrivateTmp= (a mount namespace in which only those directories are
// writable), NoNewPrivileges=, an empty CapabilityBoundingSet=, the
// environment systemd gives (NOTIFY_SOCKET, WATCHDOG_*, *_DIRECTORY, HOME,
// USER), and Type=notify (started = READY=1 from the main PID,
// NotifyAccess=main). Stopping it is SIGTERM to the main PID, as
// KillMode=process does.
//
// Keys that only take access away (ProtectHome=, ProtectKernel*=,
// SystemCallFilter=, …) or that do not change what the process reaches
// (Restart=, limits, the watchdog's period) are not reproduced; a key in
// neither list fails the test, so that a unit cannot grow a setting this
// runner silently ignores.
type debUnit struct {
	name    string
	service map[string]string // [Service] key → value (the last one)
	argv    []string          // ExecStart
}

// debUnitIgnored are the [Service] keys debUnit knowingly does not apply.
var debUnitIgnored = []string{
	// the restart policy, limits, timeouts, the scheduler's and OOM killer's view
	"ExecReload", "Restart", "RestartSec", "TimeoutStartSec", "WatchdogSec",
	"LimitNOFILE", "LimitNPROC", "TasksMax", "OOMScoreAdjust", "Delegate", "KillMode",
	"NotifyAccess", "KeyringMode",
	// hardening that only takes access away (systemd-analyze verify checks its syntax)
	"ProtectHome", "PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules",
	"ProtectKernelLogs", "ProtectControlGroups", "ProtectClock", "ProtectHostname",
	"RestrictAddressFamilies", "RestrictNamespaces", "RestrictRealtime", "RestrictSUIDSGID",
	"LockPersonality", "MemoryDenyWriteExecute", "SystemCallArchitectures", "SystemCallFilter",
	"SystemCallErrorNumber",
}

// debUnitApplied are the [Service] keys debUnit reproduces.
var debUnitApplied = []string{
	"Type", "ExecStart", "User", "Group", "UMask", "StateDirectory", "StateDirectoryMode",
	"RuntimeDirectory", "RuntimeDirectoryMode", "RuntimeDirectoryPreserve",
	"ConfigurationDirectory", "ConfigurationDirectoryMode",
	"ProtectSystem", "PrivateTmp", "NoNewPrivileges", "CapabilityBoundingSet", "AmbientCapabilities",
}

// parseDebUnit reads a unit file's [Service] section and refuses what
// debUnit cannot run faithfully.
func parseDebUnit(name, text string) (*debUnit, error) {
	u := &debUnit{name: name, service: map[string]string{}}
	section := ""
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case strings.HasSuffix(line, "\\"):
			return nil, fmt.Errorf("%s:%d: continued lines are not parsed here", name, i+1)
		case line[0] == '[':
			section = strings.Trim(line, "[]")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: not KEY=VALUE: %q", name, i+1, line)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if section != "Service" {
			continue
		}
		if !slices.Contains(debUnitApplied, k) && !slices.Contains(debUnitIgnored, k) {
			return nil, fmt.Errorf("%s: [Service] %s= is neither applied nor knowingly ignored by the package test's unit runner (integration/debroot_test.go): teach it", name, k)
		}
		u.service[k] = v
	}
	exec := u.service["ExecStart"]
	if exec == "" || strings.ContainsAny(exec, `"'%$\`) || strings.ContainsAny(exec[:1], "@-:+!") {
		return nil, fmt.Errorf("%s: ExecStart=%q: want a plain absolute command line (no prefixes, quotes, specifiers or variables)", name, exec)
	}
	u.argv = strings.Fields(exec)
	switch t := u.service["Type"]; t {
	case "", "simple", "exec", "notify":
	default:
		return nil, fmt.Errorf("%s: Type=%s is not run here", name, t)
	}
	if (u.service["User"] == "") != (u.service["Group"] == "") {
		return nil, fmt.Errorf("%s: set User= and Group= together (the runner does not look up a primary group)", name)
	}
	switch p := u.service["ProtectSystem"]; p {
	case "", "no", "strict":
	default:
		return nil, fmt.Errorf("%s: ProtectSystem=%s is not reproduced (strict is)", name, p)
	}
	if v, ok := u.service["CapabilityBoundingSet"]; ok && v != "" {
		return nil, fmt.Errorf("%s: CapabilityBoundingSet=%s: only an empty set is reproduced", name, v)
	}
	if v := u.service["AmbientCapabilities"]; v != "" {
		return nil, fmt.Errorf("%s: AmbientCapabilities=%s is not reproduced", name, v)
	}
	for _, k := range []string{"StateDirectory", "RuntimeDirectory", "ConfigurationDirectory"} {
		for _, d := range strings.Fields(u.service[k]) {
			if filepath.IsAbs(d) || strings.Contains(d, "..") || strings.Contains(d, ":") {
				return nil, fmt.Errorf("%s: %s=%s: want relative paths", name, k, d)
			}
		}
	}
	return u, nil
}

// unit reads and parses /lib/systemd/system/NAME from the root.
func (r *debRoot) unit(name string) *debUnit {
	r.t.Helper()
	u, err := parseDebUnit(name, r.must("cat", "/lib/systemd/system/"+name))
	if err != nil {
		r.t.Fatal(err)
	}
	return u
}

// yes is systemd's reading of a boolean.
func yes(v string) bool { return slices.Contains([]string{"yes", "true", "on", "1"}, v) }

// dirs returns the absolute paths of a *Directory= key under base, and
// its mode (systemd's default 0755).
func (u *debUnit) dirs(key, base string) ([]string, string) {
	var out []string
	for _, d := range strings.Fields(u.service[key]) {
		out = append(out, filepath.Join(base, d))
	}
	mode := u.service[key+"Mode"]
	if mode == "" {
		mode = "0755"
	}
	return out, mode
}

// debDaemon is a unit's main process, started by debRoot.start.
type debDaemon struct {
	unit   *debUnit
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

// start makes the unit's directories as systemd does before it starts a
// service, then runs ExecStart in the root under the unit's settings and,
// for Type=notify, waits for READY=1 from its main PID (or its exit,
// which fails the test with its output).
func (r *debRoot) start(u *debUnit) *debDaemon {
	r.t.Helper()
	user, group := u.service["User"], u.service["Group"]
	if user == "" {
		user, group = "root", "root"
	}
	setup, writable, env := u.directories(user, group)
	if out, code := r.run(nil, "sh", "-c", setup); code != 0 {
		r.t.Fatalf("%s: make its directories: exit %d: %s", u.name, code, out)
	}
	env = append(env, "PATH="+debPath, "NOTIFY_SOCKET=/run/systemd/notify", "INVOCATION_ID="+randomHex(16))
	if u.service["User"] != "" {
		pw := strings.Split(strings.TrimSpace(r.must("getent", "passwd", user)), ":")
		env = append(env, "USER="+user, "LOGNAME="+user, "HOME="+pw[5], "SHELL="+pw[6])
	}
	if w := u.service["WatchdogSec"]; w != "" {
		d, err := time.ParseDuration(w)
		if err != nil {
			r.t.Fatalf("%s: WatchdogSec=%s: %v", u.name, w, err)
		}
		env = append(env, "WATCHDOG_USEC="+strconv.FormatInt(d.Microseconds(), 10))
	}
	script := unitScript(u, writable, env, append(u.setpriv(user, group), u.argv...))
	logPath := filepath.Join(r.logDir, u.name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("nsenter", "--target", strconv.Itoa(r.holder.Process.Pid), "--mount", "--",
		"unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", r.dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	d := &debDaemon{unit: u, cmd: cmd, exited: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); close(d.exited) }() // reaped by the stop or the root's cleanup
	if u.service["ProtectSystem"] == "strict" {
		r.checkStrict(u, cmd.Process.Pid, writable)
	}
	if u.service["Type"] != "notify" {
		return d
	}
	ready := r.notify.waitReady(cmd.Process.Pid, d.exited)
	select {
	case <-ready:
	case <-d.exited:
		b, _ := os.ReadFile(logPath)
		r.t.Fatalf("%s: %s exited before READY=1 (%v):\n%s", u.name, strings.Join(u.argv, " "), cmd.ProcessState, b)
	case <-time.After(2 * time.Minute): // a bound on a hang, not a timing assertion
		b, _ := os.ReadFile(logPath)
		r.t.Fatalf("%s: no READY=1 in 2 minutes:\n%s", u.name, b)
	}
	return d
}

// directories returns the script that makes the unit's State, Runtime
// and Configuration directories as systemd 252 does before a start
// (exec_setup_directories): missing parents made root 0755, existing ones
// left alone; the directory made with its mode, given to user:group
// recursively unless its top already is theirs (Configuration ones stay
// root's), then chmod'ed to the mode. It also returns the directories the
// unit may write and the *_DIRECTORY variables systemd sets.
func (u *debUnit) directories(user, group string) (script string, writable, env []string) {
	var b strings.Builder
	b.WriteString("set -e; umask 022\n")
	for _, k := range []struct{ key, base, env string }{
		{"StateDirectory", "/var/lib", "STATE_DIRECTORY"},
		{"RuntimeDirectory", "/run", "RUNTIME_DIRECTORY"},
		{"ConfigurationDirectory", "/etc", "CONFIGURATION_DIRECTORY"},
	} {
		paths, mode := u.dirs(k.key, k.base)
		owner := user + ":" + group
		if k.key == "ConfigurationDirectory" {
			owner = "root:root"
		}
		for _, p := range paths {
			fmt.Fprintf(&b, "mkdir -p %s; [ -d %s ] || mkdir -m %s %s\n", shq(filepath.Dir(p)), shq(p), mode, shq(p))
			fmt.Fprintf(&b, "[ \"$(stat -c %%U:%%G %s)\" = %s ] || chown -R %s %s\n", shq(p), owner, owner, shq(p))
			fmt.Fprintf(&b, "chmod %s %s\n", mode, shq(p))
			if k.key != "ConfigurationDirectory" {
				writable = append(writable, p)
			}
		}
		if len(paths) > 0 {
			env = append(env, k.env+"="+strings.Join(paths, ":"))
		}
	}
	return b.String(), writable, env
}

// setpriv is the setpriv command line (ending in "--") that gives the
// process what the unit says: its user with the user's groups, no new
// privileges, no capabilities to gain.
func (u *debUnit) setpriv(user, group string) []string {
	argv := []string{"setpriv"}
	if u.service["User"] != "" {
		argv = append(argv, "--reuid="+user, "--regid="+group, "--init-groups")
	}
	if yes(u.service["NoNewPrivileges"]) {
		argv = append(argv, "--no-new-privs")
	}
	if v, ok := u.service["CapabilityBoundingSet"]; ok && v == "" {
		argv = append(argv, "--bounding-set=-all", "--inh-caps=-all")
	}
	return append(argv, "--")
}

// checkStrict checks that the unit's process (pid) sees the root
// read-only and its own directories writable, as ProtectSystem=strict
// makes them: the test's stand-in for systemd must not pass a unit that
// writes elsewhere.
func (r *debRoot) checkStrict(u *debUnit, pid int, writable []string) {
	r.t.Helper()
	var b []byte
	deadline := time.Now().Add(time.Minute) // a bound on a hang: the shell sets the mounts up, then execs ExecStart
	for {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if filepath.Base(exe) == filepath.Base(u.argv[0]) {
			b, _ = os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
			break
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: pid %d never exec'd ExecStart", u.name, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	opts := map[string]string{} // mount point (as the process sees it) → options of the top mount there
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 5 {
			opts[f[4]] = f[5]
		}
	}
	if o := opts["/"]; !strings.HasPrefix(o, "ro") {
		r.t.Errorf("%s: ProtectSystem=strict, but / is mounted %q for its process", u.name, o)
	}
	for _, p := range writable {
		if o := opts[p]; !strings.HasPrefix(o, "rw") {
			r.t.Errorf("%s: %s should be writable for its process, is mounted %q", u.name, p, o)
		}
	}
}

// unitScript is the shell script that runs argv as systemd runs the unit,
// given the root as $1, in a mount namespace of its own (unshare):
//   - for ProtectSystem=strict and PrivateTmp=, the mounts systemd makes:
//     the root and /run read-only, a private /tmp and /var/tmp, the unit's
//     own directories (writable) bound writable — binds first, as a later
//     read-only remount of their parent does not reach them. /proc, /sys
//     and /dev stay as they are (the Protect*= keys that close them are
//     not reproduced);
//   - the unit's environment only, its umask; argv is setpriv from the
//     root's own util-linux (the user with its groups, no new privileges,
//     no capabilities to gain). The shell that execs it names the PID it
//     will have: WATCHDOG_PID.
func unitScript(u *debUnit, writable, env, argv []string) string {
	var b strings.Builder
	b.WriteString("set -e; R=$1\n")
	strict := u.service["ProtectSystem"] == "strict"
	if strict {
		for _, p := range writable {
			fmt.Fprintf(&b, "mount --bind \"$R\"%s \"$R\"%s\n", shq(p), shq(p))
		}
	}
	if yes(u.service["PrivateTmp"]) {
		b.WriteString("mount -t tmpfs -o mode=1777 tmpfs \"$R/tmp\"; mount -t tmpfs -o mode=1777 tmpfs \"$R/var/tmp\"\n")
	}
	if strict {
		b.WriteString("mount -o remount,bind,ro \"$R\"; mount -o remount,bind,ro \"$R/run\"\n")
	}
	umask := u.service["UMask"]
	if umask == "" {
		umask = "0022"
	}
	inner := "umask " + umask + "; export WATCHDOG_PID=$$; exec \"$@\""
	fmt.Fprintf(&b, "exec chroot \"$R\" /usr/bin/env -i %s /bin/sh -c %s sh %s\n", shqs(env...), shq(inner), shqs(argv...))
	return b.String()
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// shqs quotes each of ss for sh, space-separated.
func shqs(ss ...string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = shq(s)
	}
	return strings.Join(q, " ")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// stop is `systemctl stop` of the unit: SIGTERM to the main PID (the
// others stay, as KillMode=process leaves them), waiting for its exit.
// RuntimeDirectory= goes with it unless RuntimeDirectoryPreserve=yes.
func (r *debRoot) stop(d *debDaemon) {
	r.t.Helper()
	select {
	case <-d.exited:
		b, _ := os.ReadFile(d.log)
		r.t.Errorf("%s had exited before its stop (%v):\n%s", d.unit.name, d.cmd.ProcessState, b)
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(time.Minute): // a bound on a hang
		r.t.Errorf("%s did not stop on SIGTERM in a minute; killing it", d.unit.name)
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	if !d.cmd.ProcessState.Success() {
		b, _ := os.ReadFile(d.log)
		r.t.Errorf("%s ended with %v on SIGTERM:\n%s", d.unit.name, d.cmd.ProcessState, b)
	}
	if !yes(d.unit.service["RuntimeDirectoryPreserve"]) {
		paths, _ := d.unit.dirs("RuntimeDirectory", "/run")
		for _, p := range paths {
			r.must("rm", "-rf", "--one-file-system", p)
		}
	}
}

// notifySocket is systemd's end of NOTIFY_SOCKET: a datagram socket that
// knows each message's sender (SO_PASSCRED), so that READY=1 counts only
// from a unit's main PID (NotifyAccess=main).
type notifySocket struct {
	conn *net.UnixConn
	msgs chan notifyMsg
}

type notifyMsg struct {
	pid  int
	text string
}

// listenNotify binds path (mode 0777, as systemd's: services of any user
// send to it); its goroutine ends when the test's cleanup closes it.
func listenNotify(t *testing.T, path string) *notifySocket {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1)
	}); err != nil || serr != nil {
		t.Fatalf("SO_PASSCRED: %v %v", err, serr)
	}
	n := &notifySocket{conn: c, msgs: make(chan notifyMsg, 1000)}
	go func() { // ends when the cleanup closes c
		defer close(n.msgs)
		buf, oob := make([]byte, 4096), make([]byte, syscall.CmsgSpace(syscall.SizeofUcred))
		for {
			nb, noob, _, _, err := c.ReadMsgUnix(buf, oob)
			if err != nil {
				return
			}
			m := notifyMsg{text: string(buf[:nb])}
			if cmsgs, err := syscall.ParseSocketControlMessage(oob[:noob]); err == nil && len(cmsgs) > 0 {
				if cred, err := syscall.ParseUnixCredentials(&cmsgs[0]); err == nil {
					m.pid = int(cred.Pid)
				}
			}
			n.msgs <- m
		}
	}()
	return n
}

// waitReady returns a channel closed once pid has sent READY=1. Messages
// of other PIDs are dropped, as systemd drops them with NotifyAccess=main;
// one waiter at a time. Its goroutine ends then, when gone closes (the
// process exited) or when the socket closes.
func (n *notifySocket) waitReady(pid int, gone <-chan struct{}) <-chan struct{} {
	ready := make(chan struct{})
	go func() {
		for {
			select {
			case m, ok := <-n.msgs:
				if !ok {
					return
				}
				if m.pid == pid && slices.Contains(strings.Split(m.text, "\n"), "READY=1") {
					close(ready)
					return
				}
			case <-gone:
				return
			}
		}
	}()
	return ready
}
