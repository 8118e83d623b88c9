package main

import (
	"github.com/spf13/pflag"

	"github.com/brimnode/brim/agent/agentd"
)

// registerSafetyFlags binds the memory and IO safety flags of
// oversubscription (agentd.SafetyConfig) to s, with s's values as
// defaults.
func registerSafetyFlags(f *pflag.FlagSet, s *agentd.SafetyConfig) {
	f.IntVar(&s.GuaranteedOOMScoreAdj, "oom-score-adj", s.GuaranteedOOMScoreAdj, "oom_score_adj of non-revocable containers' processes (-1000 to 1000, below --revocable-oom-score-adj)")
	f.IntVar(&s.RevocableOOMScoreAdj, "revocable-oom-score-adj", s.RevocableOOMScoreAdj, "oom_score_adj of revocable containers' processes (1000: the OOM killer's first choice)")
	f.Float64Var(&s.RevocableMemorySoft, "revocable-memory-soft", s.RevocableMemorySoft, "soft limit of revocable containers as a fraction of their memory limit (v1 memory.soft_limit_in_bytes, v2 memory.high), in (0, 1]")
	f.Float64Var(&s.GuaranteedMemoryLow, "memory-low", s.GuaranteedMemoryLow, "fraction of non-revocable containers' memory limit protected from reclaim on cgroup v2 (memory.low), in [0, 1]")
	f.BoolVar(&s.MemoryGuard, "memory-guard", s.MemoryGuard, "evict revocable containers (largest first) under memory pressure, before the kernel's OOM killer runs (with oversubscription)")
	f.Float64Var(&s.MemoryGuardUsage, "memory-guard-usage", s.MemoryGuardUsage, "memory pressure: working set of the cgroup parent (or the node, if the parent has no limit) at this fraction of its limit")
	f.Float64Var(&s.MemoryGuardStall, "memory-guard-stall", s.MemoryGuardStall, "memory pressure: a non-revocable container stalled on memory (PSI some) this fraction of the time")
	f.DurationVar(&s.MemoryGuardEvery, "memory-guard-interval", s.MemoryGuardEvery, "memory guard round interval (at least 100ms)")
	f.BoolVar(&s.IOGuard, "io-guard", s.IOGuard, "throttle the IO of revocable containers doing IO (on the state dir's disk) while a non-revocable container stalls on IO (with oversubscription)")
	f.Float64Var(&s.IOGuardStall, "io-guard-stall", s.IOGuardStall, "IO pressure: a non-revocable container stalled on IO (PSI some) this fraction of the time")
	f.Int64Var(&s.IOGuardBPS, "io-guard-bps", s.IOGuardBPS, "IO throttle of revocable containers, read and write, bytes per second")
	f.DurationVar(&s.IOGuardRecover, "io-guard-recover", s.IOGuardRecover, "lift the IO throttles once no non-revocable container has stalled for this long")
}
