package agentd

import (
	"time"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/isolator/cgroups"
	"github.com/brimnode/brim/pressure"
	"github.com/brimnode/brim/qos"
)

// SafetyConfig is the memory and IO safety of oversubscription: how the
// cgroup isolator treats revocable and guaranteed containers
// (cgroups.Policy) and the pressure guards (package pressure), which run
// with oversubscription (docs/oversubscription.md, "Memory and IO
// safety").
type SafetyConfig struct {
	GuaranteedOOMScoreAdj int     // --oom-score-adj: [-1000, 1000], below RevocableOOMScoreAdj
	RevocableOOMScoreAdj  int     // --revocable-oom-score-adj: [-1000, 1000]
	RevocableMemorySoft   float64 // --revocable-memory-soft: (0, 1] of the memory limit
	GuaranteedMemoryLow   float64 // --memory-low: [0, 1] of the memory limit (v2)

	MemoryGuard      bool          // --memory-guard
	MemoryGuardUsage float64       // --memory-guard-usage: (0, 1]
	MemoryGuardStall float64       // --memory-guard-stall: (0, 1]
	MemoryGuardEvery time.Duration // --memory-guard-interval: at least MinLoopInterval

	IOGuard      bool    // --io-guard (throttles on the state dir's disk)
	IOGuardStall float64 // --io-guard-stall: (0, 1]
	IOGuardBPS   int64   // --io-guard-bps: read and write cap in bytes/s, positive
	// IOGuardRecover is --io-guard-recover: healthy time before the
	// throttles are lifted, positive.
	IOGuardRecover time.Duration
}

// DefaultSafety returns the defaults: cgroups.DefaultPolicy, the memory
// guard on (90 % of the parent's or node's memory, or a guaranteed
// container stalled 10 % of the time, every 500 ms), the IO guard off.
func DefaultSafety() SafetyConfig {
	p := cgroups.DefaultPolicy()
	return SafetyConfig{
		GuaranteedOOMScoreAdj: p.GuaranteedOOMScoreAdj, RevocableOOMScoreAdj: p.BestEffortOOMScoreAdj,
		RevocableMemorySoft: p.BestEffortMemorySoft, GuaranteedMemoryLow: p.GuaranteedMemoryLow,
		MemoryGuard: true, MemoryGuardUsage: 0.9, MemoryGuardStall: 0.1, MemoryGuardEvery: 500 * time.Millisecond,
		IOGuardStall: 0.2, IOGuardBPS: 10 << 20, IOGuardRecover: 10 * time.Second,
	}
}

func (s SafetyConfig) policy() *cgroups.Policy {
	return &cgroups.Policy{GuaranteedOOMScoreAdj: s.GuaranteedOOMScoreAdj, BestEffortOOMScoreAdj: s.RevocableOOMScoreAdj,
		BestEffortMemorySoft: s.RevocableMemorySoft, GuaranteedMemoryLow: s.GuaranteedMemoryLow}
}

// validate checks every field; errors are *ConfigError naming the flag.
func (s SafetyConfig) validate() error {
	switch {
	case s.GuaranteedOOMScoreAdj < -1000 || s.GuaranteedOOMScoreAdj > 1000:
		return bad("--oom-score-adj", "%d: want -1000 to 1000", s.GuaranteedOOMScoreAdj)
	case s.RevocableOOMScoreAdj < -1000 || s.RevocableOOMScoreAdj > 1000:
		return bad("--revocable-oom-score-adj", "%d: want -1000 to 1000", s.RevocableOOMScoreAdj)
	case s.RevocableOOMScoreAdj <= s.GuaranteedOOMScoreAdj:
		return bad("--revocable-oom-score-adj", "%d: must be above --oom-score-adj %d (revocable work goes first)", s.RevocableOOMScoreAdj, s.GuaranteedOOMScoreAdj)
	case !(s.RevocableMemorySoft > 0 && s.RevocableMemorySoft <= 1):
		return bad("--revocable-memory-soft", "%v: want a fraction of the memory limit in (0, 1]", s.RevocableMemorySoft)
	case !(s.GuaranteedMemoryLow >= 0 && s.GuaranteedMemoryLow <= 1):
		return bad("--memory-low", "%v: want a fraction of the memory limit in [0, 1]", s.GuaranteedMemoryLow)
	case !(s.MemoryGuardUsage > 0 && s.MemoryGuardUsage <= 1):
		return bad("--memory-guard-usage", "%v: want a fraction in (0, 1]", s.MemoryGuardUsage)
	case !(s.MemoryGuardStall > 0 && s.MemoryGuardStall <= 1):
		return bad("--memory-guard-stall", "%v: want a fraction in (0, 1]", s.MemoryGuardStall)
	case s.MemoryGuardEvery < MinLoopInterval:
		return bad("--memory-guard-interval", "%s: at least %s", s.MemoryGuardEvery, MinLoopInterval)
	case !(s.IOGuardStall > 0 && s.IOGuardStall <= 1):
		return bad("--io-guard-stall", "%v: want a fraction in (0, 1]", s.IOGuardStall)
	case s.IOGuardBPS <= 0:
		return bad("--io-guard-bps", "%d: must be positive (bytes per second)", s.IOGuardBPS)
	case s.IOGuardRecover <= 0:
		return bad("--io-guard-recover", "%s: must be positive", s.IOGuardRecover)
	}
	return nil
}

// cgroupsConfig adds the policy and, with the IO guard or a QoS
// controller that throttles io (qosIO), the disk to throttle (the state
// dir's: it holds the sandboxes) to c.
func (s SafetyConfig) cgroupsConfig(c cgroups.Config, stateDir string, qosIO bool) cgroups.Config {
	c.Policy = s.policy()
	if s.IOGuard || qosIO {
		c.IOPaths = []string{stateDir}
	}
	return c
}

// guards sets the pressure guards of over (nil: no oversubscription).
func (s SafetyConfig) guards(over *agent.Oversub, cg *cgroups.Isolator) {
	if over == nil {
		return
	}
	if s.MemoryGuard {
		over.MemoryGuard = &pressure.MemoryConfig{Interval: s.MemoryGuardEvery, UsageThreshold: s.MemoryGuardUsage, StallThreshold: s.MemoryGuardStall}
		over.MemoryScope = cg
	}
	if s.IOGuard {
		over.IOGuard = &pressure.IOConfig{StallThreshold: s.IOGuardStall, RecoverAfter: s.IOGuardRecover,
			Limit: cgroups.IOLimit{ReadBPS: s.IOGuardBPS, WriteBPS: s.IOGuardBPS}}
		over.IOThrottler = cg
	}
}

// The cgroups isolator is the QoS controller's IO actuator too (its
// THROTTLE_IO correction, qos io-throttle=): the agent's actuator finds
// SetIOLimit on it.
var _ qos.IOActuator = (*cgroups.Isolator)(nil)
