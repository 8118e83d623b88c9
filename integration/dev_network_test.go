package integration

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator/network"
)

// TestDevNetwork: brim dev's agent is assembled like brim agent's, so it
// takes --network (its own assembly had no network isolator) and
// --sandbox-retention (it had a fixed retention): a container run with
// --network on its socket gets an address on the subnet given.
func TestDevNetwork(t *testing.T) {
	testutil.RequireRoot(t)
	nsDir := t.TempDir()
	// A /24 in 10.32.0.0/11, as TestNetworkCLI (the containerizer's and
	// the isolator's tests use other ranges).
	cfg := network.Config{
		Bridge:   testutil.UniqueName("brd"),
		Subnet:   netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(32 + rand.IntN(32)), byte(rand.IntN(256)), 0}), 24),
		StateDir: filepath.Join(t.TempDir(), "network"),
		NetNSDir: nsDir,
	}
	// Runs after dev's cleanup (registered later): the bridge, the IFBs
	// and the netns dir's mount outlive the agent by design.
	t.Cleanup(func() {
		n, err := network.New(cfg)
		if err != nil {
			t.Errorf("network isolator for uninstall: %v", err)
			return
		}
		defer n.Close()
		if err := n.Uninstall(context.Background()); err != nil {
			t.Errorf("uninstall: %v", err)
		}
	})
	d := startDevProc(t, "--listen", testutil.FreeAddr(t), "--network", "--network-bridge", cfg.Bridge,
		"--network-subnet", cfg.Subnet.String(), "--network-netns-dir", nsDir, "--sandbox-retention", "5")
	r := d.brim("container", "run", "--wait", "--network", "--cpus", "0.1", "--mem", "32", "--", "sh", "-c",
		`ip=$BRIM_CONTAINER_IP; [ -n "$ip" ] && grep -q eth0 /proc/net/dev && echo "$ip" > /mnt/sandbox/ip`)
	if r.code != 0 {
		t.Fatalf("container with --network under brim dev: exit %d: %s", r.code, r.stderr)
	}
}
