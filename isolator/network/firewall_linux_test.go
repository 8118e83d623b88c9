//go:build linux

package network

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// The firewall tests run the isolator in a network namespace of their own
// (its "host"): listeners on 0.0.0.0 and port mappings there touch nothing
// of the real host.

// nsIsolator is the current Isolator of a test whose agent restarts.
type nsIsolator struct {
	*Isolator
	hostPath string
	cfg      Config
}

// restart closes the Isolator as an agent's shutdown does and makes a new
// one on cfg, recovering the containers in known (nil: every recorded one).
func (p *nsIsolator) restart(t *testing.T, known map[string]isolator.Limits) {
	t.Helper()
	if known == nil {
		known = map[string]isolator.Limits{}
		for id, r := range p.recs {
			known[id] = r.Limits
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := inNetNS(p.hostPath, func() (err error) {
		p.Isolator, err = New(p.cfg)
		return err
	}); err != nil {
		t.Fatalf("new isolator after restart: %v", err)
	}
	if err := p.Recover(context.Background(), known); err != nil {
		t.Fatal(err)
	}
}

// prepareIn prepares container id (Uninstall cleans it up) and returns its
// netns path.
func prepareIn(t *testing.T, iso *Isolator, id string, limits isolator.Limits) string {
	t.Helper()
	limits.Network = true
	var l isolator.Launch
	if err := iso.Prepare(context.Background(), id, limits, &l); err != nil {
		t.Fatalf("prepare %s: %v", id, err)
	}
	return l.NetNSPath
}

// newIsolatorIn returns an Isolator for cfg made in the namespace at
// hostPath. At cleanup the current one is uninstalled and must leave no
// table, bridge or IFB behind in that namespace.
func newIsolatorIn(t *testing.T, hostPath string, cfg Config) *nsIsolator {
	t.Helper()
	p := &nsIsolator{hostPath: hostPath, cfg: cfg}
	if err := inNetNS(hostPath, func() (err error) {
		p.Isolator, err = New(cfg)
		return err
	}); err != nil {
		t.Fatalf("new isolator: %v", err)
	}
	t.Cleanup(func() {
		iso := p.Isolator
		if iso == nil { // a restart failed
			return
		}
		if err := iso.Uninstall(context.Background()); err != nil {
			t.Errorf("uninstall: %v", err)
		}
		if n := tablesNamed(t, iso); n != 0 {
			t.Errorf("%d nftables tables %s left after uninstall", n, iso.fwTable().Name)
		}
		h := nsHandle(t, hostPath)
		for _, name := range []string{cfg.Bridge, cfg.Bridge + "-tx", cfg.Bridge + "-rx"} {
			if _, err := h.LinkByName(name); err == nil {
				t.Errorf("link %s left after uninstall", name)
			}
		}
		_ = iso.Close()
	})
	return p
}

// tablesNamed counts the tables named like iso's in its host namespace.
func tablesNamed(t *testing.T, iso *Isolator) int {
	t.Helper()
	c, err := iso.nftConn(1)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tb := range tables {
		if tb.Name == iso.fwTable().Name {
			n++
		}
	}
	return n
}

// chainRules returns the number of rules in each chain of iso's table.
func chainRules(t testing.TB, iso *Isolator) map[string]int {
	t.Helper()
	c, err := iso.nftConn(1)
	if err != nil {
		t.Fatal(err)
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, ch := range chains {
		if ch.Table.Name != iso.fwTable().Name {
			continue
		}
		rules, err := c.GetRules(ch.Table, ch)
		if err != nil {
			t.Fatal(err)
		}
		out[ch.Name] = len(rules)
	}
	return out
}

func nsHandle(t testing.TB, path string) *netlink.Handle {
	t.Helper()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// echoServer listens on addr (tcp4 or udp4) in the namespace at nsPath and
// answers every line (datagram) with "echo <line>" until the test ends. It
// returns the port.
func echoServer(t *testing.T, nsPath, network, addr string) uint16 {
	t.Helper()
	if network == "udp4" {
		var pc net.PacketConn
		if err := inNetNS(nsPath, func() (err error) {
			pc, err = net.ListenPacket(network, addr)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		go func() {
			buf := make([]byte, 512)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				_, _ = pc.WriteTo(append([]byte("echo "), buf[:n]...), from)
			}
		}()
		return uint16(pc.LocalAddr().(*net.UDPAddr).Port)
	}
	var ln net.Listener
	if err := inNetNS(nsPath, func() (err error) {
		ln, err = net.Listen(network, addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					_, _ = c.Write([]byte("echo " + line))
				}
			}()
		}
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// talk sends a line to addr from the namespace at nsPath and checks the
// echo. A refused or unanswered connection is an error (the timeout only
// bounds a drop).
func talk(nsPath, network string, addr netip.AddrPort) error {
	return inNetNS(nsPath, func() error {
		c, err := net.DialTimeout(network, addr.String(), 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Write([]byte("hello\n")); err != nil {
			return err
		}
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		if err != nil {
			return err
		}
		if got := string(buf[:n]); got != "echo hello\n" {
			return fmt.Errorf("got %q", got)
		}
		return nil
	})
}

// TestHostConfinement: a container cannot reach a host listener on
// 0.0.0.0 (TCP gets a reset, UDP an ICMP error) except on the allowed
// ports, while the host still reaches the container.
func TestHostConfinement(t *testing.T) {
	hostPath := "/run/netns/" + testutil.NewNetNS(t)
	denied := echoServer(t, hostPath, "tcp4", "0.0.0.0:0")
	allowed := echoServer(t, hostPath, "tcp4", "0.0.0.0:0")
	deniedUDP := echoServer(t, hostPath, "udp4", "0.0.0.0:0")
	allowedUDP := echoServer(t, hostPath, "udp4", "0.0.0.0:0")
	cfg := testConfig(t, 1000)
	cfg.HostAllow = []HostPort{{Port: allowed, Protocol: isolator.TCP}, {Port: allowedUDP, Protocol: isolator.UDP}}
	iso := newIsolatorIn(t, hostPath, cfg).Isolator
	if n := tablesNamed(t, iso); n != 1 {
		t.Fatalf("%d tables %s, want 1", n, iso.fwTable().Name)
	}
	nsC := prepareIn(t, iso, "c", isolator.Limits{})
	gw := iso.Gateway()

	err := talk(nsC, "tcp4", netip.AddrPortFrom(gw, denied))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("container → host 0.0.0.0:%d (not allowed): %v, want connection refused by the reject rule", denied, err)
	}
	if err := talk(nsC, "udp4", netip.AddrPortFrom(gw, deniedUDP)); err == nil {
		t.Errorf("container → host udp 0.0.0.0:%d (not allowed): answered", deniedUDP)
	}
	if err := talk(nsC, "tcp4", netip.AddrPortFrom(gw, allowed)); err != nil {
		t.Errorf("container → host 0.0.0.0:%d (allowed): %v", allowed, err)
	}
	if err := talk(nsC, "udp4", netip.AddrPortFrom(gw, allowedUDP)); err != nil {
		t.Errorf("container → host udp 0.0.0.0:%d (allowed): %v", allowedUDP, err)
	}
	// The host reaches the container (its replies are established).
	addrC := mustAddr(t, iso, "c")
	port := echoServer(t, nsC, "tcp4", addrC.String()+":0")
	if err := talk(hostPath, "tcp4", netip.AddrPortFrom(addrC, port)); err != nil {
		t.Errorf("host → container %s:%d: %v", addrC, port, err)
	}
}

// TestContainerIsolation: without Config.Isolate containers reach each
// other; with it they do not (bridge ports isolated, routed traffic
// dropped), and an agent restarted with the other setting applies it to
// the running containers.
func TestContainerIsolation(t *testing.T) {
	hostPath := "/run/netns/" + testutil.NewNetNS(t)
	cfg := testConfig(t, 1000)
	cfg.Spares = -1
	cfg.NAT = true // forwarding on, for the hairpin below
	iso := newIsolatorIn(t, hostPath, cfg)
	ns1 := prepareIn(t, iso.Isolator, "c1", isolator.Limits{})
	ns2 := prepareIn(t, iso.Isolator, "c2", isolator.Limits{})
	addr2 := mustAddr(t, iso.Isolator, "c2")
	port := echoServer(t, ns2, "tcp4", addr2.String()+":0")
	to2 := netip.AddrPortFrom(addr2, port)
	if err := talk(ns1, "tcp4", to2); err != nil {
		t.Fatalf("without isolation, c1 → c2: %v", err)
	}
	h := nsHandle(t, hostPath)
	isolated := func(id string) bool {
		l, err := h.LinkByName(iso.vethName(iso.recs[id].Index))
		if err != nil {
			t.Fatal(err)
		}
		pi, err := h.LinkGetProtinfo(l)
		if err != nil {
			t.Fatal(err)
		}
		return pi.Isolated
	}
	if isolated("c1") {
		t.Error("c1's bridge port is isolated without Config.Isolate")
	}

	// Restart with isolation: the running containers' ports are isolated
	// by Recover, new ones at Prepare.
	restart := func(isolate bool) {
		t.Helper()
		iso.cfg.Isolate = isolate
		iso.restart(t, nil)
	}
	restart(true)
	ns3 := prepareIn(t, iso.Isolator, "c3", isolator.Limits{})
	for _, id := range []string{"c1", "c2", "c3"} {
		if !isolated(id) {
			t.Errorf("%s's bridge port is not isolated", id)
		}
	}
	if err := talk(ns1, "tcp4", to2); err == nil {
		t.Error("with isolation, c1 (recovered) reaches c2")
	}
	if err := talk(ns3, "tcp4", to2); err == nil {
		t.Error("with isolation, c3 (new) reaches c2")
	}
	// As on a host without br_netfilter: bridged traffic skips the ip
	// family's forward hook, and the isolated ports alone keep c1 from c2.
	// (A kernel without br_netfilter loaded, as in the cgroup v2 lane's
	// guest, has no such file: it is in that state already.)
	if err := inNetNS(hostPath, func() error {
		err := os.WriteFile("/proc/sys/net/bridge/bridge-nf-call-iptables", []byte("0"), 0)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := talk(ns1, "tcp4", to2); err == nil {
		t.Error("with isolation and no br_netfilter, c1 reaches c2")
	}
	// A published port is reached from the host, and from another
	// container through the host's address (without br_netfilter the
	// translated connection is routed by the host; with it, br_netfilter
	// bridges it between the two isolated ports, which drops it:
	// docs/networking.md).
	ports := []isolator.PortMapping{{HostPort: 18000, ContainerPort: 8000, Protocol: isolator.TCP}}
	ns4 := prepareIn(t, iso.Isolator, "c4", isolator.Limits{Ports: ports})
	addr4 := mustAddr(t, iso.Isolator, "c4")
	echoServer(t, ns4, "tcp4", addr4.String()+":8000")
	published := netip.AddrPortFrom(iso.Gateway(), 18000)
	if err := talk(hostPath, "tcp4", published); err != nil {
		t.Errorf("with isolation, host → published port of c4: %v", err)
	}
	if err := talk(ns1, "tcp4", published); err != nil {
		t.Errorf("with isolation and no br_netfilter, c1 → published port of c4: %v", err)
	}
	if chainRules(t, iso.Isolator)["forward"] != 2 {
		t.Errorf("forward chain rules = %v, want 2", chainRules(t, iso.Isolator))
	}
	restart(false)
	if isolated("c1") || isolated("c3") {
		t.Error("bridge ports still isolated after a restart without Config.Isolate")
	}
	// c3's failed ARP for c2 stays cached for a while ("no route to
	// host"): forget it.
	h3 := nsHandle(t, ns3)
	neighs, err := h3.NeighList(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range neighs {
		if n.IP.Equal(addr2.AsSlice()) {
			if err := h3.NeighDel(&n); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := talk(ns3, "tcp4", to2); err != nil {
		t.Errorf("after a restart without isolation, c3 → c2: %v", err)
	}
	if _, ok := chainRules(t, iso.Isolator)["forward"]; ok {
		t.Error("forward chain kept after a restart without isolation")
	}
}

// TestPortMapping: host ports forwarded to a container over TCP and UDP,
// from the host (bridge address, another host address) and from another
// container (hairpin), kept across an agent restart, refused when taken or
// malformed, and gone with the container.
func TestPortMapping(t *testing.T) {
	hostPath := "/run/netns/" + testutil.NewNetNS(t)
	h := nsHandle(t, hostPath)
	// Another host address, as a node's own uplink address (a veth pair:
	// this kernel has no dummy links).
	la := netlink.NewLinkAttrs()
	la.Name = "up0"
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "up1"}); err != nil {
		t.Fatal(err)
	}
	up, err := h.LinkByName("up0")
	if err == nil {
		err = h.AddrAdd(up, ipNet(netip.MustParseAddr("192.0.2.10"), 24))
	}
	for _, name := range []string{"up0", "up1"} {
		if err == nil {
			err = h.LinkSetUp(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	uplink := netip.MustParseAddr("192.0.2.10")

	cfg := testConfig(t, 1000)
	cfg.NAT = true // forwarding on: the hairpin is routed
	iso := newIsolatorIn(t, hostPath, cfg)
	const hostTCP, hostUDP = 18080, 15353
	// The server's ports are known before it runs: the container's
	// address is, after Prepare.
	ports := []isolator.PortMapping{
		{HostPort: hostTCP, ContainerPort: 8080, Protocol: isolator.TCP},
		{HostPort: hostUDP, ContainerPort: 5353, Protocol: isolator.UDP},
	}
	nsS := prepareIn(t, iso.Isolator, "server", isolator.Limits{Ports: ports})
	addrS := mustAddr(t, iso.Isolator, "server")
	echoServer(t, nsS, "tcp4", addrS.String()+":8080")
	echoServer(t, nsS, "udp4", addrS.String()+":5353")
	nsC := prepareIn(t, iso.Isolator, "client", isolator.Limits{})

	gw := iso.Gateway()
	check := func(when string) {
		t.Helper()
		for _, c := range []struct {
			from, what, network string
			to                  netip.AddrPort
		}{
			{hostPath, "host → bridge address", "tcp4", netip.AddrPortFrom(gw, hostTCP)},
			{hostPath, "host → uplink address", "tcp4", netip.AddrPortFrom(uplink, hostTCP)},
			{hostPath, "host → bridge address", "udp4", netip.AddrPortFrom(gw, hostUDP)},
			{nsC, "container → bridge address (hairpin)", "tcp4", netip.AddrPortFrom(gw, hostTCP)},
		} {
			if err := talk(c.from, c.network, c.to); err != nil {
				t.Errorf("%s: %s %s %s: %v", when, c.what, c.network, c.to, err)
			}
		}
	}
	check("after prepare")
	if rules := chainRules(t, iso.Isolator); rules["prerouting"] != 2 || rules["output"] != 2 {
		t.Errorf("nat rules = %v, want 2 in prerouting and in output", rules)
	}

	// Agent restart: the mappings come back from the record.
	iso.restart(t, map[string]isolator.Limits{"server": {Network: true}, "client": {Network: true}})
	check("after restart")
	if got := iso.recs["server"].Limits.Ports; len(got) != 2 {
		t.Errorf("recorded ports after restart = %v", got)
	}
	// A restart that empties the table (someone flushed it) gets it back.
	c, err := iso.nftConn(1)
	if err != nil {
		t.Fatal(err)
	}
	c.DelTable(iso.fwTable())
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	iso.restart(t, nil)
	check("after a restart over a deleted table")

	// Taken and malformed mappings are refused, with nothing left behind.
	for _, bad := range []struct {
		ports []isolator.PortMapping
		want  error
	}{
		{[]isolator.PortMapping{{HostPort: hostTCP, ContainerPort: 80, Protocol: isolator.TCP}}, isolator.ErrPortInUse},
		{[]isolator.PortMapping{{HostIP: gw, HostPort: hostUDP, ContainerPort: 80, Protocol: isolator.UDP}}, isolator.ErrPortInUse},
		{[]isolator.PortMapping{{HostPort: 0, ContainerPort: 80, Protocol: isolator.TCP}}, isolator.ErrBadPort},
		{[]isolator.PortMapping{{HostPort: 81, ContainerPort: 80, Protocol: isolator.TCP}, {HostPort: 81, ContainerPort: 82, Protocol: isolator.TCP}}, isolator.ErrBadPort},
		{[]isolator.PortMapping{{HostIP: netip.MustParseAddr("192.0.2.99"), HostPort: 82, ContainerPort: 80, Protocol: isolator.TCP}}, isolator.ErrBadPort},
	} {
		var l isolator.Launch
		err := iso.Prepare(context.Background(), "bad", isolator.Limits{Network: true, Ports: bad.ports}, &l)
		if !errors.Is(err, bad.want) {
			t.Errorf("prepare with %v: %v, want %v", bad.ports, err, bad.want)
		}
		if _, ok := iso.recs["bad"]; ok {
			t.Errorf("prepare with %v: record left", bad.ports)
		}
	}
	// The same port on another protocol is free.
	prepareIn(t, iso.Isolator, "other", isolator.Limits{Ports: []isolator.PortMapping{{HostPort: hostTCP, ContainerPort: 1, Protocol: isolator.UDP}}})

	// Release (the container exited): the mapping goes, the port is free.
	if err := iso.Release(context.Background(), "server"); err != nil {
		t.Fatal(err)
	}
	if err := talk(hostPath, "tcp4", netip.AddrPortFrom(gw, hostTCP)); err == nil {
		t.Error("host port still reaches something after the container's release")
	}
	if rules := chainRules(t, iso.Isolator); rules["prerouting"] != 1 || rules["output"] != 1 {
		t.Errorf("nat rules after release = %v, want only the other container's", rules)
	}
	prepareIn(t, iso.Isolator, "next", isolator.Limits{Ports: ports[:1]})
}

// TestPortMappingFailureLeavesNothing: a Prepare that fails after its
// mappings were installed removes them with the rest.
func TestPortMappingFailureLeavesNothing(t *testing.T) {
	hostPath := "/run/netns/" + testutil.NewNetNS(t)
	iso := newIsolatorIn(t, hostPath, testConfig(t, 1000))
	iso.failStep = func(step string) error {
		if step == "ports" {
			return errors.New("injected")
		}
		return nil
	}
	var l isolator.Launch
	ports := []isolator.PortMapping{{HostPort: 2000, ContainerPort: 80, Protocol: isolator.TCP}}
	if err := iso.Prepare(context.Background(), "c", isolator.Limits{Network: true, Ports: ports}, &l); err == nil {
		t.Fatal("prepare did not fail")
	}
	if rules := chainRules(t, iso.Isolator); rules["prerouting"] != 0 || rules["output"] != 0 {
		t.Errorf("nat rules after a failed prepare = %v", rules)
	}
	if l := leftoversIn(t, iso.Isolator); len(l) > 0 {
		t.Errorf("left after a failed prepare: %v", l)
	}
}

// leftoversIn is leftovers for an isolator in a namespace of its own:
// records and netns files without a live container.
func leftoversIn(t *testing.T, iso *Isolator) []string {
	t.Helper()
	var out []string
	recs, err := iso.store.load()
	if err != nil {
		t.Fatal(err)
	}
	for id := range recs {
		out = append(out, "record "+id)
	}
	ents, _ := os.ReadDir(iso.cfg.NetNSDir)
	for _, e := range ents {
		out = append(out, "netns file "+e.Name())
	}
	return out
}

// BenchmarkFirewall: the cost of the table with N port mappings on the
// node. "rebuild" replaces the whole table (New and Recover do, once);
// "mapping" adds one container's two mappings as Prepare does (add-ms, on
// the launch path) and removes them as Release does (del-ms, after the
// exit). The baseline is each with no other mapping, in the same run.
func BenchmarkFirewall(b *testing.B) {
	hostPath := "/run/netns/" + testutil.NewNetNS(b)
	cfg := testConfig(b, 1000)
	cfg.HostAllow = []HostPort{{Port: 53, Protocol: isolator.UDP}, {Port: 53, Protocol: isolator.TCP}}
	cfg.Spares = -1
	var iso *Isolator
	if err := inNetNS(hostPath, func() (err error) {
		iso, err = New(cfg)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer func() {
		iso.mu.Lock()
		iso.recs = map[string]record{} // the fake records below have no kernel objects
		iso.mu.Unlock()
		if err := iso.Uninstall(context.Background()); err != nil {
			b.Error(err)
		}
		_ = iso.Close()
	}()
	fake := func(k int) record {
		id := fmt.Sprintf("fake%d", k)
		return record{ID: id, Index: uint32(k + 2), Address: addrAt(cfg.Subnet, uint32(k%250+2)),
			Limits: isolator.Limits{Network: true, Ports: []isolator.PortMapping{
				{HostPort: uint16(20000 + k), ContainerPort: 80, Protocol: isolator.TCP},
				{HostPort: uint16(20000 + k), ContainerPort: 53, Protocol: isolator.UDP}}}}
	}
	base := map[string]float64{}
	for _, n := range []int{0, 100, 1000} {
		iso.mu.Lock()
		iso.recs = map[string]record{}
		for k := range n {
			r := fake(k)
			iso.recs[r.ID] = r
		}
		if err := iso.syncFirewallLocked(""); err != nil {
			b.Fatal(err)
		}
		iso.mu.Unlock()
		b.Run(fmt.Sprintf("rebuild/mappings=%d", 2*n), func(b *testing.B) {
			iso.mu.Lock()
			defer iso.mu.Unlock()
			start := time.Now()
			for b.Loop() {
				if err := iso.syncFirewallLocked(""); err != nil {
					b.Fatal(err)
				}
			}
			ms := float64(time.Since(start).Microseconds()) / 1000 / float64(b.N)
			if n == 0 {
				base["rebuild"] = ms
			}
			b.ReportMetric(ms, "ms/op")
			b.ReportMetric(ms/base["rebuild"], "x-alone")
		})
		b.Run(fmt.Sprintf("mapping/mappings=%d", 2*n), func(b *testing.B) {
			iso.mu.Lock()
			defer iso.mu.Unlock()
			extra := fake(n + 1)
			var add, del time.Duration
			for b.Loop() {
				iso.recs[extra.ID] = extra
				t0 := time.Now()
				err := iso.addMappingsLocked(extra)
				t1 := time.Now()
				if err == nil {
					err = iso.delMappingsLocked(extra.ID)
				}
				add, del = add+t1.Sub(t0), del+time.Since(t1)
				delete(iso.recs, extra.ID)
				if err != nil {
					b.Fatal(err)
				}
			}
			addMs := float64(add.Microseconds()) / 1000 / float64(b.N)
			delMs := float64(del.Microseconds()) / 1000 / float64(b.N)
			if n == 0 {
				base["add"], base["del"] = addMs, delMs
			}
			b.ReportMetric(addMs, "add-ms")
			b.ReportMetric(delMs, "del-ms")
			b.ReportMetric(addMs/base["add"], "add-x-alone")
			b.ReportMetric(delMs/base["del"], "del-x-alone")
		})
	}
	if got := chainRules(b, iso); got["prerouting"] != 2000 {
		b.Errorf("prerouting rules after the benchmark: %d, want the 2000 of 1000 fake containers", got["prerouting"])
	}
}

// TestManyMappings: a table with 2000 port mappings is installed whole
// (an agent restarting on a busy node) and one more is added and removed.
// With the netlink socket's default buffers 200 mappings failed with
// ENOBUFS and 2000 with EMSGSIZE.
func TestManyMappings(t *testing.T) {
	hostPath := "/run/netns/" + testutil.NewNetNS(t)
	cfg := testConfig(t, 1000)
	cfg.Spares = -1
	iso := newIsolatorIn(t, hostPath, cfg).Isolator
	iso.mu.Lock()
	defer iso.mu.Unlock()
	defer func() { iso.recs = map[string]record{} }() // no kernel objects behind them
	for k := range 1000 {
		id := fmt.Sprintf("fake%d", k)
		iso.recs[id] = record{ID: id, Index: uint32(k + 2), Address: addrAt(cfg.Subnet, uint32(k%250+2)),
			Limits: isolator.Limits{Network: true, Ports: []isolator.PortMapping{
				{HostPort: uint16(20000 + k), ContainerPort: 80, Protocol: isolator.TCP},
				{HostPort: uint16(20000 + k), ContainerPort: 53, Protocol: isolator.UDP}}}}
	}
	if err := iso.syncFirewallLocked(""); err != nil {
		t.Fatal(err)
	}
	if got := chainRules(t, iso); got["prerouting"] != 2000 || got["output"] != 2000 {
		t.Fatalf("rules %v, want 2000 in prerouting and output", got)
	}
	one := iso.recs["fake7"]
	if err := iso.delMappingsLocked("fake7"); err != nil {
		t.Fatal(err)
	}
	if got := chainRules(t, iso); got["prerouting"] != 1998 {
		t.Errorf("rules after removing one container's: %v, want 1998", got)
	}
	if err := iso.addMappingsLocked(one); err != nil {
		t.Fatal(err)
	}
	if got := chainRules(t, iso); got["prerouting"] != 2000 {
		t.Errorf("rules after adding them back: %v, want 2000", got)
	}
}

// TestPortMappingReuseUDP: when a container with a UDP mapping is gone and
// the host port goes to a new container, a client that keeps its socket
// reaches the new one. The kernel keeps translating a UDP flow as long as
// it sees traffic, so without removing the gone container's connection
// tracking entries the client's datagrams went to the old address forever.
func TestPortMappingReuseUDP(t *testing.T) {
	hostPath := "/run/netns/" + testutil.NewNetNS(t)
	iso := newIsolatorIn(t, hostPath, testConfig(t, 1000)).Isolator
	ports := []isolator.PortMapping{{HostPort: 15300, ContainerPort: 5300, Protocol: isolator.UDP}}
	serve := func(id string) {
		ns := prepareIn(t, iso, id, isolator.Limits{Ports: ports})
		echoServer(t, ns, "udp4", mustAddr(t, iso, id).String()+":5300")
	}
	serve("old")
	var conn net.Conn
	if err := inNetNS(hostPath, func() (err error) {
		conn, err = net.Dial("udp4", netip.AddrPortFrom(iso.Gateway(), 15300).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ask := func() error {
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Write([]byte("hello\n")); err != nil {
			return err
		}
		buf := make([]byte, 64)
		n, err := conn.Read(buf)
		if err != nil {
			return err
		}
		if string(buf[:n]) != "echo hello\n" {
			return fmt.Errorf("got %q", buf[:n])
		}
		return nil
	}
	if err := ask(); err != nil {
		t.Fatalf("first container: %v", err)
	}
	if err := iso.Release(context.Background(), "old"); err != nil {
		t.Fatal(err)
	}
	serve("new")
	if err := ask(); err != nil {
		t.Errorf("same client socket after the mapping moved to a new container: %v", err)
	}
}

// hostBind binds network address addr in the namespace at nsPath as a
// host service would (SO_REUSEADDR set, as Go's listeners and most
// servers do), and returns the close of what it bound.
func hostBind(nsPath, network, addr string) (func(), error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1) })
		return errors.Join(err, serr)
	}}
	var closer func()
	err := inNetNS(nsPath, func() error {
		if network == "udp4" {
			pc, err := lc.ListenPacket(context.Background(), network, addr)
			if err != nil {
				return err
			}
			closer = func() { pc.Close() }
			return nil
		}
		l, err := lc.Listen(context.Background(), network, addr)
		if err != nil {
			return err
		}
		closer = func() { l.Close() }
		return nil
	})
	return closer, err
}

// TestPortMappingHostService (issue 30): a mapping of a host port that a
// process of the host holds is refused (ErrPortInUse, naming the port and
// the host process), on all addresses or on the one the mapping names,
// TCP and UDP apart, with nothing made; so is a port outside
// Config.PortRange (ErrBadPort). A mapped port is held by the isolator: a
// host service started later cannot bind it (SO_REUSEADDR or not) until
// the container is released, also after a restart; a port a host process
// took while no isolator held it is reported by NotHeld, and the
// container keeps its mapping. Before, the DNAT rule took a listening
// service's port without a word.
func TestPortMappingHostService(t *testing.T) {
	hostPath := "/run/netns/" + testutil.NewNetNS(t)
	cfg := testConfig(t, 1000)
	cfg.PortRange = isolator.PortRange{First: 31000, Last: 31010}
	iso := newIsolatorIn(t, hostPath, cfg)
	gw := iso.Gateway()
	tcpSvc, err := hostBind(hostPath, "tcp4", "0.0.0.0:31001")
	if err != nil {
		t.Fatal(err)
	}
	defer tcpSvc()
	udpSvc, err := hostBind(hostPath, "udp4", netip.AddrPortFrom(gw, 31002).String())
	if err != nil {
		t.Fatal(err)
	}
	defer udpSvc()
	tcp := func(ip netip.Addr, port uint16) isolator.PortMapping {
		return isolator.PortMapping{HostIP: ip, HostPort: port, ContainerPort: 80, Protocol: isolator.TCP}
	}
	udp := func(ip netip.Addr, port uint16) isolator.PortMapping {
		return isolator.PortMapping{HostIP: ip, HostPort: port, ContainerPort: 53, Protocol: isolator.UDP}
	}
	var all netip.Addr
	for _, bad := range []struct {
		p    isolator.PortMapping
		want error
		text string
	}{
		{tcp(all, 31001), isolator.ErrPortInUse, "host port 31001/tcp (31001:80/tcp): a process of the host holds it"},
		{tcp(gw, 31001), isolator.ErrPortInUse, "a process of the host holds it"},
		{udp(all, 31002), isolator.ErrPortInUse, "host port 31002/udp"},
		{udp(gw, 31002), isolator.ErrPortInUse, "a process of the host holds it"},
		{tcp(all, 30999), isolator.ErrBadPort, "host port 30999 is outside the range reserved for port mappings (31000-31010)"},
		{udp(all, 31011), isolator.ErrBadPort, "outside the range"},
	} {
		var l isolator.Launch
		// A second mapping that is fine: it must not stay held either.
		ports := []isolator.PortMapping{tcp(all, 31009), bad.p}
		err := iso.Prepare(context.Background(), "bad", isolator.Limits{Network: true, Ports: ports}, &l)
		if !errors.Is(err, bad.want) || !strings.Contains(err.Error(), bad.text) {
			t.Errorf("prepare with %s: %v, want %v saying %q", bad.p, err, bad.want, bad.text)
		}
		if left := leftoversIn(t, iso.Isolator); len(left) > 0 {
			t.Errorf("prepare with %s: left %v", bad.p, left)
		}
	}
	if len(iso.held) != 0 {
		t.Errorf("ports held after refused launches: %v", iso.held)
	}
	// The other protocol of a port a host service holds is free.
	mapped := []isolator.PortMapping{udp(all, 31001), tcp(all, 31002), tcp(gw, 31003), udp(all, 31009)}
	prepareIn(t, iso.Isolator, "c", isolator.Limits{Ports: mapped})
	binds := func(when string, want bool) {
		t.Helper()
		for _, p := range mapped {
			network, ip := p.Protocol+"4", p.HostIP
			if !ip.IsValid() {
				ip = netip.IPv4Unspecified()
			}
			closeIt, err := hostBind(hostPath, network, netip.AddrPortFrom(ip, p.HostPort).String())
			if err == nil {
				closeIt()
			}
			if got := err == nil; got != want {
				t.Errorf("%s: a host service binding %s: %v, want bound %v", when, p, err, want)
			}
		}
	}
	binds("mapped", false)
	iso.restart(t, nil)
	binds("mapped, after a restart", false)
	if err := iso.Release(context.Background(), "c"); err != nil {
		t.Fatal(err)
	}
	binds("released", true)

	// Taken while no isolator held it (the agent down): reported, and the
	// container keeps its mapping.
	prepareIn(t, iso.Isolator, "d", isolator.Limits{Ports: []isolator.PortMapping{tcp(all, 31004)}})
	if err := iso.Close(); err != nil {
		t.Fatal(err)
	}
	svc, err := hostBind(hostPath, "tcp4", "0.0.0.0:31004")
	if err != nil {
		t.Fatalf("bind 31004 while no isolator holds it: %v", err)
	}
	defer svc()
	if err := inNetNS(hostPath, func() (err error) { iso.Isolator, err = New(cfg); return err }); err != nil {
		t.Fatal(err)
	}
	if nh := iso.NotHeld(); len(nh) != 1 || !errors.Is(nh[0], isolator.ErrPortInUse) || !strings.Contains(nh[0].Error(), "container d: host port 31004/tcp") {
		t.Errorf("NotHeld after a host process took 31004: %v", nh)
	}
	if err := iso.Recover(context.Background(), map[string]isolator.Limits{"d": {Network: true}}); err != nil {
		t.Fatal(err)
	}
	if rules := chainRules(t, iso.Isolator); rules["prerouting"] != 1 {
		t.Errorf("nat rules of d after the restart: %v", rules)
	}
}
