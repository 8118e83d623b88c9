package integration

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

// waitLogged waits until the agent's log says logged n times.
func (a *agentProc) waitLogged(logged string, n int) {
	a.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(a.logPath)
		if strings.Count(string(b), logged) >= n {
			return
		}
		if time.Now().After(deadline) || !a.running() {
			a.t.Fatalf("agent log does not say %q %d times (running %v):\n%s", logged, n, a.running(), b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAgentHangup: SIGHUP never ends the agent (it used to exit 129 and
// leave its socket behind). Without --config it is logged; with --config
// the file is read again: a new log level takes effect, and a file that
// does not load is logged and keeps the level in force.
func TestAgentHangup(t *testing.T) {
	hangup := func(a *agentProc) {
		t.Helper()
		if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("without --config", func(t *testing.T) {
		a := startAgent(t)
		hangup(a)
		a.waitLogged("SIGHUP: no --config to reload", 1)
		if !a.running() {
			t.Fatal("agent ended on SIGHUP")
		}
		if _, err := os.Stat(a.Socket); err != nil {
			t.Errorf("socket after SIGHUP: %v", err)
		}
		a.mustBrim("container", "ls")
	})
	t.Run("with --config", func(t *testing.T) {
		dir := t.TempDir()
		conf := writeTemp(t, dir, "agent.toml", `log-level = "warn"`)
		a := startAgent(t, "--config", conf)
		id := strings.TrimSpace(a.mustBrim("container", "run", "--name", "quiet", "--", "/bin/true"))
		a.mustBrim("container", "wait", id)
		if b, _ := os.ReadFile(a.logPath); strings.Contains(string(b), "launched container") {
			t.Errorf("info logged at level warn from --config:\n%s", b)
		}
		writeTemp(t, dir, "agent.toml", `log-level = "info"`)
		hangup(a)
		a.waitLogged("SIGHUP: settings reloaded", 1)
		a.mustBrim("container", "run", "--name", "loud", "--", "/bin/true")
		a.waitLogged("launched container", 1)

		writeTemp(t, dir, "agent.toml", `log-level = "loud"`)
		hangup(a)
		a.waitLogged("the previous ones stay in force", 1)
		a.mustBrim("container", "run", "--name", "still-loud", "--", "/bin/true")
		a.waitLogged("launched container", 2)
		if !a.running() {
			t.Fatal("agent ended on SIGHUP")
		}
	})
	t.Run("plugins", func(t *testing.T) {
		dir := t.TempDir()
		conf := writeTemp(t, dir, "agent.toml", "estimator = \"fixed\"\nestimator-opt = [\"resources=cpus:1;mem:128\"]\nestimator-interval = \"1s\"\n")
		a := startAgent(t, "--config", conf)
		a.waitInfo("revocable total", "cpus:1;mem:128", "qos controller", "noop")
		// A new estimator option and QoS controller take effect without a
		// restart; a changed setting that needs one is named, not applied.
		writeTemp(t, dir, "agent.toml", "estimator = \"fixed\"\nestimator-opt = [\"resources=cpus:0.5;mem:64\"]\nestimator-interval = \"1s\"\n"+
			"qos = \"interference\"\nsandbox-retention = \"5\"\n")
		hangup(a)
		a.waitLogged("SIGHUP: settings reloaded", 1)
		a.waitLogged("changed settings that need a restart were not applied", 1)
		a.waitLogged("--sandbox-retention", 1)
		a.waitInfo("revocable total", "cpus:0.5;mem:64", "qos controller", "interference")
		// An estimator that does not open keeps the one in force.
		writeTemp(t, dir, "agent.toml", "estimator = \"fixed\"\nestimator-opt = [\"resources=plenty\"]\nestimator-interval = \"1s\"\nqos = \"interference\"\n")
		hangup(a)
		a.waitLogged("the previous ones stay in force", 1)
		a.waitInfo("revocable total", "cpus:0.5;mem:64", "qos controller", "interference")
	})
}

// waitInfo waits until `brim agent info` shows each key's line holding
// its value (keys and values alternate).
func (a *agentProc) waitInfo(kv ...string) {
	a.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := a.brim("agent", "info").stdout
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			line := ""
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, kv[i]) {
					line = l
				}
			}
			ok = ok && strings.Contains(line, kv[i+1])
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("agent info does not show %q:\n%s", kv, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestAgentRefusesSubstitutes: flags that used to be replaced silently
// (--kill-grace 0 or negative became 10 s, a zero --status-retry-min
// 10 s) are refused, naming the flag, by brim agent and brim dev alike
// (one assembly path), with nothing created.
func TestAgentRefusesSubstitutes(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kill-grace", "0s"}, "--kill-grace 0s: must be positive"},
		{[]string{"--kill-grace", "-1s"}, "--kill-grace -1s: must be positive"},
		{[]string{"--status-retry-min", "0s"}, "--status-retry-min 0s: must be positive"},
		{[]string{"--status-retry-min", "1m", "--status-retry-max", "1s"}, "--status-retry-max 1s: must be at least --status-retry-min"},
		{[]string{"--network-host-rate", "0"}, "--network-host-rate 0: must be positive"},
		{[]string{"--config", "/nonexistent/agent.toml"}, "read config /nonexistent/agent.toml"},
		{[]string{"--config", "agent.toml"}, `--config "agent.toml": must be an absolute path`},
		{[]string{"--config", "@BAD_KEY"}, `unknown key "kill_grace"`},
		{[]string{"--config", "@BAD_VALUE"}, `key "kill-grace"`},
	} {
		confDir := t.TempDir()
		for i, a := range tc.args {
			switch a {
			case "@BAD_KEY":
				tc.args[i] = writeTemp(t, confDir, "agent.toml", `kill_grace = "3s"`)
			case "@BAD_VALUE":
				tc.args[i] = writeTemp(t, confDir, "agent.toml", `kill-grace = "soon"`)
			}
		}
		for _, sub := range []string{"agent", "dev"} {
			base := t.TempDir()
			state, sock := filepath.Join(base, "state"), filepath.Join(base, "run", "agent.sock")
			parent := "/" + testutil.UniqueName("brim-test")
			args := append([]string{sub, "--state-dir", state, "--socket", sock, "--cgroup-parent", parent}, tc.args...)
			if sub == "dev" {
				args = append(args, "--listen", "127.0.0.1:0")
			}
			r := runBrimBounded(t, parent, args...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("%s %v: exit %d, stderr %q; want 2 and %q", sub, tc.args, r.code, r.stderr, tc.want)
			}
			for _, p := range []string{state, filepath.Dir(sock), filepath.Join(testutil.CgroupRoot, "cpu", parent)} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s %v: %s was created", sub, tc.args, p)
				}
			}
		}
	}
}

// TestConfigFile: every flag is a key of --config, flags win over the
// file, and `brim agent config` / `brim master config` print the effective
// configuration, which loads back as it is.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	none := "/" + testutil.UniqueName("brim-test") // no command here makes a cgroup
	conf := writeTemp(t, dir, "agent.toml", "kill-grace = \"3s\"\nresources = \"cpus:1;mem:256\"\nestimator-opt = [\"a=1\", \"b=2\"]\n")
	r := runBrimBounded(t, none, "agent", "config", "--config", conf, "--kill-grace", "7s")
	if r.code != 0 {
		t.Fatalf("agent config: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{`kill-grace = "7s"`, `resources = "cpus:1;mem:256"`, `estimator-opt = ["a=1", "b=2"]`} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("agent config lacks %s:\n%s", want, r.stdout)
		}
	}
	// The printed configuration is itself a valid file.
	again := writeTemp(t, dir, "effective.toml", r.stdout)
	if r2 := runBrimBounded(t, none, "agent", "config", "--config", again); r2.code != 0 || r2.stdout != r.stdout {
		t.Errorf("effective configuration does not load back the same: exit %d %s\n%s", r2.code, r2.stderr, r2.stdout)
	}
	// The commented form (the package's default file) loads as no keys.
	r3 := runBrimBounded(t, none, "master", "config", "--commented")
	def := runBrimBounded(t, none, "master", "config")
	commented := writeTemp(t, dir, "master.toml", r3.stdout)
	if r4 := runBrimBounded(t, none, "master", "config", "--config", commented); r4.code != 0 || r4.stdout != def.stdout {
		t.Errorf("commented master config: exit %d %s\n%s", r4.code, r4.stderr, r4.stdout)
	}
	bad := writeTemp(t, dir, "bad.toml", "listen = \"127.0.0.1:0\"\nsorter = \"drf\"\nallocation_interval = \"1s\"\n")
	if r5 := runBrimBounded(t, none, "master", "--config", bad); r5.code != 2 || !strings.Contains(r5.stderr, `unknown key "allocation_interval"`) {
		t.Errorf("master with an unknown key: exit %d, %s", r5.code, r5.stderr)
	}
}
