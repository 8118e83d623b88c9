package isolator

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ErrPortInUse is returned by an isolator's Prepare when a host port a
// container asks for is already mapped to another container or held by a
// process of the host (a service listening on it).
var ErrPortInUse = errors.New("host port in use")

// ErrBadPort is wrapped by ParsePort and CheckPorts for a malformed port
// mapping (port 0 or above 65535, an unknown protocol, a duplicate).
var ErrBadPort = errors.New("bad port mapping")

// Protocols of a PortMapping.
const (
	TCP = "tcp"
	UDP = "udp"
)

// PortMapping forwards a port of the host to a port of a container with
// networking (Limits.Network): connections to HostPort on the host's
// addresses (or on HostIP only, when set) reach ContainerPort on the
// container's address.
type PortMapping struct {
	// HostIP restricts the mapping to one host address; the zero Addr
	// maps every address of the host.
	HostIP        netip.Addr `json:"hostIP,omitzero"`
	HostPort      uint16     `json:"hostPort"`
	ContainerPort uint16     `json:"containerPort"`
	// Protocol is TCP or UDP.
	Protocol string `json:"protocol"`
}

// String is the mapping in the syntax ParsePort reads:
// [HOSTIP:]HOSTPORT:CONTAINERPORT/PROTO.
func (p PortMapping) String() string {
	s := fmt.Sprintf("%d:%d/%s", p.HostPort, p.ContainerPort, p.Protocol)
	if p.HostIP.IsValid() {
		s = p.HostIP.String() + ":" + s
	}
	return s
}

// Conflicts reports whether p and q cannot both be installed: the same
// protocol and host port on a host address both cover.
func (p PortMapping) Conflicts(q PortMapping) bool {
	return p.Protocol == q.Protocol && p.HostPort == q.HostPort &&
		(!p.HostIP.IsValid() || !q.HostIP.IsValid() || p.HostIP == q.HostIP)
}

// ParsePort parses [HOSTIP:]HOSTPORT:CONTAINERPORT[/tcp|/udp] (Docker's
// -p syntax; TCP when no protocol is given). HOSTIP is an IPv4 address
// other than loopback. The result passes CheckPorts alone. Errors wrap
// ErrBadPort.
func ParsePort(s string) (PortMapping, error) {
	bad := func(format string, a ...any) (PortMapping, error) {
		return PortMapping{}, fmt.Errorf("port mapping %q: %s: %w", s, fmt.Sprintf(format, a...), ErrBadPort)
	}
	var p PortMapping
	body, proto, hasProto := strings.Cut(s, "/")
	p.Protocol = TCP
	if hasProto {
		p.Protocol = proto
	}
	if p.Protocol != TCP && p.Protocol != UDP {
		return bad("protocol %q: want tcp or udp", proto)
	}
	parts := strings.Split(body, ":")
	switch len(parts) {
	case 2:
	case 3:
		ip, err := netip.ParseAddr(parts[0])
		if err != nil || !ip.Is4() {
			return bad("host address %q: want an IPv4 address", parts[0])
		}
		p.HostIP = ip
		parts = parts[1:]
	default:
		return bad("want [HOSTIP:]HOSTPORT:CONTAINERPORT[/tcp|/udp]")
	}
	var err error
	if p.HostPort, err = parsePortNumber(parts[0]); err != nil {
		return bad("host port: %v", err)
	}
	if p.ContainerPort, err = parsePortNumber(parts[1]); err != nil {
		return bad("container port: %v", err)
	}
	if err := CheckPorts([]PortMapping{p}); err != nil {
		return PortMapping{}, err
	}
	return p, nil
}

func parsePortNumber(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("%d is out of range 1-65535", n)
	}
	return uint16(n), nil
}

// CheckPorts validates the mappings of one container: ports 1 to 65535,
// protocol tcp or udp, an IPv4 or no host address, and no two mappings of
// the same host port and protocol on an overlapping host address. Errors
// wrap ErrBadPort.
func CheckPorts(ports []PortMapping) error {
	for k, p := range ports {
		switch {
		case p.HostPort == 0 || p.ContainerPort == 0:
			return fmt.Errorf("port mapping %s: port 0: want 1-65535: %w", p, ErrBadPort)
		case p.Protocol != TCP && p.Protocol != UDP:
			return fmt.Errorf("port mapping %s: protocol %q: want tcp or udp: %w", p, p.Protocol, ErrBadPort)
		case p.HostIP.IsValid() && (!p.HostIP.Is4() || p.HostIP.IsLoopback() || p.HostIP.IsUnspecified()):
			// A loopback destination cannot be forwarded to a container
			// without route_localnet, which would let containers reach the
			// host's loopback services.
			return fmt.Errorf("port mapping %s: host address: want a non-loopback IPv4 address of the host: %w", p, ErrBadPort)
		}
		for _, q := range ports[:k] {
			if p.Conflicts(q) {
				return fmt.Errorf("port mapping %s: host port %d/%s mapped twice (also %s): %w", p, p.HostPort, p.Protocol, q, ErrBadPort)
			}
		}
	}
	return nil
}

// PortRange is an inclusive range of host ports, the ports an agent
// reserves for port mappings.
type PortRange struct{ First, Last uint16 }

// DefaultPortRange is the host ports port mappings may use when the agent
// is given no range: Mesos's default ports resource, below Linux's
// ephemeral port range (32768-60999), so that the kernel does not hand
// them to the host's outgoing connections.
var DefaultPortRange = PortRange{First: 31000, Last: 32000}

// IsZero reports whether r is the zero PortRange (unset).
func (r PortRange) IsZero() bool { return r == PortRange{} }

// Contains reports whether port p is in r.
func (r PortRange) Contains(p uint16) bool { return p >= r.First && p <= r.Last }

// String is r in the syntax ParsePortRange reads: START-END.
func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// ParsePortRange parses START-END (1 <= START <= END <= 65535). Errors
// wrap ErrBadPort.
func ParsePortRange(s string) (PortRange, error) {
	first, last, ok := strings.Cut(s, "-")
	if !ok {
		return PortRange{}, fmt.Errorf("port range %q: want START-END, e.g. %s: %w", s, DefaultPortRange, ErrBadPort)
	}
	a, err := parsePortNumber(first)
	if err != nil {
		return PortRange{}, fmt.Errorf("port range %q: start: %v: %w", s, err, ErrBadPort)
	}
	b, err := parsePortNumber(last)
	if err != nil {
		return PortRange{}, fmt.Errorf("port range %q: end: %v: %w", s, err, ErrBadPort)
	}
	if a > b {
		return PortRange{}, fmt.Errorf("port range %q: start above end: %w", s, ErrBadPort)
	}
	return PortRange{First: a, Last: b}, nil
}
