package agent

import (
	"fmt"
	"net/netip"

	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/isolator"
)

// checkPorts validates a launch's port mappings; the agent refuses host
// ports outside its range (checkPortRange), the network isolator those
// mapped to another container or held by a host process
// (isolator.ErrPortInUse). Errors wrap ErrInvalidArgument.
func (s Spec) checkPorts() error {
	if len(s.Ports) == 0 {
		return nil
	}
	if !s.Network {
		return fmt.Errorf("%w: port mappings need --network", ErrInvalidArgument)
	}
	if err := isolator.CheckPorts(s.Ports); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return nil
}

// checkPortRange refuses a mapping of a host port outside r, the range
// the agent reserves for port mappings. Errors wrap ErrInvalidArgument
// and isolator.ErrBadPort.
func checkPortRange(ports []isolator.PortMapping, r isolator.PortRange) error {
	for _, p := range ports {
		if !r.Contains(p.HostPort) {
			return fmt.Errorf("%w: port mapping %s: host port %d is outside the agent's port range %s (--network-port-range): %w",
				ErrInvalidArgument, p, p.HostPort, r, isolator.ErrBadPort)
		}
	}
	return nil
}

// portsFromProto converts the wire form of port mappings; errors (a port
// above 65535, a host address that does not parse) wrap ErrInvalidArgument
// and isolator.ErrBadPort. The rest is checked at launch.
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
				return nil, fmt.Errorf("%w: port mapping: host address %q: %w", ErrInvalidArgument, ip, isolator.ErrBadPort)
			}
			m.HostIP = a
		}
		for _, n := range []uint32{p.GetHostPort(), p.GetContainerPort()} {
			if n > 65535 {
				return nil, fmt.Errorf("%w: port mapping: port %d is out of range 1-65535: %w", ErrInvalidArgument, n, isolator.ErrBadPort)
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
