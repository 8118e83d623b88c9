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
	mastersFlag  = flag.Int("chaos.masters", 1, "masters: 1 (a bbolt store) or 3 (HA: a 3-member etcd cluster)")
	ttlFlag      = flag.Duration("chaos.ttl", 4*time.Second, "the masters' --session-ttl in HA mode")
	etcdFlag     = flag.String("chaos.etcd", "/usr/bin/etcd", "the etcd binary of HA mode (Debian's etcd-server)")
	keepFlag     = flag.Bool("chaos.keep", false, "keep the daemons' logs and the events in $TMPDIR/brim-chaos-logs-SEED even when the run passes")
	faultsFlag   = flag.String("chaos.faults", strings.Join(ciFaults, ","),
		`comma-separated fault kinds to inject, or "all" (every kind the number of masters allows)`)
)

// ciFaults are the kinds `make test`'s TestChaos injects: the kinds that
// pass on main (docs/chaos.md: the open bugs the others find).
var ciFaults = []string{AgentKill, MasterKill, ShimKill, ShimStop, LinkReset, LinkBlackHole, CheckpointCorrupt, DiskFull}

// ciHAFaults are the kinds `make test`'s TestChaosHA injects: the kinds
// that pass on main in HA mode (docs/chaos.md: the open bugs the others
// find).
var ciHAFaults = []string{MasterKill, FrameworkKill, AgentKill, LinkBlackHole, ShimKill, EtcdCut, EtcdMemberKill, EtcdQuorumLoss}

// TestChaos is one seeded chaos run: `make test` runs a short one with
// the default seed; `make chaos SEED=… DURATION=…` repeats or extends one
// (SEED=0: a fresh seed).
func TestChaos(t *testing.T) {
	if *agentsFlag < 2 || *agentsFlag > 3 {
		t.Fatalf("-chaos.agents %d: want 2 or 3", *agentsFlag)
	}
	if *mastersFlag != 1 && *mastersFlag != 3 {
		t.Fatalf("-chaos.masters %d: want 1 or 3", *mastersFlag)
	}
	runChaos(t, *seedFlag, *durationFlag, *agentsFlag, *mastersFlag, *faultsFlag)
}

// TestChaosHA is `make test`'s short run of HA mode: three masters on a
// 3-member etcd, two agents, 40 s of the kinds in ciHAFaults with seed
// 1371 (it picks all three etcd kinds).
// `make chaos MASTERS=3 …` runs any other (the Makefile's default).
func TestChaosHA(t *testing.T) {
	runChaos(t, 1371, 40*time.Second, 2, 3, strings.Join(ciHAFaults, ","))
}

// runChaos runs one chaos run (seed 0: a fresh one) after checking what
// it needs.
func runChaos(t *testing.T, seed uint64, d time.Duration, agents, masters int, faultList string) {
	testutil.Require(t, !testing.Short(), "chaos runs real daemons (not with -short)")
	testutil.RequireRoot(t)
	bin := os.Getenv("BRIM_BINARY")
	testutil.Require(t, bin != "", "no brim binary (set BRIM_BINARY; `make build`)")
	if masters > 1 {
		_, err := os.Stat(*etcdFlag)
		testutil.Require(t, err == nil, fmt.Sprintf("no etcd binary at %s (Debian's etcd-server; hack/deps.sh installs it)", *etcdFlag))
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()) % 1_000_000_000
	}
	t.Logf("chaos seed %d duration %v masters %d", seed, d, masters)
	// Drain, convergence and teardown take up to about 7 minutes past
	// the faults when something hangs; a test killed by -timeout cannot
	// clean up.
	if dl, ok := t.Deadline(); ok && time.Until(dl) < d+8*time.Minute {
		t.Fatalf("-timeout leaves %v: want at least -chaos.duration + 8m", time.Until(dl).Round(time.Second))
	}
	faults, err := parseFaults(faultList, masters)
	if err != nil {
		t.Fatalf("-chaos.faults: %v", err)
	}
	Run(t, Config{
		Seed:       seed,
		Duration:   d,
		Brim:       bin,
		Agents:     agents,
		Masters:    masters,
		SessionTTL: *ttlFlag,
		Etcd:       *etcdFlag,
		Parent:     testutil.UniqueName("brim-chaos"),
		Faults:     faults,
		Replay:     replay(seed, d, agents, masters, *ttlFlag, faultList),
		KeepLogs:   *keepFlag,
	})
}

// parseFaults reads -chaos.faults: "all" is nil (every applicable kind);
// an unknown kind, or one that needs HA mode with one master, is an
// error naming it.
func parseFaults(s string, masters int) ([]string, error) {
	if s == "all" {
		return nil, nil
	}
	faults := strings.Split(s, ",")
	for _, f := range faults {
		if !slices.Contains(AllFaults, f) {
			return nil, fmt.Errorf("unknown fault %q (want some of %v)", f, AllFaults)
		}
		if !slices.Contains(Applicable(masters), f) {
			return nil, fmt.Errorf("fault %q needs HA mode (-chaos.masters=3, make chaos MASTERS=3)", f)
		}
	}
	return faults, nil
}

// replay is the make command that repeats a run.
func replay(seed uint64, d time.Duration, agents, masters int, ttl time.Duration, faults string) string {
	s := fmt.Sprintf("make chaos SEED=%d DURATION=%v AGENTS=%d MASTERS=%d", seed, d, agents, masters)
	if masters > 1 && ttl != 4*time.Second {
		s += fmt.Sprintf(" TTL=%v", ttl)
	}
	return s + " FAULTS=" + faults
}

func TestParseFaults(t *testing.T) {
	for _, tc := range []struct {
		s       string
		masters int
		want    []string
		err     string
	}{
		{"all", 1, nil, ""},
		{"all", 3, nil, ""},
		{"agent-kill,master-stop", 1, []string{AgentKill, MasterStop}, ""},
		{"etcd-cut", 3, []string{EtcdCut}, ""},
		{"etcd-cut", 1, nil, `fault "etcd-cut" needs HA mode`},
		{"agent-kill,bogus", 3, nil, `unknown fault "bogus"`},
	} {
		got, err := parseFaults(tc.s, tc.masters)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseFaults(%q, %d) = %v, %v; want an error naming %q", tc.s, tc.masters, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseFaults(%q, %d) = %v, %v; want %v", tc.s, tc.masters, got, err, tc.want)
		}
	}
}
