package main

import (
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/brimnode/brim/isolator/network"
)

// networkFlags are `brim agent`'s --network* flags.
type networkFlags struct {
	enabled  bool
	bridge   string
	subnet   string
	hostRate int64
	nat      bool
	netnsDir string
}

func (n *networkFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&n.enabled, "network", false, "enable the network isolator: containers run with --network get a netns, an address on --network-bridge and HTB shaping (net_bw)")
	f.StringVar(&n.bridge, "network-bridge", network.DefaultBridge, "host bridge of the containers' veths (at most 12 bytes)")
	f.StringVar(&n.subnet, "network-subnet", network.DefaultSubnet.String(), "IPv4 container subnet (/16 to /30); the bridge takes its first address")
	f.Int64Var(&n.hostRate, "network-host-rate", network.DefaultHostRateMbit, "uplink rate in Mbit/s: the parent of every container's HTB class, best-effort ceiling")
	f.BoolVar(&n.nat, "network-nat", false, "masquerade the subnet to the outside (nftables table brim-<bridge>) and turn on IPv4 forwarding")
	f.StringVar(&n.netnsDir, "network-netns-dir", "", "directory of the containers' netns files (default /run/brim/netns/<bridge>)")
}

// config returns the isolator's Config, or an error for a bad flag (the
// isolator's New checks the rest).
func (n *networkFlags) config(stateDir string) (network.Config, error) {
	subnet, err := netip.ParsePrefix(n.subnet)
	if err != nil {
		return network.Config{}, fmt.Errorf("--network-subnet %q: %w", n.subnet, err)
	}
	if n.hostRate <= 0 {
		return network.Config{}, fmt.Errorf("--network-host-rate %d: must be positive", n.hostRate)
	}
	return network.Config{
		Bridge:       n.bridge,
		Subnet:       subnet,
		StateDir:     filepath.Join(stateDir, "network"),
		NetNSDir:     n.netnsDir,
		HostRateMbit: n.hostRate,
		NAT:          n.nat,
	}, nil
}

// checkNetworkState refuses to start an agent without --network over a
// state dir whose containers have networking: nothing would clean up their
// veths, namespaces and addresses.
func checkNetworkState(stateDir string, enabled bool) error {
	if enabled {
		return nil
	}
	recs, _ := filepath.Glob(filepath.Join(stateDir, "network", "*.json"))
	if len(recs) > 0 {
		return fmt.Errorf("%d containers in %s have networking: start the agent with --network (and the same --network-* flags)", len(recs), stateDir)
	}
	return nil
}
