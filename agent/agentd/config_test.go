package agentd

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/estimator"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/isolator/network"
	"github.com/brimnode/brim/qos"
)

// moved from cmd/brim (TestAgentFlags)
func TestAgentFlags(t *testing.T) {
	for in, want := range map[string]string{"brim": "/brim", "/brim": "/brim", "a/b/": "/a/b"} {
		if got, err := cgroupParent(in); err != nil || got != want {
			t.Errorf("cgroupParent(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"/", "", "."} {
		if _, err := cgroupParent(bad); err == nil {
			t.Errorf("cgroupParent(%q) accepted", bad)
		}
	}
	r, err := parseResources("cpus:1.5;mem:2048;disk:100", false)
	if err != nil || r != (agent.Resources{MilliCPUs: 1500, MemMiB: 2048, DiskMiB: 100}) {
		t.Fatalf("agentResources = %+v, %v", r, err)
	}
	if r, err := parseResources("", false); err != nil || r.MilliCPUs <= 0 || r.MemMiB <= 0 {
		t.Fatalf("host resources = %+v, %v", r, err)
	}
	for _, bad := range []string{"cpus:x", "mem:100", "cpus:1;mem:lots"} {
		if _, err := parseResources(bad, false); err == nil {
			t.Errorf("agentResources(%q) accepted", bad)
		}
	}
}

// moved from cmd/brim (agent_network_test.go)
func TestCheckNetworkState(t *testing.T) {
	dir := t.TempDir()
	if err := checkNetworkState(dir, false); err != nil {
		t.Errorf("empty state dir: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "network"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "network", "abc.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkNetworkState(dir, false); err == nil {
		t.Error("agent without --network accepted over networked containers")
	}
	if err := checkNetworkState(dir, true); err != nil {
		t.Errorf("with --network: %v", err)
	}
}

// moved from cmd/brim (TestNetworkFlagsConfig)
func TestNetworkFlagsConfig(t *testing.T) {
	n := NetworkConfig{Bridge: "brim0", Subnet: "10.77.0.0/16", HostRateMbit: 1000, PortRange: "20000-20099"}
	cfg, err := n.resolve("/var/lib/brim/agent")
	if err != nil || cfg.StateDir != "/var/lib/brim/agent/network" || cfg.Subnet.String() != "10.77.0.0/16" || cfg.HostRateMbit != 1000 ||
		cfg.PortRange != (isolator.PortRange{First: 20000, Last: 20099}) {
		t.Errorf("config: %+v, %v", cfg, err)
	}
	n.AllowHost, n.Isolate = []string{"53/udp", "53", "8125/udp"}, true
	cfg, err = n.resolve("/var/lib/brim/agent")
	want := []network.HostPort{{Port: 53, Protocol: "udp"}, {Port: 53, Protocol: "tcp"}, {Port: 8125, Protocol: "udp"}}
	if err != nil || !slices.Equal(cfg.HostAllow, want) || !cfg.Isolate {
		t.Errorf("--network-allow-host 53/udp,53,8125/udp --network-isolate: %+v, %v", cfg, err)
	}
	for _, bad := range []NetworkConfig{{Subnet: "10.77.0.0", HostRateMbit: 1, PortRange: "1-2"}, {Subnet: "10.77.0.0/16", HostRateMbit: 0, PortRange: "1-2"},
		{Subnet: "10.77.0.0/16", HostRateMbit: 1}} {
		if _, err := bad.resolve("/x"); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestValidate: every bad setting is refused with a *ConfigError naming
// its flag; no value is replaced by a default (a zero or negative
// --kill-grace used to become 10 s, a zero --status-retry-min 10 s).
func TestValidate(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "not-a-plugin")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, flag, msg string
		edit            func(*Config)
	}{
		{"relative socket", "--socket", "must be an absolute path", func(c *Config) { c.Socket = "agent.sock" }},
		{"relative state dir", "--state-dir", "must be an absolute path", func(c *Config) { c.StateDir = "state" }},
		{"relative run dir", "--run-dir", `run dir "run" is not an absolute path`, func(c *Config) { c.RunDir = "run" }},
		{"run dir in the sandboxes", "--run-dir", "and the state dir's containers/ overlap", func(c *Config) { c.RunDir = c.StateDir + "/containers" }},
		{"bad resources", "--resources", "mem:lots", func(c *Config) { c.Resources = "cpus:2;mem:lots" }},
		{"no cpus", "--resources", "need positive cpus and mem", func(c *Config) { c.Resources = "mem:100" }},
		{"cpus beyond the host", "--resources", `"cpus:100000;mem:100": cpus 100000 exceeds the host's`, func(c *Config) { c.Resources = "cpus:100000;mem:100" }},
		{"mem beyond the host", "--resources", "mem 1073741824 exceeds the host's", func(c *Config) { c.Resources = "cpus:1;mem:1073741824" }},
		{"bad cpu limit mode", "--cpu-limit-mode", `cpu limit mode "hard": want shares, quota or both`, func(c *Config) { c.CPULimitMode = "hard" }},
		{"ports resource", "--resources", "the host ports of port mappings are --network-port-range (default 31000-32000)", func(c *Config) { c.Resources = "cpus:2;mem:100;ports:[31000-32000]" }},
		{"bad port range", "--network-port-range", `port range "32000-31000": start above end`, func(c *Config) { c.Network.PortRange = "32000-31000" }},
		{"empty port range", "--network-port-range", "want START-END", func(c *Config) { c.Network.PortRange = "" }},
		{"bad retention", "--sandbox-retention", "--sandbox-retention", func(c *Config) { c.Retention = "lots" }},
		{"root cgroup parent", "--cgroup-parent", "want a cgroup path", func(c *Config) { c.CgroupParent = "/" }},
		{"zero kill grace", "--kill-grace", "--kill-grace 0s: must be positive", func(c *Config) { c.KillGrace = 0 }},
		{"negative kill grace", "--kill-grace", "--kill-grace -1s: must be positive", func(c *Config) { c.KillGrace = -time.Second }},
		{"bad log size", "--log-max-size", "--log-max-size size \"lots\"", func(c *Config) { c.Logs.MaxSize = "lots" }},
		{"tiny log size", "--log-max-size", "--log-max-size 1k: want at least 64KiB", func(c *Config) { c.Logs.MaxSize = "1k" }},
		{"no log files", "--log-max-files", "--log-max-files 0: want 1 to 1000", func(c *Config) { c.Logs.MaxFiles = 0 }},
		{"bad log rate", "--log-rate", "--log-rate size \"-1\"", func(c *Config) { c.Logs.Rate = "-1" }},
		{"negative warm sandboxes", "--warm-sandboxes", "--warm-sandboxes -1: want 0 (none) to 64", func(c *Config) { c.Warm.Sandboxes = -1 }},
		{"too many warm sandboxes", "--warm-sandboxes", "--warm-sandboxes 65: want 0 (none) to 64", func(c *Config) { c.Warm.Sandboxes = 65 }},
		{"zero warm idle", "--warm-sandbox-idle", "--warm-sandbox-idle 0s: must be positive", func(c *Config) { c.Warm.Idle = 0 }},
		{"bad warm memory", "--warm-sandbox-memory", "--warm-sandbox-memory size \"lots\"", func(c *Config) { c.Warm.Memory = "lots" }},
		{"zero warm memory", "--warm-sandbox-memory", "--warm-sandbox-memory 0: must be positive", func(c *Config) { c.Warm.Memory = "0" }},
		{"negative socket idle timeout", "--socket-idle-timeout", "--socket-idle-timeout -1s: must not be negative", func(c *Config) { c.SocketIdleTimeout = -time.Second }},
		{"negative socket connections", "--socket-max-connections", "--socket-max-connections -1: must not be negative", func(c *Config) { c.SocketMaxConns = -1 }},
		{"relative config", "--config", "must be an absolute path", func(c *Config) { c.ConfigFile = "brim.toml" }},
		{"bad subnet", "--network-subnet", "--network-subnet", func(c *Config) { c.Network.Subnet = "10.0.0.0" }},
		{"zero host rate", "--network-host-rate", "must be positive", func(c *Config) { c.Network.HostRateMbit = 0 }},
		{"negative host rate", "--network-host-rate", "must be positive", func(c *Config) { c.Network.HostRateMbit = -5 }},
		{"allowed host port 0", "--network-allow-host", `"0": 0 is out of range 1-65535`, func(c *Config) { c.Network.AllowHost = []string{"0"} }},
		{"allowed host port 70000", "--network-allow-host", `"70000/udp": 70000 is out of range`, func(c *Config) { c.Network.AllowHost = []string{"70000/udp"} }},
		{"allowed host protocol", "--network-allow-host", `protocol "sctp"`, func(c *Config) { c.Network.AllowHost = []string{"53/sctp"} }},
		{"allowed host port twice", "--network-allow-host", "53/tcp: listed twice", func(c *Config) { c.Network.AllowHost = []string{"53", "53/tcp"} }},
		{"short estimator interval", "--estimator-interval", "--estimator-interval 100ms: must be at least 1s", func(c *Config) { c.Oversub.EstimatorInterval = 100 * time.Millisecond }},
		{"zero estimator interval", "--estimator-interval", "must be at least 1s", func(c *Config) { c.Oversub.EstimatorInterval = 0 }},
		{"negative estimator interval", "--estimator-interval", "must be at least 1s", func(c *Config) { c.Oversub.EstimatorInterval = -time.Second }},
		{"zero qos interval", "--qos-interval", "--qos-interval 0s: must be at least", func(c *Config) { c.Oversub.QoSInterval = 0 }},
		{"negative qos interval", "--qos-interval", "must be at least", func(c *Config) { c.Oversub.QoSInterval = -time.Second }},
		{"zero monitor interval", "--monitor-interval", "must be at least", func(c *Config) { c.Oversub.MonitorInterval = 0 }},
		{"tiny monitor interval", "--monitor-interval", "--monitor-interval 1ms: must be at least", func(c *Config) { c.Oversub.MonitorInterval = time.Millisecond }},
		{"bad metrics address", "--metrics-listen", `--metrics-listen "nope": want host:port`, func(c *Config) { c.Oversub.MetricsListen = "nope" }},
		{"empty estimator", "--estimator", "--estimator: empty", func(c *Config) { c.Oversub.Estimator = " " }},
		{"empty qos", "--qos", "--qos: empty", func(c *Config) { c.Oversub.QoS = "" }},
		{"missing plugin", "--estimator", "no such file or directory", func(c *Config) { c.Oversub.Estimator = "plugin:/nonexistent/estimator" }},
		{"relative plugin", "--qos", "must be absolute", func(c *Config) { c.Oversub.QoS = "plugin:bin/qos" }},
		{"plugin not executable", "--qos", "not an executable file", func(c *Config) { c.Oversub.QoS = "plugin:" + notExec }},
		{"zero status retry", "--status-retry-min", "--status-retry-min 0s: must be positive", func(c *Config) { c.Link.RetryMin = 0 }},
		{"negative status retry", "--status-retry-min", "must be positive", func(c *Config) { c.Link.RetryMin = -time.Second }},
		{"retry max below min", "--status-retry-max", "at least --status-retry-min", func(c *Config) { c.Link.RetryMin, c.Link.RetryMax = time.Minute, time.Second }},
		{"principal with colon", "--principal", "must not contain ':'", func(c *Config) { c.Link.Principal = "a:b" }},
		{"negative perf score", "--perf-score", "must be a positive number", func(c *Config) { c.Link.PerfScore = -1 }},
		{"userns without a range", "--userns", "needs --userns-range", func(c *Config) { c.Security.UserNS = true }},
		{"malformed userns range", "--userns-range", "want START:COUNT", func(c *Config) { c.Security.UserNSRange = "1:x" }},
		{"userns range over root", "--userns-range", "includes host root", func(c *Config) { c.Security.UserNSRange = "0:65536" }},
		{"userns name without a file", "--userns-range", "no such file", func(c *Config) {
			c.Security.UserNSRange, c.Security.SubUIDFile = "brim", "/nonexistent/subuid"
		}},
		{"default user outside the range", "--default-user", "outside the user namespace", func(c *Config) {
			c.Security.UserNS, c.Security.UserNSRange = true, "100000:1000"
		}},
	} {
		for _, preset := range []struct {
			name string
			cfg  Config
		}{{"default", DefaultConfig()}, {"dev", DevConfig()}} {
			c := preset.cfg
			c.Resources = "cpus:1;mem:512"
			tc.edit(&c)
			err := c.Validate()
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Flag != tc.flag || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), tc.flag) {
				t.Errorf("%s (%s): %v; want a ConfigError for %s saying %q", tc.name, preset.name, err, tc.flag, tc.msg)
			}
		}
	}
}

// TestPresetsValid: both presets pass the checks they share, and the dev
// preset differs only where brim dev means to.
func TestPresetsValid(t *testing.T) {
	def, dev := DefaultConfig(), DevConfig()
	for _, c := range []Config{def, dev} {
		if err := c.Validate(); err != nil {
			t.Errorf("preset %+v: %v", c, err)
		}
	}
	if dev.StateDir != filepath.Join(DevStateDir, "agent") || dev.Socket != filepath.Join(DevStateDir, "agent.sock") ||
		dev.CgroupParent != "brim-dev" || dev.KillGrace != 5*time.Second {
		t.Errorf("dev preset: %+v", dev)
	}
	dev.StateDir, dev.Socket, dev.CgroupParent, dev.KillGrace = def.StateDir, def.Socket, def.CgroupParent, def.KillGrace
	if dev.Retention != def.Retention || !reflect.DeepEqual(dev.Network, def.Network) || dev.Link.RetryMin != def.Link.RetryMin ||
		dev.Oversub.EstimatorInterval != def.Oversub.EstimatorInterval || dev.Oversub.Estimator != def.Oversub.Estimator {
		t.Errorf("dev preset drifted from the default beyond its own settings: %+v vs %+v", dev, def)
	}
}

func testDeps() Deps {
	ereg := estimator.NewRegistry()
	estimator.RegisterBuiltins(ereg)
	qreg := qos.NewRegistry()
	qos.RegisterBuiltins(qreg)
	return Deps{Estimators: ereg, QoS: qreg, Level: new(slog.LevelVar)}
}

// TestNewRefusesBeforeCreating: New goes through Validate and the
// registries for both presets (DevConfig takes the same path) and creates
// nothing on the host: no state dir, no socket.
func TestNewRefusesBeforeCreating(t *testing.T) {
	for _, tc := range []struct {
		name, flag string
		edit       func(*Config)
	}{
		{"kill grace", "--kill-grace", func(c *Config) { c.KillGrace = 0 }},
		{"unknown estimator", "--estimator", func(c *Config) { c.Oversub.Estimator = "bogus" }},
		{"unknown qos", "--qos", func(c *Config) { c.Oversub.QoS = "bogus" }},
		{"bad estimator option", "--estimator-opt", func(c *Config) { c.Oversub.EstimatorOpts = []string{"novalue"} }},
		{"fixed estimator without resources", "--estimator", func(c *Config) { c.Oversub.Estimator = "fixed" }},
	} {
		for _, preset := range []Config{DefaultConfig(), DevConfig()} {
			dir := t.TempDir()
			c := preset
			c.StateDir, c.Socket, c.Resources = filepath.Join(dir, "state"), filepath.Join(dir, "run", "agent.sock"), "cpus:1;mem:512"
			tc.edit(&c)
			d, err := New(c, testDeps())
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Flag != tc.flag {
				if d != nil {
					d.Close()
				}
				t.Errorf("%s: %v, want a ConfigError for %s", tc.name, err, tc.flag)
			}
			for _, p := range []string{c.StateDir, filepath.Dir(c.Socket)} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s: %s was created", tc.name, p)
				}
			}
		}
	}
}

// TestReloadable: SIGHUP applies what Deps.Reload reads; a configuration
// that does not load, or a level that does not parse, keeps the level in
// force; without --config nothing is read.
func TestReloadable(t *testing.T) {
	dir := t.TempDir()
	next := Reloadable{LogLevel: "warn"}
	var nextErr error
	reads := 0
	c := DefaultConfig()
	c.StateDir, c.Socket, c.Resources, c.ConfigFile = filepath.Join(dir, "state"), filepath.Join(dir, "a.sock"), "cpus:1;mem:512", "/etc/brim/agent.toml"
	deps := testDeps()
	deps.Reload = func() (Reloadable, error) { reads++; return next, nextErr }
	d, err := New(c, deps)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.reload(context.Background())
	if deps.Level.Level() != slog.LevelWarn {
		t.Errorf("level after a reload: %v, want warn", deps.Level.Level())
	}
	next = Reloadable{LogLevel: "loud"}
	d.reload(context.Background())
	if deps.Level.Level() != slog.LevelWarn {
		t.Errorf("level after a reload of a bad level: %v, want warn (kept)", deps.Level.Level())
	}
	next, nextErr = Reloadable{LogLevel: "debug"}, errors.New("config: unknown key")
	d.reload(context.Background())
	if deps.Level.Level() != slog.LevelWarn {
		t.Errorf("level after a failed reload: %v, want warn (kept)", deps.Level.Level())
	}
	d.cfg.ConfigFile = ""
	before := reads
	d.reload(context.Background())
	if reads != before {
		t.Error("reloaded without --config")
	}
}

// --overcommit lets --resources name more than the host has; the cpu
// limit mode defaults to shares and takes the three modes.
func TestOvercommitAndCPUMode(t *testing.T) {
	c := DefaultConfig()
	c.Resources, c.Overcommit = "cpus:100000;mem:100", true
	r, err := c.resolve()
	if err != nil || r.total.MilliCPUs != 100000000 || r.cpuMode != "shares" {
		t.Fatalf("--overcommit --resources cpus:100000: %+v, %v", r.total, err)
	}
	for _, m := range []string{"shares", "quota", "both"} {
		c.CPULimitMode = m
		if r, err := c.resolve(); err != nil || string(r.cpuMode) != m {
			t.Errorf("--cpu-limit-mode %s: %v, %v", m, r.cpuMode, err)
		}
	}
}
