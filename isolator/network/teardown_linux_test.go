//go:build linux

package network

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// readForward reads ip_forward in the namespace at nsPath.
func readForward(t *testing.T, nsPath string) string {
	t.Helper()
	var v []byte
	if err := inNetNS(nsPath, func() (err error) { v, err = os.ReadFile(ipForward); return err }); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(v))
}

// TestTeardown (issue 30): after the agent is gone (its isolator closed,
// as by a kill), Teardown removes everything the isolator made — the
// nftables table, veths, netns files and their mounts, address records,
// the IFBs with their classes, the bridge, the netns dir's mount and the
// dir — and puts ip_forward back as it was before NAT turned it on; a
// second Teardown finds nothing. While an isolator holds the state dir it
// refuses (ErrLocked) and removes nothing. Before, nothing removed these
// without a running isolator (Uninstall needs New, which makes them).
func TestTeardown(t *testing.T) {
	hostPath := "/run/netns/" + testutil.NewNetNS(t)
	cfg := testConfig(t, 1000)
	cfg.NAT = true
	if got := readForward(t, hostPath); got != "0" {
		t.Fatalf("ip_forward of a new namespace = %s, want 0", got)
	}
	iso := newIsolatorIn(t, hostPath, cfg)
	if got := readForward(t, hostPath); got != "1" {
		t.Fatalf("ip_forward with NAT = %s, want 1", got)
	}
	for _, id := range []string{"a", "b", "c"} {
		prepareIn(t, iso.Isolator, id, isolator.Limits{NetBandwidthMbit: 10, Ports: []isolator.PortMapping{
			{HostPort: 31000 + uint16(id[0]), ContainerPort: 80, Protocol: isolator.TCP}}})
	}
	// A netns file without a record (an agent killed half-way).
	if err := createNetNS(filepath.Join(cfg.NetNSDir, "orphan")); err != nil {
		t.Fatal(err)
	}
	teardown := func() ([]string, error) {
		var out []string
		err := inNetNS(hostPath, func() (err error) { out, err = Teardown(cfg); return err })
		return out, err
	}
	if out, err := teardown(); !errors.Is(err, ErrLocked) || len(out) > 0 {
		t.Errorf("teardown beside a running isolator: %v, %v; want ErrLocked and nothing done", out, err)
	}
	// The agent goes (Close keeps the containers' network, and forwarding
	// for them).
	if err := iso.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readForward(t, hostPath); got != "1" {
		t.Errorf("ip_forward after a stop with networked containers = %s, want 1 (they need it)", got)
	}
	out, err := teardown()
	if err != nil {
		t.Fatalf("teardown: %v\n%s", err, strings.Join(out, "\n"))
	}
	text := strings.Join(out, "\n")
	for _, want := range []string{
		"removed nftables table ip brim-" + cfg.Bridge,
		"removed address record", "of container a", "of container c",
		"removed netns " + filepath.Join(cfg.NetNSDir, "b"),
		"removed netns " + filepath.Join(cfg.NetNSDir, "orphan") + " (no record)",
		"removed ifb " + cfg.Bridge + "-tx with 3 container classes",
		"removed bridge " + cfg.Bridge,
		"removed mount " + cfg.NetNSDir,
		"restored net.ipv4.ip_forward 1 → 0",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("teardown output lacks %q:\n%s", want, text)
		}
	}
	if got := readForward(t, hostPath); got != "0" {
		t.Errorf("ip_forward after teardown = %s, want 0", got)
	}
	h := nsHandle(t, hostPath)
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if n := l.Attrs().Name; n != "lo" {
			t.Errorf("link %s left in the host namespace", n)
		}
	}
	nsf, err := os.Open(hostPath)
	if err != nil {
		t.Fatal(err)
	}
	defer nsf.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(nsf.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	if tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4); err != nil || len(tables) > 0 {
		t.Errorf("tables left: %v, %v", tables, err)
	}
	if _, err := os.Stat(cfg.NetNSDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("netns dir: %v, want it gone", err)
	}
	if recs, _ := filepath.Glob(filepath.Join(cfg.StateDir, "*.json")); len(recs) > 0 {
		t.Errorf("records left: %v", recs)
	}
	if out, err := teardown(); err != nil || len(out) > 0 {
		t.Errorf("second teardown: %v, %v; want nothing done", out, err)
	}
	// The test's cleanup uninstalls an isolator made again over nothing.
	if err := inNetNS(hostPath, func() (err error) { iso.Isolator, err = New(cfg); return err }); err != nil {
		t.Fatal(err)
	}
}

// TestForwardingRecord: NAT records ip_forward's value before it turns it
// on, once (a restart over its own change keeps the host's value), and a
// stop with no networked container left puts it back.
func TestForwardingRecord(t *testing.T) {
	hostPath := "/run/netns/" + testutil.NewNetNS(t)
	cfg := testConfig(t, 1000)
	cfg.NAT = true
	iso := newIsolatorIn(t, hostPath, cfg)
	rec := filepath.Join(cfg.StateDir, forwardRecord)
	check := func(when, forward, record string) {
		t.Helper()
		b, err := os.ReadFile(rec)
		if record == "" && !errors.Is(err, os.ErrNotExist) || record != "" && string(b) != record {
			t.Errorf("%s: record %q (%v), want %q", when, b, err, record)
		}
		if got := readForward(t, hostPath); got != forward {
			t.Errorf("%s: ip_forward %s, want %s", when, got, forward)
		}
	}
	check("started", "1", "0")
	prepareIn(t, iso.Isolator, "a", isolator.Limits{})
	iso.restart(t, nil)
	check("restarted over its own change", "1", "0")
	if err := iso.Release(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if err := iso.Close(); err != nil {
		t.Fatal(err)
	}
	check("stopped with no container", "0", "")
	// Forwarding on before: nothing recorded, nothing changed at stop.
	if err := inNetNS(hostPath, func() error { return os.WriteFile(ipForward, []byte("1"), 0) }); err != nil {
		t.Fatal(err)
	}
	if err := inNetNS(hostPath, func() (err error) { iso.Isolator, err = New(cfg); return err }); err != nil {
		t.Fatal(err)
	}
	if err := iso.Close(); err != nil {
		t.Fatal(err)
	}
	check("on before the agent", "1", "")
	if err := inNetNS(hostPath, func() (err error) { iso.Isolator, err = New(cfg); return err }); err != nil {
		t.Fatal(err)
	}
}

// TestTeardownLeavesForeignBridge: a bridge of the configured name without
// the isolator's gateway address (a wrong --network-bridge naming docker0
// or virbr0) is not removed: Teardown says why and leaves it.
func TestTeardownLeavesForeignBridge(t *testing.T) {
	hostPath := "/run/netns/" + testutil.NewNetNS(t)
	cfg := testConfig(t, 1000)
	h := nsHandle(t, hostPath)
	la := netlink.NewLinkAttrs()
	la.Name = cfg.Bridge
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: la}); err != nil {
		t.Fatal(err)
	}
	var out []string
	err := inNetNS(hostPath, func() (err error) { out, err = Teardown(cfg); return err })
	if err == nil || !strings.Contains(err.Error(), "not this isolator's, left in place") || len(out) > 0 {
		t.Errorf("teardown over a foreign bridge: %v, %v; want it refused and nothing done", out, err)
	}
	if _, err := h.LinkByName(cfg.Bridge); err != nil {
		t.Errorf("the foreign bridge went: %v", err)
	}
}
