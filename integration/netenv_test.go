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

// newTestNetwork is the container network of an agent in a test: a
// bridge named prefix plus a unique suffix, a /24 in 10.32.0.0/11 (the
// containerizer's tests use 10.64.0.0/10, the isolator's 10.128.0.0/9,
// the chaos harness 10.16.0.0/12: packages' tests run at the same time)
// and a netns dir of its own. Its cleanup, registered before the agent's
// and so run after it, uninstalls the bridge, the IFBs, the nftables
// table and the netns dir's mount, which outlive an agent by design.
// Pass agentArgs to the agent.
func newTestNetwork(t *testing.T, prefix string) network.Config {
	t.Helper()
	return newTestNetworkOn(t, prefix, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(32 + rand.IntN(32)), byte(rand.IntN(256)), 0}), 24))
}

// newTestNetworkOn is newTestNetwork on subnet.
func newTestNetworkOn(t *testing.T, prefix string, subnet netip.Prefix) network.Config {
	t.Helper()
	cfg := network.Config{
		Bridge:   testutil.UniqueName(prefix),
		Subnet:   subnet,
		StateDir: filepath.Join(t.TempDir(), "network"),
		NetNSDir: t.TempDir(),
	}
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
	return cfg
}

// agentArgs are the flags of an agent on cfg's network.
func agentArgs(cfg network.Config) []string {
	return []string{"--network", "--network-bridge", cfg.Bridge, "--network-subnet", cfg.Subnet.String(),
		"--network-netns-dir", cfg.NetNSDir}
}
