package integration

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/brimnode/brim/isolator"
)

// freeMapPort returns a host port in the agent's default range for port
// mappings (isolator.DefaultPortRange) that nothing of the host holds
// now, TCP and UDP.
func freeMapPort(t *testing.T) uint16 {
	t.Helper()
	r := isolator.DefaultPortRange
	for range 100 {
		p := r.First + uint16(rand.IntN(int(r.Last-r.First)+1))
		l, err := net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", p))
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp4", fmt.Sprintf("0.0.0.0:%d", p))
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		return p
	}
	t.Fatalf("no free port in %s", r)
	return 0
}

// TestPortMappingHostPorts (issue 30): a port mapping of a host port a
// host service listens on is refused (exit 1, naming the port and the
// host process), on all addresses and on the service's own, and the
// service keeps its clients; so is a host port outside the agent's
// --network-port-range (naming the flag). A mapped port is held by the
// agent: a host service started later cannot listen on it until the
// container is gone. Before, `-p PORT:8080` over a listening service
// succeeded and the host's own connections to the port reached the
// container.
func TestPortMappingHostPorts(t *testing.T) {
	cfg := newTestNetwork(t, "brp")
	a := startAgent(t, agentArgs(cfg)...)
	n := len(a.list()) // answered: the bridge has its address
	// Listeners on the bridge's address, not 0.0.0.0: this test runs in
	// the machine's own namespace (TestNetworkConfinementCLI says why).
	gw := cfg.Subnet.Addr().Next()
	busy := freeMapPort(t)
	pongServer(t, netip.AddrPortFrom(gw, busy))
	server := []string{"--cpus", "0.05", "--mem", "16", "--", "busybox", "nc", "-ll", "-p", "8080", "-e", "echo", "container"}
	for _, bad := range []struct{ p, msg string }{
		{fmt.Sprintf("%d:8080", busy), fmt.Sprintf("host port %d/tcp (%d:8080/tcp): a process of the host holds it", busy, busy)},
		{fmt.Sprintf("%s:%d:8080", gw, busy), "a process of the host holds it"},
		{"8080:8080", "host port 8080 is outside the agent's port range 31000-32000 (--network-port-range)"},
		{"32001:53/udp", "outside the agent's port range"},
	} {
		r := a.brim(append([]string{"container", "run", "--network", "-p", bad.p}, server...)...)
		if r.code != 1 || !strings.Contains(r.stderr, bad.msg) {
			t.Errorf("run -p %s: exit %d: %s; want exit 1 saying %q", bad.p, r.code, r.stderr, bad.msg)
		}
	}
	if got := len(a.list()); got != n {
		t.Errorf("%d containers after refused launches, want %d", got, n)
	}
	if err := askPong(netip.AddrPortFrom(gw, busy)); err != nil {
		t.Errorf("the host service on %d lost its clients: %v", busy, err)
	}

	// The same port on UDP is free; a free TCP port maps and is held.
	free := freeMapPort(t)
	id := a.run(append([]string{"--network", "-p", fmt.Sprintf("%d:8080/udp", busy), "-p", fmt.Sprintf("%d:8080", free)}, server...)...)
	for _, at := range []string{fmt.Sprintf("%s:%d", gw, free), fmt.Sprintf("0.0.0.0:%d", free)} {
		if l, err := net.Listen("tcp4", at); err == nil {
			l.Close()
			t.Errorf("a host service listened on %s, mapped to container %s", at, id)
		}
	}
	if pc, err := net.ListenPacket("udp4", fmt.Sprintf("0.0.0.0:%d", busy)); err == nil {
		pc.Close()
		t.Errorf("a host service bound udp 0.0.0.0:%d, mapped to container %s", busy, id)
	}
	a.mustBrim("container", "rm", "-f", id)
	l, err := net.Listen("tcp4", fmt.Sprintf("%s:%d", gw, free))
	if err != nil {
		t.Errorf("host port %d after the container's removal: %v", free, err)
	} else {
		l.Close()
	}
}
