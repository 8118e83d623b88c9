package integration

import (
	"encoding/json"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
)

// TestExitedContainersFreeAddresses: in a /29 (5 container addresses), 8
// networked containers run and exit one after the other without `rm`, and a
// ninth still gets an address; `inspect` and `ls --json` show each one's
// address and bandwidth limit, also after the exit. Before, an exited
// container kept its address until rm and the sixth launch failed.
func TestExitedContainersFreeAddresses(t *testing.T) {
	testutil.RequireRoot(t)
	// A /29 in 10.16.0.0/12 (TestNetworkCLI uses 10.32.0.0/11).
	cfg := newTestNetworkOn(t, "bri", netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(16 + rand.IntN(16)), byte(rand.IntN(256)), byte(8 * rand.IntN(32))}), 29))
	// net_bw in the total: a guaranteed --net-bw is admitted against it.
	a := startAgent(t, append(agentArgs(cfg), "--resources", "cpus:2;mem:2048;net_bw:1000")...)
	type netJSON struct {
		ID      string `json:"id"`
		State   string `json:"state"`
		Address string `json:"address"`
		NetMbit int64  `json:"netMbit"`
	}
	inspect := func(id string) netJSON {
		t.Helper()
		var c netJSON
		if err := json.Unmarshal([]byte(a.mustBrim("container", "inspect", id)), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	addrs := map[string]string{}
	for range 9 {
		id := a.run("--network", "--net-bw", "20", "--cpus", "0.05", "--mem", "16", "--", "true")
		a.brim("container", "wait", id) // exits 0; the address is what matters
		c := inspect(id)
		if c.State != "exited" || c.NetMbit != 20 {
			t.Errorf("inspect %s: %+v, want exited with netMbit 20", id, c)
		}
		if ip, err := netip.ParseAddr(c.Address); err != nil || !cfg.Subnet.Contains(ip) {
			t.Errorf("inspect %s: address %q not in %s", id, c.Address, cfg.Subnet)
		}
		addrs[id] = c.Address
	}
	var list []netJSON
	if err := json.Unmarshal([]byte(a.mustBrim("container", "ls", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.Address != addrs[c.ID] || c.NetMbit != 20 {
			t.Errorf("ls --json: %+v, want address %q and netMbit 20", c, addrs[c.ID])
		}
	}
	if len(list) != 9 {
		t.Errorf("ls --json lists %d containers, want 9", len(list))
	}
}
