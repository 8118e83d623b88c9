package agentd

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/isolator/cgroups"
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
	cc := c.cgroupsConfig(cgroupsConfigZero(), "/var/lib/brim/agent")
	if cc.Policy == nil || cc.Policy.BestEffortOOMScoreAdj != 1000 || len(cc.IOPaths) != 0 {
		t.Errorf("cgroups config without the io guard: %+v", cc)
	}
	c.IOGuard = true
	if cc := c.cgroupsConfig(cgroupsConfigZero(), "/var/lib/brim/agent"); len(cc.IOPaths) != 1 || cc.IOPaths[0] != "/var/lib/brim/agent" {
		t.Errorf("cgroups config with the io guard: %+v", cc)
	}
}

func cgroupsConfigZero() cgroups.Config { return cgroups.Config{} }
