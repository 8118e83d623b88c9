package agentserver

import (
	"fmt"
	"net/netip"

	"github.com/brimnode/brim/agent"
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/isolator"
)

// portsFromProto converts the wire form of port mappings; errors (a port
// above 65535, a host address that does not parse) wrap
// agent.ErrInvalidArgument and isolator.ErrBadPort. The rest is checked
// at launch.
func portsFromProto(ps []*agentpb.PortMapping) ([]isolator.PortMapping, error) {
	var out []isolator.PortMapping
	for _, p := range ps {
		m := isolator.PortMapping{Protocol: p.GetProtocol()}
		if m.Protocol == "" {
			m.Protocol = isolator.TCP
		}
		if ip := p.GetHostIp(); ip != "" {
			a, err := netip.ParseAddr(ip)
			if err != nil {
				return nil, fmt.Errorf("%w: port mapping: host address %q: %w", agent.ErrInvalidArgument, ip, isolator.ErrBadPort)
			}
			m.HostIP = a
		}
		for _, n := range []uint32{p.GetHostPort(), p.GetContainerPort()} {
			if n > 65535 {
				return nil, fmt.Errorf("%w: port mapping: port %d is out of range 1-65535: %w", agent.ErrInvalidArgument, n, isolator.ErrBadPort)
			}
		}
		m.HostPort, m.ContainerPort = uint16(p.GetHostPort()), uint16(p.GetContainerPort())
		out = append(out, m)
	}
	return out, nil
}

// PortsToProto converts port mappings to their wire form.
func PortsToProto(ps []isolator.PortMapping) []*agentpb.PortMapping {
	var out []*agentpb.PortMapping
	for _, p := range ps {
		w := &agentpb.PortMapping{HostPort: uint32(p.HostPort), ContainerPort: uint32(p.ContainerPort), Protocol: p.Protocol}
		if p.HostIP.IsValid() {
			w.HostIp = p.HostIP.String()
		}
		out = append(out, w)
	}
	return out
}
