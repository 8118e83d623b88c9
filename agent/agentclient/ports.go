package agentclient

import (
	"github.com/brimnode/brim/agent/agentpb"
	"github.com/brimnode/brim/isolator"
)

// PortView is a port mapping in View: host port → container port.
type PortView struct {
	HostIP        string `json:"hostIP,omitempty"`
	HostPort      uint32 `json:"hostPort"`
	ContainerPort uint32 `json:"containerPort"`
	Protocol      string `json:"protocol"`
}

func portViews(ps []*agentpb.PortMapping) []PortView {
	var out []PortView
	for _, p := range ps {
		out = append(out, PortView{HostIP: p.HostIp, HostPort: p.HostPort, ContainerPort: p.ContainerPort, Protocol: p.Protocol})
	}
	return out
}

// ParsePorts parses `container run -p` values,
// [HOSTIP:]HOSTPORT:CONTAINERPORT[/tcp|/udp] each, into their wire form.
// Errors wrap isolator.ErrBadPort and name the value (a port 0 or above
// 65535, a duplicate host port, an unknown protocol).
func ParsePorts(specs []string) ([]*agentpb.PortMapping, error) {
	var ms []isolator.PortMapping
	for _, s := range specs {
		p, err := isolator.ParsePort(s)
		if err != nil {
			return nil, err
		}
		ms = append(ms, p)
	}
	if err := isolator.CheckPorts(ms); err != nil {
		return nil, err
	}
	var out []*agentpb.PortMapping
	for _, p := range ms {
		w := &agentpb.PortMapping{HostPort: uint32(p.HostPort), ContainerPort: uint32(p.ContainerPort), Protocol: p.Protocol}
		if p.HostIP.IsValid() {
			w.HostIp = p.HostIP.String()
		}
		out = append(out, w)
	}
	return out, nil
}
