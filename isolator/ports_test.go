package isolator

import (
	"errors"
	"net/netip"
	"testing"
)

func TestParsePort(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want PortMapping
	}{
		{"8080:80", PortMapping{HostPort: 8080, ContainerPort: 80, Protocol: TCP}},
		{"8080:80/tcp", PortMapping{HostPort: 8080, ContainerPort: 80, Protocol: TCP}},
		{"5353:53/udp", PortMapping{HostPort: 5353, ContainerPort: 53, Protocol: UDP}},
		{"192.0.2.7:1:65535/udp", PortMapping{HostIP: netip.MustParseAddr("192.0.2.7"), HostPort: 1, ContainerPort: 65535, Protocol: UDP}},
	} {
		got, err := ParsePort(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParsePort(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if back, err := ParsePort(got.String()); err != nil || back != got {
			t.Errorf("ParsePort(%q.String() = %q) = %+v, %v", tc.in, got.String(), back, err)
		}
	}
	for _, in := range []string{
		"", "80", "0:80", "80:0", "70000:80", "80:70000", "-1:80", "a:80", "80:80/sctp", "80:80/",
		"1:2:3:4", "::1:80:80", "localhost:80:80", "127.0.0.1:80:80", "0.0.0.0:80:80", "2001:db8::1:80:80",
	} {
		if p, err := ParsePort(in); !errors.Is(err, ErrBadPort) {
			t.Errorf("ParsePort(%q) = %+v, %v; want ErrBadPort", in, p, err)
		}
	}
}

func TestCheckPorts(t *testing.T) {
	a := netip.MustParseAddr("192.0.2.1")
	b := netip.MustParseAddr("192.0.2.2")
	for _, tc := range []struct {
		name  string
		ports []PortMapping
		ok    bool
	}{
		{"none", nil, true},
		{"tcp and udp on one port", []PortMapping{{HostPort: 53, ContainerPort: 53, Protocol: TCP}, {HostPort: 53, ContainerPort: 53, Protocol: UDP}}, true},
		{"two host addresses", []PortMapping{{HostIP: a, HostPort: 80, ContainerPort: 80, Protocol: TCP}, {HostIP: b, HostPort: 80, ContainerPort: 81, Protocol: TCP}}, true},
		{"two host ports to one container port", []PortMapping{{HostPort: 80, ContainerPort: 80, Protocol: TCP}, {HostPort: 81, ContainerPort: 80, Protocol: TCP}}, true},
		{"duplicate", []PortMapping{{HostPort: 80, ContainerPort: 80, Protocol: TCP}, {HostPort: 80, ContainerPort: 81, Protocol: TCP}}, false},
		{"any address covers one", []PortMapping{{HostPort: 80, ContainerPort: 80, Protocol: TCP}, {HostIP: a, HostPort: 80, ContainerPort: 81, Protocol: TCP}}, false},
		{"host port 0", []PortMapping{{HostPort: 0, ContainerPort: 80, Protocol: TCP}}, false},
		{"container port 0", []PortMapping{{HostPort: 80, ContainerPort: 0, Protocol: TCP}}, false},
		{"no protocol", []PortMapping{{HostPort: 80, ContainerPort: 80}}, false},
		{"IPv6 host address", []PortMapping{{HostIP: netip.MustParseAddr("2001:db8::1"), HostPort: 80, ContainerPort: 80, Protocol: TCP}}, false},
		{"loopback host address", []PortMapping{{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: 80, ContainerPort: 80, Protocol: TCP}}, false},
	} {
		err := CheckPorts(tc.ports)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrBadPort)) {
			t.Errorf("%s: CheckPorts = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestParsePortRange(t *testing.T) {
	for in, want := range map[string]PortRange{
		"31000-32000": DefaultPortRange,
		"1-65535":     {1, 65535},
		"80-80":       {80, 80},
	} {
		got, err := ParsePortRange(in)
		if err != nil || got != want || got.String() != in {
			t.Errorf("ParsePortRange(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "80", "0-80", "80-70000", "90-80", "a-b", "-80", "80-", "1-2-3"} {
		if r, err := ParsePortRange(in); !errors.Is(err, ErrBadPort) {
			t.Errorf("ParsePortRange(%q) = %v, %v; want ErrBadPort", in, r, err)
		}
	}
	r := PortRange{10, 20}
	for p, want := range map[uint16]bool{9: false, 10: true, 15: true, 20: true, 21: false} {
		if r.Contains(p) != want {
			t.Errorf("%v.Contains(%d) = %v", r, p, !want)
		}
	}
}
