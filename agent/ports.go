package agent

import (
	"fmt"

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
