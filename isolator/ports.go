package isolator

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ErrPortInUse is returned by an isolator's Prepare when a host port a
// container asks for is already mapped to another container.
var ErrPortInUse = errors.New("host port already mapped")

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
