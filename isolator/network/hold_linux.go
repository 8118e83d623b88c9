//go:build linux

package network

import (
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/isolator"
)

// A port mapping's DNAT rule takes its host port before any socket of
// the host sees the traffic, so a mapping over a port a host service
// listens on would silently steal that service's clients. Before its
// rules exist, the isolator binds every mapped host port itself, on the
// mapping's host address or on all of them, and keeps the socket until
// the mapping goes:
//
//   - the bind is the check: EADDRINUSE means a host process (or another
//     agent's mapping) has the port, and the launch is refused;
//   - the socket held is the reservation: a host process that starts
//     later fails to bind the port (EADDRINUSE) instead of listening on a
//     port whose outside traffic goes to a container, and there is no
//     window between a check and the DNAT rule for one to slip in;
//   - the socket has neither SO_REUSEADDR nor SO_REUSEPORT, so no
//     option of the other binder makes the kernel share the port (two
//     SO_REUSEADDR sockets may share a port while neither listens); a TCP
//     socket never listens (a connection to 127.0.0.1:PORT, which is not
//     translated, is refused rather than left unanswered in a backlog),
//     and a socket filter drops every datagram a UDP one would queue.
//
// The kernel also skips held ports when it picks a source port for an
// outgoing connection. The sockets go with the agent's process; a new
// agent holds the recorded containers' ports again (New), and reports
// those a host process took meanwhile (NotHeld): their DNAT rules still
// take the outside traffic.

// heldPorts are the sockets holding one container's mapped host ports.
type heldPorts []int

func (h heldPorts) close() {
	for _, fd := range h {
		_ = unix.Close(fd) // a socket that was only bound: nothing to flush
	}
}

// holdPorts binds every host port of ports in the isolator's host
// namespace. Errors wrap isolator.ErrPortInUse when one is taken; then
// none is held.
func (i *Isolator) holdPorts(ports []isolator.PortMapping) (heldPorts, error) {
	var h heldPorts
	err := runInNetNS(int(i.hostNS), func() error {
		for _, p := range ports {
			fd, err := bindPort(p)
			if err != nil {
				return err
			}
			h = append(h, fd)
		}
		return nil
	})
	if err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

// dropAll is a classic BPF program that accepts no packet.
var dropAll = []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}

// bindPort binds a socket of p's protocol to p's host address (all
// addresses without one) and port, in the calling thread's namespace.
func bindPort(p isolator.PortMapping) (int, error) {
	typ := unix.SOCK_STREAM
	if p.Protocol == isolator.UDP {
		typ = unix.SOCK_DGRAM
	}
	fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("hold host port %s: %w", p, err)
	}
	prog := unix.SockFprog{Len: uint16(len(dropAll)), Filter: &dropAll[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("hold host port %s: filter: %w", p, err)
	}
	addr := &unix.SockaddrInet4{Port: int(p.HostPort)}
	host := netip.IPv4Unspecified()
	if p.HostIP.IsValid() {
		addr.Addr, host = p.HostIP.As4(), p.HostIP
	}
	if err := unix.Bind(fd, addr); err != nil {
		_ = unix.Close(fd)
		at := netip.AddrPortFrom(host, p.HostPort)
		if errors.Is(err, unix.EADDRINUSE) {
			return -1, fmt.Errorf("host port %d/%s (%s): a process of the host holds it (bind %s/%s: %w; see ss -tulpn): %w",
				p.HostPort, p.Protocol, p, at, p.Protocol, err, isolator.ErrPortInUse)
		}
		return -1, fmt.Errorf("hold host port %s: bind %s/%s: %w", p, at, p.Protocol, err)
	}
	return fd, nil
}

// holdRecordedLocked holds the mapped ports of every recorded container
// (New, after an agent restart); a port a host process took while no
// agent held it is kept in i.notHeld. i.mu is held.
func (i *Isolator) holdRecordedLocked() {
	for id, r := range i.recs {
		if len(r.Limits.Ports) == 0 || i.held[id] != nil {
			continue
		}
		var h heldPorts
		for _, p := range r.Limits.Ports {
			one, err := i.holdPorts([]isolator.PortMapping{p})
			if err != nil {
				i.notHeld = append(i.notHeld, fmt.Errorf("container %s: %w", id, err))
				continue
			}
			h = append(h, one...)
		}
		i.held[id] = h
	}
}

// releasePortsLocked closes the sockets holding container id's host
// ports. i.mu is held.
func (i *Isolator) releasePortsLocked(id string) {
	i.held[id].close()
	delete(i.held, id)
}

// NotHeld returns the recorded port mappings whose host port New could
// not hold again: a process of the host bound it while no agent held it.
// Their rules still forward the outside traffic to the container; the
// process gets what is sent to it on loopback. The agent logs them.
func (i *Isolator) NotHeld() []error {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]error(nil), i.notHeld...)
}
