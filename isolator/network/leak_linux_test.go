//go:build linux

package network

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/brimnode/brim/isolator"
)

// childEnv makes the test binary run crashChild instead of the tests: an
// "agent" that prepares containers and is killed with SIGKILL half-way
// through one more Prepare.
const childEnv = "BRIM_NETWORK_TEST_CHILD"

type childSpec struct {
	Config  Config
	Prepare []string // prepared fully
	Crash   string   // Prepare blocks after its address step
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		if err := crashChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func crashChild(spec string) error {
	var s childSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return err
	}
	iso, err := New(s.Config)
	if err != nil {
		return err
	}
	ctx := context.Background()
	for _, id := range s.Prepare {
		var l isolator.Launch
		if err := iso.Prepare(ctx, id, isolator.Limits{Network: true, NetBandwidthMbit: 20}, &l); err != nil {
			return err
		}
	}
	iso.failStep = func(step string) error {
		if step == "address" {
			fmt.Println("ready")
			select {} // until SIGKILL
		}
		return nil
	}
	var l isolator.Launch
	return iso.Prepare(ctx, s.Crash, isolator.Limits{Network: true}, &l)
}

// killedAgent runs crashChild with cfg and kills it with SIGKILL while it is
// inside the Prepare of crash.
func killedAgent(t *testing.T, cfg Config, prepared []string, crash string) {
	t.Helper()
	spec, err := json.Marshal(childSpec{Config: cfg, Prepare: prepared, Crash: crash})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("agent child did not reach the crash point: %q", line)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

// TestLeak: 50 launches and kills, some failing half-way at each step of
// Prepare, and an agent killed with SIGKILL in the middle (its successor
// recovers with the containers it still knows) leave nothing behind but the
// live containers' objects; after the last Cleanup, nothing at all.
func TestLeak(t *testing.T) {
	for _, spares := range []int{DefaultSpares, -1} {
		t.Run(fmt.Sprintf("spares=%d", spares), func(t *testing.T) { leakTest(t, spares) })
	}
}

func leakTest(t *testing.T, spares int) {
	cfg := testConfig(t, 1000)
	cfg.Spares = spares
	iso, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uninstall(t, iso) })
	ctx := context.Background()
	steps := []string{"netns", "veth", "address", "shaping"}
	injected := errors.New("injected failure")
	var live []string
	failures := 0
	check := func(when string) {
		t.Helper()
		if l := leftovers(t, iso); len(l) > 0 {
			t.Fatalf("%s: left behind: %v", when, l)
		}
		recs, err := iso.store.load()
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(live) {
			t.Fatalf("%s: %d records for %d live containers", when, len(recs), len(live))
		}
		for _, id := range live {
			if _, err := netlink.LinkByName(iso.vethName(recs[id].Index)); err != nil {
				t.Fatalf("%s: veth of live container %s: %v", when, id, err)
			}
		}
	}
	for n := 0; n < 50; n++ {
		id := fmt.Sprintf("c%d", n)
		limits := isolator.Limits{Network: true, NetBandwidthMbit: int64(10 + n)}
		if n%3 == 0 {
			limits.Class = isolator.BestEffort
		}
		switch {
		case n == 25:
			// The agent is killed during a Prepare while it runs live
			// containers plus two more; its successor knows the live ones
			// but one of them died meanwhile.
			// The child agent takes over this process's isolator (and its
			// state dir lock), then dies; a third one recovers.
			extra := []string{"k1", "k2"}
			if err := iso.Close(); err != nil {
				t.Fatal(err)
			}
			killedAgent(t, cfg, extra, id)
			if iso, err = New(cfg); err != nil {
				t.Fatal(err)
			}
			if len(iso.recs) != len(live)+3 {
				t.Fatalf("after the crash: %d records, want %d", len(iso.recs), len(live)+3)
			}
			// The crash left the half-prepared container's objects.
			if _, err := os.Stat(iso.netnsPath(id)); err != nil {
				t.Fatalf("half-prepared netns: %v", err)
			}
			if _, err := netlink.LinkByName(iso.vethName(mustIndex(t, iso, id))); err != nil {
				t.Fatalf("half-prepared veth: %v", err)
			}
			died := live[0]
			live = live[1:]
			known := map[string]isolator.Limits{"other": {}}
			for _, id := range live {
				known[id] = isolator.Limits{Network: true, NetBandwidthMbit: 30}
			}
			if err := iso.Recover(ctx, known); err != nil {
				t.Fatalf("recover: %v", err)
			}
			for _, gone := range append(extra, died, id) {
				if _, err := iso.Address(gone); !errors.Is(err, isolator.ErrNotFound) {
					t.Errorf("after recovery %s still has an address (%v)", gone, err)
				}
			}
			for _, id := range live {
				if got := classRate(t, iso.txIFB, mustIndex(t, iso, id)); got != 30*mbit {
					t.Errorf("after recovery the class of %s runs at %d bit/s, want 30 Mbit/s", id, got)
				}
			}
			check("after recovery")
		case n%4 == 3:
			step := steps[failures%len(steps)]
			failures++
			iso.failStep = func(s string) error {
				if s == step {
					return injected
				}
				return nil
			}
			var l isolator.Launch
			err := iso.Prepare(ctx, id, limits, &l)
			iso.failStep = nil
			if !errors.Is(err, injected) {
				t.Fatalf("prepare failing at %s: %v", step, err)
			}
			if _, err := iso.Address(id); !errors.Is(err, isolator.ErrNotFound) {
				t.Errorf("a failed Prepare left an address (%v)", err)
			}
			if err := iso.Cleanup(ctx, id); err != nil { // the containerizer cleans up anyway
				t.Fatal(err)
			}
			check("after a failure at " + step)
		default:
			var l isolator.Launch
			if err := iso.Prepare(ctx, id, limits, &l); err != nil {
				t.Fatal(err)
			}
			live = append(live, id)
			if len(live) > 3 {
				if err := iso.Cleanup(ctx, live[0]); err != nil {
					t.Fatal(err)
				}
				if err := iso.Cleanup(ctx, live[0]); err != nil {
					t.Fatalf("second cleanup: %v", err)
				}
				live = live[1:]
			}
			check("after launch " + id)
		}
	}
	for len(live) > 0 {
		if err := iso.Cleanup(ctx, live[0]); err != nil {
			t.Fatal(err)
		}
		live = live[1:]
	}
	check("at the end")
	if ents, _ := os.ReadDir(cfg.NetNSDir); len(ents) != 0 {
		t.Errorf("netns files left: %v", ents)
	}
}
