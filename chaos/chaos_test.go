//go:build linux

package chaos

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
)

var (
	// `make test` repeats one schedule; `make chaos` picks fresh seeds.
	seedFlag     = flag.Uint64("chaos.seed", 92, "seed of the chaos run (0: a fresh one, printed)")
	durationFlag = flag.Duration("chaos.duration", 45*time.Second, "how long faults are injected")
	agentsFlag   = flag.Int("chaos.agents", 2, "agents (2 or 3)")
	// Every fault kind, disk-full included since its bug was fixed
	// (docs/chaos.md: seeds 3, 8 and 92 pass with all kinds).
	faultsFlag = flag.String("chaos.faults", "all",
		`comma-separated fault kinds to inject, or "all"`)
)

// TestChaos is one seeded chaos run: `make test` runs a short one with
// the default seed; `make chaos SEED=… DURATION=…` repeats or extends one
// (SEED=0: a fresh seed).
func TestChaos(t *testing.T) {
	testutil.Require(t, !testing.Short(), "chaos runs real daemons (not with -short)")
	testutil.RequireRoot(t)
	bin := os.Getenv("BRIM_BINARY")
	testutil.Require(t, bin != "", "no brim binary (set BRIM_BINARY; `make build`)")
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()) % 1_000_000_000
	}
	t.Logf("chaos seed %d duration %v", seed, *durationFlag)
	if *agentsFlag < 2 || *agentsFlag > 3 {
		t.Fatalf("-chaos.agents %d: want 2 or 3", *agentsFlag)
	}
	// Drain, convergence and teardown take up to about 7 minutes past
	// the faults when something hangs; a test killed by -timeout cannot
	// clean up.
	if dl, ok := t.Deadline(); ok && time.Until(dl) < *durationFlag+8*time.Minute {
		t.Fatalf("-timeout leaves %v: want at least -chaos.duration + 8m", time.Until(dl).Round(time.Second))
	}
	var faults []string
	if *faultsFlag != "all" {
		faults = strings.Split(*faultsFlag, ",")
		for _, f := range faults {
			if !slices.Contains(AllFaults, f) {
				t.Fatalf("-chaos.faults: unknown fault %q (want some of %v)", f, AllFaults)
			}
		}
	}
	replay := fmt.Sprintf("make chaos SEED=%d DURATION=%v", seed, *durationFlag)
	if *agentsFlag != 2 {
		replay += fmt.Sprintf(" AGENTS=%d", *agentsFlag)
	}
	replay += " FAULTS=" + *faultsFlag
	Run(t, Config{
		Seed:     seed,
		Duration: *durationFlag,
		Brim:     bin,
		Agents:   *agentsFlag,
		Parent:   testutil.UniqueName("brim-chaos"),
		Faults:   faults,
		Replay:   replay,
	})
}
