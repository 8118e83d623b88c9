package integration

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/brimnode/brim/internal/testutil"
)

// TestNetworkCLI drives `brim agent --network` and `brim container run
// --network` through the CLI: two containers reach each other by address,
// one without --network sees only loopback, net_bw is accounted against the
// agent's total, stats show the traffic; after a kill -9 of the agent and a
// restart the containers still have their network, and after rm nothing of
// theirs is left.
func TestNetworkCLI(t *testing.T) {
	testutil.RequireRoot(t)
	cfg := newTestNetwork(t, "bri")
	nsDir := cfg.NetNSDir
	a := startAgent(t, append(agentArgs(cfg), "--resources", "cpus:2;mem:2048;net_bw:100")...)

	srv := a.run("--network", "--net-bw", "50", "--cpus", "0.1", "--mem", "32", "--",
		"sh", "-c", `echo "$BRIM_CONTAINER_IP" > /mnt/sandbox/ip; exec busybox nc -ll -p 7000 -e echo pong`)
	ipFile := filepath.Join(a.inspect(srv).SandboxDir, "ip")
	var addr string
	eventually(t, "server writes its address", func() bool {
		b, err := os.ReadFile(ipFile)
		addr = strings.TrimSpace(string(b))
		return err == nil && addr != ""
	})
	if a, err := netip.ParseAddr(addr); err != nil || !cfg.Subnet.Contains(a) {
		t.Fatalf("server address %q (%v) not in %s", addr, err, cfg.Subnet)
	}
	ping := func(what string) {
		t.Helper()
		r := a.brim("container", "run", "--wait", "--network", "--cpus", "0.1", "--mem", "32", "--", "sh", "-c",
			"i=0; until echo ping | busybox nc -w 2 "+addr+" 7000 | grep -q pong; do i=$((i+1)); [ $i -ge 100 ] && exit 1; sleep 0.1; done")
		if r.code != 0 {
			t.Errorf("%s: client cannot reach %s: exit %d: %s", what, addr, r.code, r.stderr)
		}
	}
	ping("before the restart")
	if r := a.brim("container", "run", "--wait", "--cpus", "0.1", "--mem", "32", "--", "sh", "-c",
		`[ "$(grep -c : /proc/net/dev)" -eq 1 ] && grep -q "lo:" /proc/net/dev`); r.code != 0 {
		t.Errorf("a container without --network sees more than loopback: exit %d: %s", r.code, r.stderr)
	}
	if r := a.brim("container", "run", "--network", "--net-bw", "60", "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "insufficient resources") {
		t.Errorf("60 Mbit/s more than the 50 left of net_bw:100 admitted: exit %d: %s", r.code, r.stderr)
	}
	// Live resize: the container's HTB class on the egress IFB (minor =
	// the address's index in the subnet) takes the new rate.
	if r := a.brim("container", "update", "--net-bw", "120", srv); r.code == 0 {
		t.Errorf("update to 120 Mbit/s of net_bw:100 admitted")
	}
	a.mustBrim("container", "update", "--net-bw", "20", srv)
	ifb, err := netlink.LinkByName(cfg.Bridge + "-tx")
	if err != nil {
		t.Fatal(err)
	}
	classes, err := netlink.ClassList(ifb, 0)
	if err != nil {
		t.Fatal(err)
	}
	idx := uint32(netip.MustParseAddr(addr).As4()[3]) // a /24
	var rate uint64
	for _, c := range classes {
		if h, ok := c.(*netlink.HtbClass); ok && h.Attrs().Handle&0xffff == idx {
			rate = h.Rate * 8
		}
	}
	if rate != 20e6 {
		t.Errorf("egress class 1:%x rate %d bit/s after update --net-bw 20, want 20e6", idx, rate)
	}
	var stats []struct {
		HasNet     bool   `json:"hasNet"`
		NetRxBytes uint64 `json:"netRxBytes"`
		NetTxBytes uint64 `json:"netTxBytes"`
	}
	if err := json.Unmarshal([]byte(a.mustBrim("container", "stats", "--json", "--interval", "100ms", srv)), &stats); err != nil || len(stats) != 1 {
		t.Fatalf("stats: %v %+v", err, stats)
	}
	if !stats[0].HasNet || stats[0].NetRxBytes == 0 || stats[0].NetTxBytes == 0 {
		t.Errorf("server stats: %+v", stats[0])
	}

	a.kill9()
	// Without --network nobody would clean up the containers' network.
	if r := runBrim(t, "agent", "--state-dir", a.StateDir, "--socket", a.Socket+".other", "--cgroup-parent", a.Parent); r.code == 0 || !strings.Contains(r.stderr, "--network") {
		t.Errorf("agent without --network over networked containers: exit %d: %s", r.code, r.stderr)
	}
	a.start()
	if c := a.inspect(srv); c.State != "running" {
		t.Fatalf("server after the restart: %+v", c)
	}
	ping("after a kill -9 and restart")

	for _, c := range a.list() {
		a.mustBrim("container", "rm", "-f", c.ID)
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(cfg.Bridge))
	prefix := fmt.Sprintf("bv%08x", h.Sum32())
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		// Spares ("s" after the prefix) are the agent's, held by open files.
		if rest, ok := strings.CutPrefix(l.Attrs().Name, prefix); ok && !strings.HasPrefix(rest, "s") {
			t.Errorf("veth %s left after rm", l.Attrs().Name)
		}
	}
	for _, pattern := range []string{filepath.Join(nsDir, "*"), filepath.Join(a.StateDir, "network", "*.json")} {
		if left, _ := filepath.Glob(pattern); len(left) > 0 {
			t.Errorf("left after rm: %v", left)
		}
	}
}
