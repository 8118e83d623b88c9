package network

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/brimnode/brim/isolator"
)

func TestConfigDefaults(t *testing.T) {
	c, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Bridge != DefaultBridge || c.Subnet != DefaultSubnet || c.StateDir != DefaultStateDir || c.NetNSDir != DefaultNetNSDir+"/"+DefaultBridge || c.HostRateMbit != DefaultHostRateMbit {
		t.Errorf("defaults: %+v", c)
	}
	c, err = Config{Subnet: netip.MustParsePrefix("10.1.2.3/24")}.withDefaults()
	if err != nil || c.Subnet != netip.MustParsePrefix("10.1.2.0/24") {
		t.Errorf("subnet not masked: %v %v", c.Subnet, err)
	}
}

func TestConfigInvalid(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  Config
		want error
	}{
		"long bridge":   {Config{Bridge: "a-very-long-br"}, ErrInvalid},
		"ipv6":          {Config{Subnet: netip.MustParsePrefix("fd00::/64")}, ErrInvalid},
		"too big":       {Config{Subnet: netip.MustParsePrefix("10.0.0.0/8")}, ErrInvalid},
		"too small":     {Config{Subnet: netip.MustParsePrefix("10.0.0.0/31")}, ErrInvalid},
		"relative dir":  {Config{StateDir: "state"}, ErrInvalid},
		"negative rate": {Config{HostRateMbit: -1}, ErrInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := tc.cfg.withDefaults(); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCheckID(t *testing.T) {
	for _, id := range []string{"", ".", "..", ".last", "a/b", "a\x00"} {
		if err := checkID(id); !errors.Is(err, ErrInvalid) {
			t.Errorf("checkID(%q) = %v, want ErrInvalid", id, err)
		}
	}
	for _, id := range []string{"c1", "task-1.abc", "0f3e2d"} {
		if err := checkID(id); err != nil {
			t.Errorf("checkID(%q) = %v", id, err)
		}
	}
}

func TestNextIndex(t *testing.T) {
	for _, tc := range []struct {
		name             string
		used             []uint32
		last, first, max uint32
		want             uint32
		ok               bool
	}{
		{"empty", nil, 0, 2, 10, 2, true},
		{"after last", nil, 5, 2, 10, 6, true},
		{"skip used", []uint32{6, 7}, 5, 2, 10, 8, true},
		{"wrap", []uint32{10}, 9, 2, 10, 2, true},
		{"wrap past used", []uint32{10, 2, 3}, 9, 2, 10, 4, true},
		{"last is max", nil, 10, 2, 10, 2, true},
		{"full", []uint32{2, 3}, 0, 2, 3, 0, false},
		{"empty range", nil, 0, 2, 1, 0, false},
		{"single", nil, 2, 2, 2, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			used := map[uint32]bool{}
			for _, u := range tc.used {
				used[u] = true
			}
			got, ok := nextIndex(used, tc.last, tc.first, tc.max)
			if got != tc.want || ok != tc.ok {
				t.Errorf("nextIndex = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestAddresses(t *testing.T) {
	p := netip.MustParsePrefix("10.77.0.0/16")
	first, last := indexRange(p)
	if first != 2 || last != 65534 {
		t.Errorf("indexRange(/16) = %d, %d", first, last)
	}
	if got := addrAt(p, 1); got != netip.MustParseAddr("10.77.0.1") {
		t.Errorf("gateway = %v", got)
	}
	if got := addrAt(p, 258); got != netip.MustParseAddr("10.77.1.2") {
		t.Errorf("addrAt(258) = %v", got)
	}
	if got := addrAt(p, last); got != netip.MustParseAddr("10.77.255.254") {
		t.Errorf("last address = %v", got)
	}
	if f, l := indexRange(netip.MustParsePrefix("10.0.0.0/30")); f != 2 || l != 2 {
		t.Errorf("indexRange(/30) = %d, %d", f, l)
	}
}

func TestStore(t *testing.T) {
	s := store{dir: t.TempDir() + "/ipam"}
	recs, err := s.load()
	if err != nil || len(recs) != 0 {
		t.Fatalf("load of a missing dir = %v, %v", recs, err)
	}
	r := record{ID: "c1", Index: 7, Address: netip.MustParseAddr("10.0.0.7"), Limits: isolator.Limits{Network: true, NetBandwidthMbit: 50, Class: isolator.BestEffort,
		Ports: []isolator.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}, {HostIP: netip.MustParseAddr("192.0.2.1"), HostPort: 53, ContainerPort: 5353, Protocol: "udp"}}}, Seq: 4}
	if err := s.put(r); err != nil {
		t.Fatal(err)
	}
	recs, err = s.load()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || !reflect.DeepEqual(recs["c1"], r) {
		t.Errorf("load = %+v, want %+v", recs, r)
	}
	if err := s.put(record{ID: "c2", Index: 3, Seq: 9}); err != nil {
		t.Fatal(err)
	}
	recs, _ = s.load()
	if idx, seq := newest(recs); idx != 3 || seq != 9 {
		t.Errorf("newest = %d, %d; want 3, 9", idx, seq)
	}
	if err := s.remove("c2"); err != nil {
		t.Fatal(err)
	}
	if err := s.remove("c1"); err != nil {
		t.Fatal(err)
	}
	if err := s.remove("c1"); err != nil {
		t.Errorf("second remove: %v", err)
	}
	if recs, _ := s.load(); len(recs) != 0 {
		t.Errorf("after remove: %+v", recs)
	}
}

func TestClassFor(t *testing.T) {
	const host = 1000
	for _, tc := range []struct {
		name   string
		limits isolator.Limits
		want   classSpec
	}{
		{"guaranteed", isolator.Limits{NetBandwidthMbit: 50}, classSpec{Rate: 50 * mbit, Ceil: 50 * mbit, Prio: prioGuaranteed, Quantum: 200000}},
		{"guaranteed unlimited", isolator.Limits{}, classSpec{Rate: host * mbit, Ceil: host * mbit, Prio: prioGuaranteed, Quantum: 200000}},
		{"guaranteed above uplink", isolator.Limits{NetBandwidthMbit: 5000}, classSpec{Rate: host * mbit, Ceil: host * mbit, Prio: prioGuaranteed, Quantum: 200000}},
		{"best effort", isolator.Limits{NetBandwidthMbit: 200, Class: isolator.BestEffort}, classSpec{Rate: 1 * mbit, Ceil: 200 * mbit, Prio: prioBestEffort, Quantum: 12500}},
		{"best effort unlimited", isolator.Limits{Class: isolator.BestEffort}, classSpec{Rate: 1 * mbit, Ceil: host * mbit, Prio: prioBestEffort, Quantum: 12500}},
		{"tiny", isolator.Limits{NetBandwidthMbit: 1}, classSpec{Rate: 1 * mbit, Ceil: 1 * mbit, Prio: prioGuaranteed, Quantum: 12500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classFor(tc.limits, host); got != tc.want {
				t.Errorf("classFor = %+v, want %+v", got, tc.want)
			}
		})
	}
	if q := quantum(1000); q != 1600 {
		t.Errorf("quantum floor = %d", q)
	}
}

// TestLeafQueueBytes: the leaf queue holds leafQueueMillis of the class's
// ceiling, never less than minLeafQueueBytes nor more than
// maxLeafQueueBytes.
func TestLeafQueueBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    classSpec
		want uint32
	}{
		{"20 Mbit", classSpec{Rate: 20 * mbit, Ceil: 20 * mbit}, 125_000},
		{"best effort borrows up to its ceiling", classSpec{Rate: 1 * mbit, Ceil: 100 * mbit}, 625_000},
		{"1 Mbit: a few packets at least", classSpec{Rate: 1 * mbit, Ceil: 1 * mbit}, minLeafQueueBytes},
		{"100 Gbit: capped", classSpec{Rate: 100_000 * mbit, Ceil: 100_000 * mbit}, maxLeafQueueBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := leafQueueBytes(tc.s); got != tc.want {
				t.Errorf("leafQueueBytes(%+v) = %d, want %d", tc.s, got, tc.want)
			}
		})
	}
}
