//go:build linux

package network

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

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
			links, err := netlink.LinkList()
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
	}
}

// TestNoNetwork: without Limits.Network, Prepare makes nothing, and the
// other calls are no-ops (the launcher gives such a container a fresh
// namespace with only loopback).
func TestNoNetwork(t *testing.T) {
	iso := newTestIsolator(t, 1000)
	ctx := context.Background()
	before, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var l isolator.Launch
	if err := iso.Prepare(ctx, "none", isolator.Limits{NetBandwidthMbit: 10}, &l); err != nil {
		t.Fatal(err)
	}
	if l.NetNSPath != "" || len(l.Env) != 0 {
		t.Errorf("launch = %+v, want nothing", l)
	}
	after, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("links before %d, after %d", len(before), len(after))
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

// TestNew rejects what it cannot run.
func TestNewRejects(t *testing.T) {
	testutil.RequireRoot(t)
	cfg := testConfig(t, 1000)
	cfg.NAT = true
	if _, err := New(cfg); !errors.Is(err, isolator.ErrNotSupported) {
		t.Errorf("New with NAT = %v, want ErrNotSupported", err)
	}
}
