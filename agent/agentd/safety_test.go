package agentd

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/qos"
)

func TestSafetyValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, tt := range []struct {
		flag string
		mod  func(*SafetyConfig)
	}{
		{"--oom-score-adj", func(s *SafetyConfig) { s.GuaranteedOOMScoreAdj = -1001 }},
		{"--revocable-oom-score-adj", func(s *SafetyConfig) { s.RevocableOOMScoreAdj = 1001 }},
		{"--revocable-oom-score-adj", func(s *SafetyConfig) { s.GuaranteedOOMScoreAdj, s.RevocableOOMScoreAdj = 500, 500 }},
		{"--revocable-memory-soft", func(s *SafetyConfig) { s.RevocableMemorySoft = 0 }},
		{"--memory-low", func(s *SafetyConfig) { s.GuaranteedMemoryLow = 2 }},
		{"--memory-guard-usage", func(s *SafetyConfig) { s.MemoryGuardUsage = 1.1 }},
		{"--memory-guard-stall", func(s *SafetyConfig) { s.MemoryGuardStall = 0 }},
		{"--memory-guard-interval", func(s *SafetyConfig) { s.MemoryGuardEvery = time.Millisecond }},
		{"--io-guard-stall", func(s *SafetyConfig) { s.IOGuardStall = -1 }},
		{"--io-guard-bps", func(s *SafetyConfig) { s.IOGuardBPS = 0 }},
		{"--io-guard-recover", func(s *SafetyConfig) { s.IOGuardRecover = 0 }},
	} {
		c := DefaultConfig()
		tt.mod(&c.Safety)
		err := c.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Flag != tt.flag || !strings.HasPrefix(err.Error(), tt.flag+" ") {
			t.Errorf("%s: Validate = %v, want a *ConfigError naming it", tt.flag, err)
		}
	}
	c := DefaultConfig().Safety
	cc := c.cgroupsConfig(cgroupsConfigZero(), "/var/lib/brim/agent", false)
	if cc.Policy == nil || cc.Policy.BestEffortOOMScoreAdj != 1000 || len(cc.IOPaths) != 0 {
		t.Errorf("cgroups config without the io guard: %+v", cc)
	}
	if cc := c.cgroupsConfig(cgroupsConfigZero(), "/var/lib/brim/agent", true); len(cc.IOPaths) != 1 || cc.IOPaths[0] != "/var/lib/brim/agent" {
		t.Errorf("cgroups config for a QoS controller that throttles io: %+v", cc)
	}
	c.IOGuard = true
	if cc := c.cgroupsConfig(cgroupsConfigZero(), "/var/lib/brim/agent", false); len(cc.IOPaths) != 1 || cc.IOPaths[0] != "/var/lib/brim/agent" {
		t.Errorf("cgroups config with the io guard: %+v", cc)
	}
}

// TestQoSIOThrottleNeedsTheHost: a QoS controller that throttles io is
// refused, naming its option, where the agent's cgroups cannot throttle
// io — every THROTTLE_IO would fail and cost a round before the
// controller froze the writer (3.4 s to the first correction in a
// colocation run, goal 2 s); one that does not throttle io is not.
func TestQoSIOThrottleNeedsTheHost(t *testing.T) {
	open := func(opts ...string) qos.Controller {
		t.Helper()
		o, err := qos.ParseOptions(opts)
		if err != nil {
			t.Fatal(err)
		}
		c, err := qos.NewInterference(o, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cannot := func() error { return fmt.Errorf("no disk to throttle: %w", qos.ErrNotSupported) }
	can := func() error { return nil }
	err := checkIOThrottle(open("io-throttle=1048576"), cannot)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Flag != "--qos-opt" || !strings.Contains(err.Error(), "io-throttle=1048576") || !errors.Is(err, qos.ErrNotSupported) {
		t.Errorf("io-throttle on a host that cannot: %v, want a *ConfigError naming --qos-opt io-throttle", err)
	}
	if err := checkIOThrottle(open("io-throttle=1048576"), can); err != nil {
		t.Errorf("io-throttle on a host that can: %v", err)
	}
	if err := checkIOThrottle(open(), cannot); err != nil {
		t.Errorf("no io-throttle on a host that cannot: %v", err)
	}
	if err := checkIOThrottle(qos.Noop{}, cannot); err != nil {
		t.Errorf("noop on a host that cannot: %v", err)
	}
}

func cgroupsConfigZero() cgroups.Config { return cgroups.Config{} }
