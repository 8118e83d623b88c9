//go:build linux

package chaos

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/brimnode/brim/isolator/network"
)

// Network is an agent's container network (brim agent --network): its
// own bridge, /24 and netns dir, so that runs and agents never share one.
// A nil *Network is an agent without one.
type Network struct {
	Bridge   string
	Subnet   netip.Prefix
	NetNSDir string // under the agent's directory
	StateDir string // the network isolator's records: STATE/network
}

// newNetwork names agent i's network after the run's cgroup parent (unique
// per run): bridge "bc<hash><i>" (at most 12 bytes, as the agent requires)
// and a /24 in 10.16.0.0/12, apart from the other tests' ranges
// (integration 10.32/11, containerizer 10.64/10, isolator 10.128/9).
func newNetwork(parent string, i int, agentDir, stateDir string) *Network {
	h := fnv.New32a()
	_, _ = h.Write([]byte(parent))
	sum := h.Sum32()
	return &Network{
		Bridge:   fmt.Sprintf("bc%08x%d", sum, i%10), // 11 bytes
		Subnet:   netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(16 + (sum>>8)%16), byte(sum) + byte(i), 0}), 24),
		NetNSDir: filepath.Join(agentDir, "netns"),
		StateDir: filepath.Join(stateDir, "network"),
	}
}

// args are the agent's network flags.
func (n *Network) args() []string {
	return []string{"--network", "--network-bridge", n.Bridge, "--network-subnet", n.Subnet.String(),
		"--network-netns-dir", n.NetNSDir, "--network-host-rate", "1000"}
}

func (n *Network) config() network.Config {
	return network.Config{Bridge: n.Bridge, Subnet: n.Subnet, StateDir: n.StateDir, NetNSDir: n.NetNSDir}
}

// Leftovers are the network objects of containers that no longer exist
// (none may remain once every container is removed): netns files, veths
// on the bridge, address records, and HTB classes on the bridge's IFBs
// other than the root and the default one.
func (n *Network) Leftovers() []string {
	if n == nil {
		return nil
	}
	var out []string
	ents, _ := os.ReadDir(n.NetNSDir)
	for _, e := range ents {
		out = append(out, "netns file "+e.Name())
	}
	ports, _ := os.ReadDir(filepath.Join("/sys/class/net", n.Bridge, "brif"))
	for _, p := range ports {
		out = append(out, "link "+p.Name()+" on bridge "+n.Bridge)
	}
	recs, _ := filepath.Glob(filepath.Join(n.StateDir, "*.json"))
	for _, r := range recs {
		out = append(out, "address record "+filepath.Base(r))
	}
	for _, ifb := range []string{n.Bridge + "-tx", n.Bridge + "-rx"} {
		l, err := netlink.LinkByName(ifb)
		if err != nil {
			continue
		}
		def := uint32(0)
		qs, _ := netlink.QdiscList(l)
		for _, q := range qs {
			if h, ok := q.(*netlink.Htb); ok {
				def = h.Defcls
			}
		}
		classes, _ := netlink.ClassList(l, 0)
		for _, c := range classes {
			if m := c.Attrs().Handle & 0xffff; m != 1 && m != def {
				out = append(out, fmt.Sprintf("class 1:%x on %s", m, ifb))
			}
		}
	}
	return out
}

// Remains are the network's own objects, which outlive its containers
// and its agent until the node is decommissioned (Remove, `brim agent
// cleanup`): the bridge, its IFBs, the nftables table brim-<bridge> and
// the netns dir's mount.
func (n *Network) Remains() []string {
	if n == nil {
		return nil
	}
	var out []string
	for _, name := range []string{n.Bridge, n.Bridge + "-tx", n.Bridge + "-rx"} {
		if _, err := netlink.LinkByName(name); err == nil {
			out = append(out, "link "+name)
		}
	}
	if c, err := nftables.New(); err == nil {
		tables, _ := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
		for _, t := range tables {
			if t.Name == "brim-"+n.Bridge {
				out = append(out, "nftables table ip "+t.Name)
			}
		}
	}
	for _, m := range mountsUnder(filepath.Dir(n.NetNSDir)) {
		if m == n.NetNSDir {
			out = append(out, "mount "+m)
		}
	}
	return out
}

// Remove takes the network off the host (bridge, IFBs, nftables table,
// the netns dir's mount), as an operator decommissioning the node would.
func (n *Network) Remove() error {
	if n == nil {
		return nil
	}
	iso, err := network.New(n.config())
	if err != nil {
		return fmt.Errorf("network isolator of %s for its removal: %w", n.Bridge, err)
	}
	err = iso.Uninstall(context.Background())
	if cerr := iso.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("remove network %s: %w", n.Bridge, err)
	}
	return nil
}
