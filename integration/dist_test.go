package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

// The unit files in dist/systemd pass `systemd-analyze verify` with no
// warning (unknown keys are only warnings there, so any output fails).
func TestSystemdUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	testutil.Require(t, err == nil, "systemd-analyze not installed")
	dir := t.TempDir()
	units, err := filepath.Glob("../dist/systemd/*.service")
	if err != nil || len(units) != 2 {
		t.Fatalf("units: %v %v", units, err)
	}
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		// verify checks that ExecStart's binary exists: point it at ours.
		text := strings.ReplaceAll(string(b), "/usr/bin/brim ", brimBinary+" ")
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(u)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(analyze, "verify", filepath.Join(dir, "brim-agent.service"), filepath.Join(dir, "brim-master.service")).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// The .deb as an operator meets it, in a minimal Debian root (debRoot:
// the host stays untouched): dpkg installs it with the dependencies it
// declares, both units start as systemd would start them (debUnit: the
// master as the brim user under ProtectSystem=strict, the agent as root)
// and report READY=1, the master opens its store and answers `brim state`
// with the agent registered, and the agent runs a container. The master
// comes back from a backup restored by root. A purge is refused while an
// agent runs, and removes every file, the user and the containers once
// the units are stopped.
func TestDebInstall(t *testing.T) {
	testutil.RequireRoot(t)
	deb := os.Getenv("BRIM_DEB")
	testutil.Require(t, deb != "", "BRIM_DEB not set (make test builds the package)")
	parent := testutil.NewCgroupParent(t)
	t.Cleanup(func() { killCgroupTree(t, parent) }) // after the root's cleanup, before the rmdirs
	r := newDebRoot(t)

	r.install(deb)

	// What the package installs, and who owns it.
	for _, p := range []string{"/usr/bin/brim", "/usr/bin/brim-shim", "/usr/bin/brim-experiment",
		"/lib/systemd/system/brim-agent.service", "/lib/systemd/system/brim-master.service",
		"/etc/brim/agent.toml", "/usr/share/doc/brim/operators.md", "/usr/share/doc/brim/security.md"} {
		if !r.exists(p) {
			t.Errorf("not installed: %s", p)
		}
	}
	// The units as they are in dist/systemd (TestSystemdUnitsVerify checks those).
	for _, u := range []string{"brim-agent.service", "brim-master.service"} {
		b, err := os.ReadFile("../dist/systemd/" + u)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := r.run(nil, "cat", "/lib/systemd/system/"+u); got != string(b) {
			t.Errorf("installed %s differs from dist/systemd/%s", u, u)
		}
	}
	for path, want := range map[string]string{
		"/var/lib/brim":         "root:root 755",
		"/var/lib/brim/master":  "brim:brim 700",
		"/etc/brim":             "root:root 755",
		"/etc/brim/master.toml": "root:brim 640",
	} {
		if got := r.stat(path); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
	if cr, _ := r.run(nil, "head", "-n1", "/usr/share/doc/brim/copyright"); cr != "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n" {
		t.Errorf("/usr/share/doc/brim/copyright starts with %q, want the machine-readable format's header", cr)
	}
	if pw := strings.Split(strings.TrimSpace(r.must("getent", "passwd", "brim")), ":"); len(pw) != 7 || pw[5] != "/var/lib/brim/master" {
		t.Errorf("brim user: %v, want home /var/lib/brim/master", pw)
	}
	want := strings.TrimSpace(runOut(t, brimBinary, "--version"))
	if got := strings.TrimSpace(r.must("brim", "--version")); got != want {
		t.Errorf("installed brim --version = %q, want %q", got, want)
	}
	// The shipped configuration loads as it is, with the containers'
	// runtime state on /run (docs/operators.md).
	if cfg := r.must("brim", "agent", "config", "--config", "/etc/brim/agent.toml"); !strings.Contains(cfg, "\nrun-dir = \"/run/brim-agent\"\n") {
		t.Errorf("the shipped agent.toml does not set run-dir = \"/run/brim-agent\"")
	}
	r.must("brim", "master", "config", "--config", "/etc/brim/master.toml")

	// Configured as docs/operators.md says, on a free port and this
	// test's cgroup parent.
	addr := testutil.FreeAddr(t)
	r.writeFile("/etc/brim/master.toml", []byte(fmt.Sprintf("listen = %q\n", addr)), true)
	r.writeFile("/etc/brim/agent.toml", []byte(fmt.Sprintf("master = %q\ncgroup-parent = %q\nresources = \"cpus:1;mem:512\"\n", addr, parent)), true)

	master := r.start(r.unit("brim-master.service"))
	if got := r.stat("/var/lib/brim/master/master.db"); got != "brim:brim 600" {
		t.Errorf("master.db: %s, want brim:brim 600", got)
	}
	var backups []string // the master backs up at start, beside serving
	eventually(t, "a backup in /var/lib/brim/master/backups", func() bool {
		out, _ := r.run(nil, "ls", "/var/lib/brim/master/backups")
		backups = strings.Fields(out)
		return len(backups) > 0 && !strings.Contains(out, "No such file")
	})
	agent := r.start(r.unit("brim-agent.service"))
	for path, want := range map[string]string{"/var/lib/brim/agent": "root:root 700", "/run/brim": "root:root 700", "/run/brim/agent.sock": "root:root 600"} {
		if got := r.stat(path); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
	agentID := strings.TrimSpace(r.must("cat", "/var/lib/brim/agent/agent-id"))
	debEventuallyRegistered(t, r, addr, agentID)
	if out, code := r.run(nil, "brim", "container", "run", "--wait", "--", "true"); code != 0 {
		t.Fatalf("brim container run --wait -- true: exit %d: %s", code, out)
	}

	// Restored by root from a backup, the store is still the master's.
	r.stop(master)
	r.must("brim", "master", "restore", "--from", "/var/lib/brim/master/backups/"+backups[0])
	if got := r.stat("/var/lib/brim/master/master.db"); got != "brim:brim 600" {
		t.Errorf("master.db after restore: %s, want brim:brim 600", got)
	}
	master = r.start(r.unit("brim-master.service"))
	debEventuallyRegistered(t, r, addr, agentID)

	// An upgrade from a package that made /var/lib/brim 0700, after a
	// master that ran as root: postinst gives the master its directory back.
	r.stop(master)
	r.must("sh", "-c", "chmod 0700 /var/lib/brim && chown -R root:root /var/lib/brim/master")
	r.must("dpkg", "-i", "/tmp/brim.deb")
	for path, want := range map[string]string{"/var/lib/brim": "root:root 755", "/var/lib/brim/master/master.db": "brim:brim 600"} {
		if got := r.stat(path); got != want {
			t.Errorf("after the upgrade: %s: %s, want %s", path, got, want)
		}
	}
	master = r.start(r.unit("brim-master.service"))
	debEventuallyRegistered(t, r, addr, agentID)

	// A purge while an agent runs (one systemd does not know: prerm
	// cannot stop it) is refused, and leaves everything in place.
	id := strings.TrimSpace(r.must("brim", "container", "run", "--", "sleep", "600"))
	pid := debContainerPid(t, r, id)
	out, code := r.run(nil, "dpkg", "--purge", "brim")
	if code == 0 || !strings.Contains(out, "removal refused") || !strings.Contains(out, "holds state dir /var/lib/brim/agent") {
		t.Fatalf("dpkg --purge with an agent running: exit %d, want a refusal naming the agent's state dir:\n%s", code, out)
	}
	if st := r.must("dpkg-query", "-W", "-f", "${Status}", "brim"); !strings.HasSuffix(st, " ok installed") {
		t.Errorf("after the refused purge: package status %q", st)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("after the refused purge: container %s (pid %d): %v", id, pid, err)
	}
	for _, p := range []string{"/var/lib/brim/agent/agent-id", "/var/lib/brim/master/master.db", "/usr/bin/brim"} {
		if !r.exists(p) {
			t.Errorf("after the refused purge: %s is gone", p)
		}
	}

	// Stopped as systemd's prerm would stop them, the purge tears the
	// node down: the container is killed, nothing of brim is left.
	r.stop(agent)
	r.stop(master)
	out = r.must("dpkg", "--purge", "brim")
	t.Logf("dpkg --purge brim:\n%s", out)
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("after the purge: container %s (pid %d) still runs (%v)", id, pid, err)
	}
	if left := cgroupProcs(parent); len(left) > 0 {
		t.Errorf("after the purge: processes %v left in the cgroup parent", left)
	}
	for _, p := range []string{"/var/lib/brim", "/etc/brim", "/usr/share/doc/brim", "/usr/bin/brim",
		"/usr/bin/brim-shim", "/lib/systemd/system/brim-agent.service", "/lib/systemd/system/brim-master.service"} {
		if r.exists(p) {
			t.Errorf("left behind after the purge: %s", p)
		}
	}
	for _, db := range []string{"passwd", "group"} {
		if _, code := r.run(nil, "getent", db, "brim"); code == 0 {
			t.Errorf("brim left in %s after the purge", db)
		}
	}
}

// BRIM_REMOVE_WITHOUT_CLEANUP=1 removes the package without `brim agent
// cleanup` (the way out when it cannot succeed), saying so. The purge that
// follows refuses while a brim daemon still holds its lock under
// /var/lib/brim (here a master), deleting nothing there, and removes every
// file and the user once it has stopped.
func TestDebRemoveWithoutCleanup(t *testing.T) {
	testutil.RequireRoot(t)
	deb := os.Getenv("BRIM_DEB")
	testutil.Require(t, deb != "", "BRIM_DEB not set (make test builds the package)")
	r := newDebRoot(t)
	r.install(deb)
	r.writeFile("/etc/brim/master.toml", []byte(fmt.Sprintf("listen = %q\n", testutil.FreeAddr(t))), true)
	master := r.start(r.unit("brim-master.service"))

	out, code := r.run(nil, "env", "BRIM_REMOVE_WITHOUT_CLEANUP=1", "dpkg", "--purge", "brim")
	if !strings.Contains(out, "removing without brim agent cleanup") {
		t.Errorf("BRIM_REMOVE_WITHOUT_CLEANUP=1 dpkg --purge brim says nothing of the cleanup it skips:\n%s", out)
	}
	if code == 0 || !strings.Contains(out, "purge refused: a brim daemon is running on /var/lib/brim/master/master.db") {
		t.Fatalf("purge with a master running: exit %d, want a refusal naming its store:\n%s", code, out)
	}
	if got := r.stat("/var/lib/brim/master/master.db"); got != "brim:brim 600" {
		t.Errorf("after the refused purge: master.db: %s", got)
	}

	r.stop(master)
	r.must("dpkg", "--purge", "brim")
	for _, p := range []string{"/var/lib/brim", "/etc/brim", "/usr/share/doc/brim", "/usr/bin/brim"} {
		if r.exists(p) {
			t.Errorf("left behind after the purge: %s", p)
		}
	}
	if _, code := r.run(nil, "getent", "passwd", "brim"); code == 0 {
		t.Error("brim user left behind after the purge")
	}
}

// debEventuallyRegistered waits until the master at addr, asked with
// `brim state` inside r, lists agent id as connected.
func debEventuallyRegistered(t *testing.T, r *debRoot, addr, id string) {
	t.Helper()
	type agentState struct {
		ID        string `json:"id"`
		Connected bool   `json:"connected"`
	}
	var last string
	deadline := time.Now().Add(time.Minute) // a bound on a hang, not a timing assertion
	for {
		out, code := r.run(nil, "brim", "state", "--master", addr, "--json")
		last = fmt.Sprintf("exit %d: %s", code, out)
		var st struct {
			Agents []agentState `json:"agents"`
		}
		if code == 0 && json.Unmarshal([]byte(out), &st) == nil && slices.Contains(st.Agents, agentState{ID: id, Connected: true}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s never connected in `brim state`; last answer %s", id, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// debContainerPid is the host PID of running container id's init.
func debContainerPid(t *testing.T, r *debRoot, id string) int {
	t.Helper()
	var c containerJSON
	if err := json.Unmarshal([]byte(r.must("brim", "container", "inspect", id)), &c); err != nil {
		t.Fatal(err)
	}
	if c.State != "running" || c.Pid <= 0 {
		t.Fatalf("container %s: state %s pid %d, want running", id, c.State, c.Pid)
	}
	return c.Pid
}

// cgroupProcs lists the processes in cgroup parent's tree, in every hierarchy.
func cgroupProcs(parent string) []int {
	seen := map[int]bool{}
	for _, d := range testutil.CgroupDirs(parent) {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	var out []int
	for pid := range seen {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// killCgroupTree kills what is left in cgroup parent's tree (a test that
// failed half-way leaves containers), by PID.
func killCgroupTree(t *testing.T, parent string) {
	for _, pid := range cgroupProcs(parent) {
		if !t.Failed() {
			t.Errorf("cleanup: process %d left in %s; killing it", pid, parent)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// runOut runs a host command and returns its output, failing t on an error.
func runOut(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// dist/copyright (the package's /usr/share/doc/brim/copyright, Debian's
// machine-readable format) names every Go module linked into the packaged
// binaries, and no other, each with the licences its own licence files
// state, carries the modules' NOTICE files (Apache-2.0 §4d), and has a
// stand-alone License paragraph for every licence it names. When a
// dependency changes, this test says which paragraph to add or fix.
func TestDebCopyright(t *testing.T) {
	text, err := os.ReadFile("../dist/copyright")
	if err != nil {
		t.Fatal(err)
	}
	paras := parseDEP5(string(text))
	if len(paras) == 0 || paras[0]["Format"] != "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" {
		t.Fatalf("dist/copyright: no Format header of the machine-readable format")
	}
	files := map[string]string{} // Files: pattern → License: expression
	defined := map[string]bool{} // stand-alone License paragraphs
	for i, p := range paras[1:] {
		lic, body, _ := strings.Cut(p["License"], "\n")
		switch {
		case lic == "":
			t.Errorf("dist/copyright: paragraph %d has no License field", i+2)
		case p["Files"] != "":
			if p["Copyright"] == "" {
				t.Errorf("dist/copyright: Files: %s has no Copyright field", p["Files"])
			}
			files[p["Files"]] = lic
		case strings.TrimSpace(body) == "":
			t.Errorf("dist/copyright: stand-alone License: %s has no text", lic)
		default:
			defined[lic] = true
		}
	}
	for pattern, expr := range files {
		for _, name := range licenceNames(expr) {
			if !defined[name] {
				t.Errorf("dist/copyright: Files: %s names licence %s, which has no stand-alone License paragraph", pattern, name)
			}
		}
	}

	list := exec.Command("go", "list", "-deps", "-tags", "seccomp", "-f",
		"{{with .Module}}{{if not .Main}}{{.Path}}\t{{.Dir}}{{end}}{{end}}",
		"./cmd/brim", "./cmd/brim-shim", "./cmd/brim-experiment")
	list.Dir = ".."
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	modules := map[string]string{} // path → directory
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, dir, ok := strings.Cut(l, "\t"); ok {
			modules[path] = dir
		}
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	modules["GOROOT/src"] = strings.TrimSpace(string(goroot)) // the standard library
	if len(modules) < 10 {
		t.Fatalf("go list found %d modules: %s", len(modules), out)
	}
	for path, dir := range modules {
		pattern := "vendor/" + path + "/*"
		if path == "GOROOT/src" {
			pattern = path + "/*"
		}
		if dir == "" {
			t.Errorf("module %s is not downloaded (go mod download)", path)
			continue
		}
		found, notices := moduleLicences(t, dir)
		expr, ok := files[pattern]
		if !ok {
			t.Errorf("dist/copyright: no paragraph for module %s; its licence files say %v:\nFiles: %s\nCopyright: …\nLicense: %s",
				path, found, pattern, strings.Join(found, " and "))
			continue
		}
		names := licenceNames(expr)
		slices.Sort(names)
		if len(found) == 0 {
			t.Errorf("module %s: no licence recognised in its licence files (teach moduleLicences)", path)
		} else if !slices.Equal(names, found) {
			t.Errorf("dist/copyright: Files: %s says %q; the module's licence files say %v", pattern, expr, found)
		}
		for _, n := range notices {
			for _, line := range strings.Split(n, "\n") {
				if line = strings.TrimSpace(line); line != "" && !strings.Contains(string(text), line) {
					t.Errorf("dist/copyright: module %s's NOTICE line %q is missing", path, line)
				}
			}
		}
		delete(files, pattern)
	}
	delete(files, "*")
	for pattern := range files {
		t.Errorf("dist/copyright: Files: %s names no module linked into the binaries", pattern)
	}
}

// parseDEP5 splits a machine-readable copyright file into paragraphs of
// fields; a continuation line (leading space) is appended to its field
// after a newline, " ." standing for an empty line.
func parseDEP5(text string) []map[string]string {
	var paras []map[string]string
	var cur map[string]string
	var key string
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			cur = nil
		case line[0] == ' ' || line[0] == '\t':
			if cur != nil && key != "" {
				if l := strings.TrimSpace(line); l != "." {
					cur[key] += "\n" + l
				} else {
					cur[key] += "\n"
				}
			}
		default:
			if cur == nil {
				cur = map[string]string{}
				paras = append(paras, cur)
			}
			k, v, _ := strings.Cut(line, ":")
			key = k
			cur[k] = strings.TrimSpace(v)
		}
	}
	return paras
}

// licenceNames splits a License expression ("BSD-3-clause and MPL-2.0",
// "FTL or GPL-2+") into its licence names.
func licenceNames(expr string) []string {
	var out []string
	for _, and := range strings.Split(expr, " and ") {
		for _, n := range strings.Split(and, " or ") {
			out = append(out, strings.TrimSpace(n))
		}
	}
	return out
}

// moduleLicences recognises the licences in a module's top-level licence
// files (LICENSE*, LICENCE*, COPYING*), by phrases each licence's text
// has, sorted; and returns the text of its NOTICE files.
func moduleLicences(t *testing.T, dir string) (licences, notices []string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range ents {
		name := strings.ToUpper(e.Name())
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		switch {
		case strings.HasPrefix(name, "NOTICE"):
			notices = append(notices, text)
			continue
		case !strings.HasPrefix(name, "LICENSE") && !strings.HasPrefix(name, "LICENCE") && !strings.HasPrefix(name, "COPYING"):
			continue
		}
		for _, l := range recogniseLicences(text) {
			seen[l] = true
		}
	}
	for l := range seen {
		licences = append(licences, l)
	}
	slices.Sort(licences)
	return licences, notices
}

// recogniseLicences names the licences whose text (or, for a dual
// licence, whose name) text carries.
func recogniseLicences(text string) []string {
	has := func(s ...string) bool {
		for _, x := range s {
			if !strings.Contains(text, x) {
				return false
			}
		}
		return true
	}
	switch {
	case strings.Contains(strings.ToUpper(text), "SIL OPEN FONT LICENSE"):
		return []string{"OFL-1.1"} // its text has MIT's first words too
	case has("Creative Commons Attribution 4.0"):
		return []string{"CC-BY-4.0"}
	}
	var out []string
	if has("FreeType License") {
		out = append(out, "FTL")
	}
	if has("GNU General Public License", "version 2 or later") {
		out = append(out, "GPL-2+")
	}
	if has("Apache License", "Version 2.0") {
		out = append(out, "Apache-2.0")
	}
	if has("Mozilla Public License") {
		out = append(out, "MPL-2.0")
	}
	if has("Redistribution and use in source and binary forms") {
		if regexp.MustCompile(`Neither the name|names of its\s+contributors|name of the copyright holder`).MatchString(text) {
			out = append(out, "BSD-3-clause")
		} else {
			out = append(out, "BSD-2-clause")
		}
	}
	if has("Permission is hereby granted, free of charge") {
		out = append(out, "Expat")
	}
	if regexp.MustCompile(`Permission to use, copy, modify, and(/or)? distribute`).MatchString(text) {
		out = append(out, "ISC")
	}
	return out
}
