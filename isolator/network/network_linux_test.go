//go:build linux

package network

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// TestReachability: two containers reach each other by address; each sees
// loopback and its own eth0 only.
func TestReachability(t *testing.T) {
	iso := newTestIsolator(t, 1000)
	nsA := prepare(t, iso, "a", isolator.Limits{})
	nsB := prepare(t, iso, "b", isolator.Limits{NetBandwidthMbit: 100})
	a, b := mustAddr(t, iso, "a"), mustAddr(t, iso, "b")
	if a == b || !iso.cfg.Subnet.Contains(a) || !iso.cfg.Subnet.Contains(b) {
		t.Fatalf("addresses %v, %v not distinct in %v", a, b, iso.cfg.Subnet)
	}

	var ln net.Listener
	if err := inNetNS(nsA, func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(a, 7000).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		msg, _ := io.ReadAll(c)
		got <- string(msg)
	}()
	if err := inNetNS(nsB, func() error {
		c, err := net.Dial("tcp4", netip.AddrPortFrom(a, 7000).String())
		if err != nil {
			return err
		}
		if _, err := c.Write([]byte("hello from b")); err != nil {
			return err
		}
		return c.Close()
	}); err != nil {
		t.Fatalf("b dials a: %v", err)
	}
	if msg := <-got; msg != "hello from b" {
		t.Errorf("a received %q", msg)
	}

	// The gateway (the bridge) answers too.
	if err := inNetNS(nsA, func() error {
		c, err := net.Dial("tcp4", netip.AddrPortFrom(iso.Gateway(), 1).String())
		if err == nil {
			c.Close()
			return nil
		}
		if strings.Contains(err.Error(), "refused") {
			return nil // the host answered with a reset: reachable
		}
		return err
	}); err != nil {
		t.Errorf("a reaches the gateway: %v", err)
	}

	for _, ns := range []string{nsA, nsB} {
		var names []string
		if err := inNetNS(ns, func() error {
			links, err := dump(netlink.LinkList)
			for _, l := range links {
				names = append(names, l.Attrs().Name)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"eth0", "lo"}) {
			t.Errorf("links in %s: %v, want eth0 and lo", ns, names)
		}
		var v6 []byte
		if err := inNetNS(ns, func() (err error) {
			v6, err = os.ReadFile("/proc/sys/net/ipv6/conf/eth0/disable_ipv6")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(v6)) != "1" {
			t.Errorf("ipv6 on eth0 in %s: disable_ipv6 = %q, want 1", ns, v6)
		}
	}
}

// TestNoNetwork: without Limits.Network, Prepare makes nothing, and the
// other calls are no-ops (the launcher gives such a container a fresh
// namespace with only loopback).
func TestNoNetwork(t *testing.T) {
	iso := newTestIsolator(t, 1000)
	ctx := context.Background()
	// Only this isolator's links: other tests on the machine add theirs.
	ours := func() []string {
		links, err := dump(netlink.LinkList)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range links {
			if strings.HasPrefix(l.Attrs().Name, iso.vethPrefix) {
				names = append(names, l.Attrs().Name)
			}
		}
		slices.Sort(names)
		return names
	}
	before := ours()
	var l isolator.Launch
	if err := iso.Prepare(ctx, "none", isolator.Limits{NetBandwidthMbit: 10}, &l); err != nil {
		t.Fatal(err)
	}
	if l.NetNSPath != "" || len(l.Env) != 0 {
		t.Errorf("launch = %+v, want nothing", l)
	}
	if after := ours(); !slices.Equal(before, after) {
		t.Errorf("links before %v, after %v", before, after)
	}
	if ents, _ := os.ReadDir(iso.cfg.NetNSDir); len(ents) != 0 {
		t.Errorf("netns files: %v", ents)
	}
	if recs, _ := iso.store.load(); len(recs) != 0 {
		t.Errorf("records: %v", recs)
	}
	if _, err := iso.Address("none"); !errors.Is(err, isolator.ErrNotFound) {
		t.Errorf("Address = %v, want ErrNotFound", err)
	}
	var s isolator.Statistics
	if err := iso.Usage(ctx, "none", &s); err != nil || s.HasNet {
		t.Errorf("Usage = %v, HasNet %v", err, s.HasNet)
	}
	if err := iso.Update(ctx, "none", isolator.Limits{NetBandwidthMbit: 20}); err != nil {
		t.Errorf("Update = %v", err)
	}
	if err := iso.Update(ctx, "none", isolator.Limits{Network: true}); !errors.Is(err, isolator.ErrNotFound) {
		t.Errorf("Update asking for network = %v, want ErrNotFound", err)
	}
	if err := iso.Cleanup(ctx, "none"); err != nil {
		t.Errorf("Cleanup = %v", err)
	}
}

func TestPrepareTwice(t *testing.T) {
	iso := newTestIsolator(t, 1000)
	prepare(t, iso, "c", isolator.Limits{})
	var l isolator.Launch
	if err := iso.Prepare(context.Background(), "c", isolator.Limits{Network: true}, &l); !errors.Is(err, ErrExist) {
		t.Errorf("second Prepare = %v, want ErrExist", err)
	}
	if err := iso.Prepare(context.Background(), "../x", isolator.Limits{Network: true}, &l); !errors.Is(err, ErrInvalid) {
		t.Errorf("Prepare of a bad id = %v, want ErrInvalid", err)
	}
}

// TestSubnetExhausted: a /30 holds one container; the next gets
// ErrExhausted, and a freed address is handed out again.
func TestSubnetExhausted(t *testing.T) {
	cfg := testConfig(t, 1000)
	cfg.Subnet = netip.PrefixFrom(cfg.Subnet.Addr(), 30)
	iso, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uninstall(t, iso) })
	ctx := context.Background()
	var l isolator.Launch
	if err := iso.Prepare(ctx, "one", isolator.Limits{Network: true}, &l); err != nil {
		t.Fatal(err)
	}
	if err := iso.Prepare(ctx, "two", isolator.Limits{Network: true}, &l); !errors.Is(err, ErrExhausted) {
		t.Errorf("Prepare in a full subnet = %v, want ErrExhausted", err)
	}
	if err := iso.Cleanup(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if err := iso.Prepare(ctx, "two", isolator.Limits{Network: true}, &l); err != nil {
		t.Errorf("Prepare after a cleanup: %v", err)
	}
}

// TestNAT: with NAT on, a container reaches an address outside its subnet
// and is seen there as the host. Everything runs in namespaces the test
// makes: "host" holds the bridge and the NAT table, "outside" is reached
// through a veth from "host".
func TestNAT(t *testing.T) {
	hostPath, outPath := "/run/netns/"+testutil.NewNetNS(t), "/run/netns/"+testutil.NewNetNS(t)
	cfg := testConfig(t, 1000)
	cfg.NAT = true
	var iso *Isolator
	if err := inNetNS(hostPath, func() (err error) {
		iso, err = New(cfg)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := iso.Uninstall(context.Background()); err != nil {
			t.Errorf("uninstall: %v", err)
		}
		if natTables(t, iso) != 0 {
			t.Error("nat table left after uninstall")
		}
		_ = iso.Close()
	})
	if natTables(t, iso) != 1 {
		t.Fatal("no nat table")
	}

	hostNS, err := netns.GetFromPath(hostPath)
	if err != nil {
		t.Fatal(err)
	}
	defer hostNS.Close()
	outNS, err := netns.GetFromPath(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer outNS.Close()
	hh, err := netlink.NewHandleAt(hostNS)
	if err != nil {
		t.Fatal(err)
	}
	defer hh.Close()
	oh, err := netlink.NewHandleAt(outNS)
	if err != nil {
		t.Fatal(err)
	}
	defer oh.Close()
	la := netlink.NewLinkAttrs()
	la.Name = "up0"
	if err := hh.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "wan0", PeerNamespace: netlink.NsFd(int(outNS))}); err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct {
		h    *netlink.Handle
		name string
		addr string
	}{{hh, "up0", "192.0.2.2"}, {oh, "wan0", "192.0.2.1"}, {oh, "lo", ""}} {
		l, err := e.h.LinkByName(e.name)
		if err != nil {
			t.Fatal(err)
		}
		if e.addr != "" {
			if err := e.h.AddrAdd(l, ipNet(netip.MustParseAddr(e.addr), 24)); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}

	nsC := prepare(t, iso, "c", isolator.Limits{})
	var ln net.Listener
	if err := inNetNS(outPath, func() (err error) {
		ln, err = net.Listen("tcp4", "192.0.2.1:7100")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			peer <- err.Error()
			return
		}
		peer <- c.RemoteAddr().(*net.TCPAddr).IP.String()
		c.Close()
	}()
	if err := inNetNS(nsC, func() error {
		c, err := net.DialTimeout("tcp4", "192.0.2.1:7100", 10*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	}); err != nil {
		t.Fatalf("container dials outside: %v", err)
	}
	if got := <-peer; got != "192.0.2.2" {
		t.Errorf("outside sees the container as %s, want the host's 192.0.2.2", got)
	}
}

// natTables counts iso's NAT tables in its host namespace.
func natTables(t *testing.T, iso *Isolator) int {
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

// TestStateDirLock: one Isolator per state dir; Close hands it over.
func TestStateDirLock(t *testing.T) {
	cfg := testConfig(t, 1000)
	first, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg); !errors.Is(err, ErrLocked) {
		_ = first.Uninstall(context.Background())
		t.Fatalf("second New on the same state dir = %v, want ErrLocked", err)
	}
	var l isolator.Launch
	err = first.Prepare(context.Background(), "c", isolator.Limits{Network: true}, &l)
	if cerr := first.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	next, nerr := New(cfg)
	if nerr != nil {
		t.Fatalf("New after Close: %v", nerr)
	}
	t.Cleanup(func() { uninstall(t, next) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := next.Address("c"); err != nil {
		t.Errorf("the successor does not know c: %v", err)
	}
}

// TestConcurrent: Prepare, Update, Usage and Cleanup of several containers
// at once (run with -race).
func TestConcurrent(t *testing.T) {
	iso := newTestIsolator(t, 1000)
	ctx := context.Background()
	errc := make(chan error, 8)
	for n := range 8 {
		go func() {
			errc <- func() error {
				id := fmt.Sprintf("c%d", n)
				var l isolator.Launch
				if err := iso.Prepare(ctx, id, isolator.Limits{Network: true, NetBandwidthMbit: 10}, &l); err != nil {
					return err
				}
				if err := iso.Update(ctx, id, isolator.Limits{Network: true, NetBandwidthMbit: 20}); err != nil {
					return err
				}
				var s isolator.Statistics
				if err := iso.Usage(ctx, id, &s); err != nil {
					return err
				}
				if !s.HasNet || len(s.NetTrafficClass) != 2 {
					return fmt.Errorf("usage of %s: %+v", id, s)
				}
				return iso.Cleanup(ctx, id)
			}()
		}()
	}
	for range 8 {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	if l := leftovers(t, iso); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// TestUsage: interface counters (seen from inside) and class counters of
// both directions account for traffic between two containers.
func TestUsage(t *testing.T) {
	iso := newTestIsolator(t, 1000)
	ctx := context.Background()
	nsA := prepare(t, iso, "a", isolator.Limits{})
	nsB := prepare(t, iso, "b", isolator.Limits{NetBandwidthMbit: 500})
	a := mustAddr(t, iso, "a")
	const size = 1 << 20
	var ln net.Listener
	if err := inNetNS(nsA, func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(a, 7001).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		got <- n
	}()
	if err := inNetNS(nsB, func() error {
		c, err := net.Dial("tcp4", netip.AddrPortFrom(a, 7001).String())
		if err != nil {
			return err
		}
		if _, err := c.Write(make([]byte, size)); err != nil {
			return err
		}
		return c.Close()
	}); err != nil {
		t.Fatal(err)
	}
	if n := <-got; n != size {
		t.Fatalf("a received %d bytes, want %d", n, size)
	}
	var sa, sb isolator.Statistics
	if err := iso.Usage(ctx, "a", &sa); err != nil {
		t.Fatal(err)
	}
	if err := iso.Usage(ctx, "b", &sb); err != nil {
		t.Fatal(err)
	}
	if !sa.HasNet || !sb.HasNet {
		t.Fatal("HasNet not set")
	}
	if sb.NetTxBytes < size || sb.NetTxPackets == 0 || sa.NetRxBytes < size || sa.NetRxPackets == 0 {
		t.Errorf("interface counters: b tx %d bytes/%d packets, a rx %d bytes/%d packets; want ≥ %d bytes",
			sb.NetTxBytes, sb.NetTxPackets, sa.NetRxBytes, sa.NetRxPackets, size)
	}
	class := func(s isolator.Statistics, id string) isolator.TrafficControlStatistics {
		for _, c := range s.NetTrafficClass {
			if c.ID == id {
				return c
			}
		}
		t.Fatalf("no %s class in %+v", id, s.NetTrafficClass)
		return isolator.TrafficControlStatistics{}
	}
	if c := class(sb, "egress"); c.Bytes < size || c.Packets == 0 {
		t.Errorf("b's egress class: %+v", c)
	}
	if c := class(sa, "ingress"); c.Bytes < size || c.Packets == 0 {
		t.Errorf("a's ingress class: %+v", c)
	}
	if c := class(sa, "egress"); c.Bytes >= size {
		t.Errorf("a's egress class counted b's data: %+v", c)
	}
}

// TestRecoverSweepsOrphans: objects with this isolator's names but no record
// (a veth, a netns file, an HTB class and selector) are removed by Recover;
// a live container is kept.
func TestRecoverSweepsOrphans(t *testing.T) {
	iso := newTestIsolator(t, 1000)
	ctx := context.Background()
	prepare(t, iso, "live", isolator.Limits{NetBandwidthMbit: 10})

	la := netlink.NewLinkAttrs()
	la.Name = iso.vethName(0x77)
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: testutil.UniqueName("brp")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = iso.deleteLink(la.Name) })
	if err := createNetNS(iso.netnsPath("orphan")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeNetNS(iso.netnsPath("orphan")) })
	if err := iso.setClass(iso.txIFB, 0x77, classFor(isolator.Limits{}, 1000)); err != nil {
		t.Fatal(err)
	}
	if err := netlink.FilterReplace(selector(iso.rxIFB, 0x78, netip.MustParseAddr("192.0.2.1"), offDst)); err != nil {
		t.Fatal(err)
	}
	if l := leftovers(t, iso); len(l) != 4 {
		t.Fatalf("orphans seen: %v, want 4", l)
	}
	if err := iso.Recover(ctx, map[string]isolator.Limits{"live": {Network: true, NetBandwidthMbit: 10}}); err != nil {
		t.Fatal(err)
	}
	if l := leftovers(t, iso); len(l) != 0 {
		t.Errorf("left after recovery: %v", l)
	}
	if _, err := iso.Address("live"); err != nil {
		t.Errorf("live container: %v", err)
	}
}

// TestRecoverTwice: recovering again leaves one selector per container and
// direction, and the container's traffic classified.
func TestRecoverTwice(t *testing.T) {
	iso := newTestIsolator(t, 1000)
	ctx := context.Background()
	prepare(t, iso, "c", isolator.Limits{NetBandwidthMbit: 10})
	idx := mustIndex(t, iso, "c")
	count := func() int {
		t.Helper()
		n := 0
		for _, ifb := range []int{iso.txIFB, iso.rxIFB} {
			fs, err := dump(func() ([]netlink.Filter, error) {
				return netlink.FilterList(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Index: ifb}}, rootHandle)
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				if u, ok := f.(*netlink.U32); ok && uint32(f.Attrs().Priority) == idx && u.ClassId != 0 {
					n++
				}
			}
		}
		return n
	}
	if n := count(); n != 2 {
		t.Fatalf("after Prepare: %d selectors, want 2", n)
	}
	known := map[string]isolator.Limits{"c": {Network: true, NetBandwidthMbit: 20}}
	for range 2 {
		if err := iso.Recover(ctx, known); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(); n != 2 {
		t.Errorf("after two recoveries: %d selectors, want 2", n)
	}
	if got := classRate(t, iso.rxIFB, idx); got != 20*mbit {
		t.Errorf("class rate after recovery: %d, want 20 Mbit/s", got)
	}
}

// TestUpdateClass: a container moved between guaranteed and best-effort
// gets the class parameters of its new QoS class on both IFBs.
func TestUpdateClass(t *testing.T) {
	iso := newTestIsolator(t, 1000)
	ctx := context.Background()
	prepare(t, iso, "c", isolator.Limits{NetBandwidthMbit: 10})
	idx := mustIndex(t, iso, "c")
	for _, l := range []isolator.Limits{
		{Network: true, NetBandwidthMbit: 10, Class: isolator.BestEffort},
		{Network: true, NetBandwidthMbit: 30},
	} {
		if err := iso.Update(ctx, "c", l); err != nil {
			t.Fatal(err)
		}
		want := classFor(l, 1000)
		for _, ifb := range []int{iso.txIFB, iso.rxIFB} {
			classes, err := dump(func() ([]netlink.Class, error) {
				return netlink.ClassList(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Index: ifb}}, 0)
			})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, c := range classes {
				if h, ok := c.(*netlink.HtbClass); ok && h.Handle == netlink.MakeHandle(1, uint16(idx)) {
					found = true
					if h.Rate*8 != want.Rate || h.Ceil*8 != want.Ceil || h.Prio != want.Prio {
						t.Errorf("%v: class rate %d ceil %d prio %d, want %+v", l.Class, h.Rate*8, h.Ceil*8, h.Prio, want)
					}
				}
			}
			if !found {
				t.Fatalf("no class 1:%x", idx)
			}
		}
	}
	recs, err := iso.store.load()
	if err != nil {
		t.Fatal(err)
	}
	if got := recs["c"].Limits; got.NetBandwidthMbit != 30 || got.Class != isolator.Guaranteed {
		t.Errorf("recorded limits %+v", got)
	}
}

// TestIsolate: Isolate accepts a process inside the container's namespace
// and refuses one outside it.
func TestIsolate(t *testing.T) {
	iso := newTestIsolator(t, 1000)
	ctx := context.Background()
	ns := prepare(t, iso, "c", isolator.Limits{})
	// Forked from a thread inside the namespace, the child starts in it.
	cmd := exec.Command("sleep", "60")
	if err := inNetNS(ns, cmd.Start); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if err := iso.Isolate(ctx, "c", cmd.Process.Pid); err != nil {
		t.Errorf("Isolate of a process in the namespace: %v", err)
	}
	outside := exec.Command("sleep", "60")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = outside.Process.Kill()
		_ = outside.Wait()
	})
	if err := iso.Isolate(ctx, "c", outside.Process.Pid); !errors.Is(err, ErrInvalid) {
		t.Errorf("Isolate of a process outside = %v, want ErrInvalid", err)
	}
	if err := iso.Isolate(ctx, "no-network", outside.Process.Pid); err != nil {
		t.Errorf("Isolate of a container without network = %v", err)
	}
}

// TestLeafQueue: every container class has a bfifo bounded in bytes from
// its ceiling, on both IFBs; a resize changes the bound, and Recover puts
// a lost one back.
func TestLeafQueue(t *testing.T) {
	iso := newTestIsolator(t, 1000)
	ctx := context.Background()
	prepare(t, iso, "c", isolator.Limits{NetBandwidthMbit: 20})
	idx := mustIndex(t, iso, "c")
	check := func(l isolator.Limits) {
		t.Helper()
		want := leafQueueBytes(classFor(l, 1000))
		for _, ifb := range []int{iso.txIFB, iso.rxIFB} {
			iso.mu.Lock()
			got, err := iso.leafQueueLimit(ifb, idx)
			iso.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("limits %+v: bfifo limit on ifb %d = %d bytes, want %d", l, ifb, got, want)
			}
		}
	}
	l := isolator.Limits{Network: true, NetBandwidthMbit: 20}
	check(l)
	l.NetBandwidthMbit = 200
	if err := iso.Update(ctx, "c", l); err != nil {
		t.Fatal(err)
	}
	check(l)
	// A queue removed behind the isolator's back comes back at Recover.
	q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: iso.txIFB, Handle: leafHandle(idx), Parent: netlink.MakeHandle(1, uint16(idx))}, QdiscType: "bfifo"}
	if err := netlink.QdiscDel(q); err != nil {
		t.Fatal(err)
	}
	if err := iso.Recover(ctx, map[string]isolator.Limits{"c": l}); err != nil {
		t.Fatal(err)
	}
	check(l)
}

// TestReleaseFreesAddress: Release of an exited container removes its
// namespace, veth, classes and record at once, so more containers than
// the subnet holds can come and go without Cleanup; Cleanup afterwards is
// a no-op.
func TestReleaseFreesAddress(t *testing.T) {
	cfg := testConfig(t, 1000)
	cfg.Subnet = netip.PrefixFrom(cfg.Subnet.Addr(), 29) // 5 containers
	iso, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uninstall(t, iso) })
	ctx := context.Background()
	for n := range 12 {
		id := fmt.Sprintf("c%d", n)
		var l isolator.Launch
		if err := iso.Prepare(ctx, id, isolator.Limits{Network: true, NetBandwidthMbit: 10}, &l); err != nil {
			t.Fatalf("prepare container %d in a /29: %v", n, err)
		}
		if err := iso.Release(ctx, id); err != nil {
			t.Fatalf("release %s: %v", id, err)
		}
		if _, err := os.Stat(l.NetNSPath); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("netns of released %s: %v, want gone", id, err)
		}
		if _, err := iso.Address(id); !errors.Is(err, isolator.ErrNotFound) {
			t.Errorf("address of released %s: %v, want ErrNotFound", id, err)
		}
		if err := iso.Release(ctx, id); err != nil {
			t.Errorf("second release of %s: %v", id, err)
		}
		if err := iso.Cleanup(ctx, id); err != nil {
			t.Errorf("cleanup after release of %s: %v", id, err)
		}
	}
	if l := leftovers(t, iso); len(l) > 0 {
		t.Errorf("left after release: %v", l)
	}
}
