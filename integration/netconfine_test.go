package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/brimnode/brim/internal/testutil"
)

// TestNetworkConfinementCLI drives network confinement through brim agent
// and the CLI with real containers: a container cannot reach a host
// listener (except on --network-allow-host) nor, with --network-isolate,
// another container; a port mapping (-p) reaches its container from the
// host, is refused when taken or malformed, shows in inspect and ls
// --json, survives a kill -9 and restart of the agent, and goes with the
// container; after uninstall no nftables table is left.
//
// The host listeners are on the bridge's address, not 0.0.0.0 (this test
// runs in the machine's own namespace, shared with other work): to a
// container that is the same, the rule matches what comes in on the
// bridge whatever its destination. isolator/network.TestHostConfinement
// uses a 0.0.0.0 listener in a namespace of its own.
func TestNetworkConfinementCLI(t *testing.T) {
	testutil.RequireRoot(t)
	// Registered first, so run last: after the uninstall.
	var table string
	t.Cleanup(func() {
		if _, ok := nftRules(t, table); ok {
			t.Errorf("nftables table %s left after uninstall", table)
		}
	})
	cfg := newTestNetwork(t, "brc")
	table = "brim-" + cfg.Bridge
	gw := cfg.Subnet.Addr().Next()
	allowed := uint16(freePort(t))
	mapped := freeMapPort(t)
	a := startAgent(t, append(agentArgs(cfg), "--network-isolate", "--network-allow-host", strconv.Itoa(int(allowed)))...)
	// The socket accepts before the agent has set up: wait for an answer.
	a.list()
	if rules, ok := nftRules(t, table); !ok || rules["input"] != 4 || rules["forward"] != 2 {
		t.Fatalf("table %s: %v (exists %v), want 4 input rules (one allowed port) and 2 forward rules", table, rules, ok)
	}
	denied := pongServer(t, netip.AddrPortFrom(gw, 0))
	pongServer(t, netip.AddrPortFrom(gw, allowed))

	pub := fmt.Sprintf("%s:%d:8080", gw, mapped)
	srv := a.run("--network", "-p", pub, "--cpus", "0.1", "--mem", "32", "--",
		"sh", "-c", `echo "$BRIM_CONTAINER_IP" > /mnt/sandbox/ip; exec busybox nc -ll -p 8080 -e echo pong`)
	var srvAddr string
	eventually(t, "server writes its address", func() bool {
		v := a.inspectPorts(srv)
		srvAddr = v.Address
		return srvAddr != ""
	})
	client := func(what, script string) {
		t.Helper()
		r := a.brim("container", "run", "--wait", "--network", "--cpus", "0.1", "--mem", "32", "--", "sh", "-c", script)
		if r.code != 0 {
			t.Errorf("%s: exit %d: %s", what, r.code, r.stderr)
		}
	}
	client("container → host on an allowed port", fmt.Sprintf("echo x | busybox nc -w 5 %s %d | grep -q pong", gw, allowed))
	client("container → host on another port is refused",
		fmt.Sprintf("out=$(echo x | busybox nc -w 5 %s %d 2>&1); echo \"$out\"; ! echo \"$out\" | grep -q pong", gw, denied))
	// The server listens (the host reaches it below), yet another
	// container does not get through.
	client("container → container with --network-isolate",
		fmt.Sprintf("! echo x | busybox nc -w 2 %s 8080 | grep -q pong", srvAddr))

	hostPort := netip.AddrPortFrom(gw, mapped)
	eventually(t, "host reaches the server through "+pub, func() bool { return askPong(hostPort) == nil })

	v := a.inspectPorts(srv)
	want := portJSON{HostIP: gw.String(), HostPort: uint32(mapped), ContainerPort: 8080, Protocol: "tcp"}
	if len(v.Ports) != 1 || v.Ports[0] != want {
		t.Errorf("inspect ports = %+v, want [%+v]", v.Ports, want)
	}
	var ls []containerPorts
	if err := json.Unmarshal([]byte(a.mustBrim("container", "ls", "--json")), &ls); err != nil {
		t.Fatal(err)
	}
	for _, c := range ls {
		if c.ID == srv && (len(c.Ports) != 1 || c.Ports[0] != want) {
			t.Errorf("ls --json ports = %+v, want [%+v]", c.Ports, want)
		}
	}

	n := len(a.list())
	for _, bad := range []struct {
		p    []string
		code int
		msg  string
	}{
		{[]string{fmt.Sprintf("%d:9000", mapped)}, 1, "mapped to container " + srv},
		{[]string{"0:80"}, 2, `host port: 0 is out of range 1-65535`},
		{[]string{"70000:80"}, 2, "70000 is out of range 1-65535"},
		{[]string{"18081:80", "18081:81"}, 2, "mapped twice"},
		{[]string{"18081:80/sctp"}, 2, `protocol "sctp"`},
	} {
		args := []string{"container", "run", "--network"}
		for _, p := range bad.p {
			args = append(args, "-p", p)
		}
		r := a.brim(append(args, "--", "true")...)
		if r.code != bad.code || !strings.Contains(r.stderr, bad.msg) {
			t.Errorf("run -p %v: exit %d: %s; want exit %d saying %q", bad.p, r.code, r.stderr, bad.code, bad.msg)
		}
	}
	if got := len(a.list()); got != n {
		t.Errorf("%d containers after refused launches, want %d", got, n)
	}
	if r := a.brim("container", "run", "-p", "18082:80", "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "need --network") {
		t.Errorf("-p without --network: exit %d: %s", r.code, r.stderr)
	}

	a.kill9()
	a.start()
	if err := askPong(hostPort); err != nil {
		t.Errorf("host → %s after a kill -9 and restart of the agent: %v", pub, err)
	}
	if rules, _ := nftRules(t, table); rules["prerouting"] != 1 || rules["output"] != 1 {
		t.Errorf("nat rules after the restart: %v, want the one mapping", rules)
	}

	// A container's mappings go when it exits, not only at rm.
	short := fmt.Sprintf("%s:%d:9000", gw, freeMapPort(t))
	a.mustBrim("container", "run", "--wait", "--network", "-p", short, "--cpus", "0.1", "--mem", "32", "--", "true")
	if r := a.brim("container", "run", "--wait", "--network", "-p", short, "--cpus", "0.1", "--mem", "32", "--", "true"); r.code != 0 {
		t.Errorf("-p %s again after the first container exited: exit %d: %s", short, r.code, r.stderr)
	}

	a.mustBrim("container", "rm", "-f", srv)
	if rules, _ := nftRules(t, table); rules["prerouting"] != 0 || rules["output"] != 0 {
		t.Errorf("nat rules after rm: %v, want none", rules)
	}
	if err := askPong(hostPort); err == nil {
		t.Errorf("host → %s still answers after rm", pub)
	}
}

type portJSON struct {
	HostIP        string `json:"hostIP"`
	HostPort      uint32 `json:"hostPort"`
	ContainerPort uint32 `json:"containerPort"`
	Protocol      string `json:"protocol"`
}

type containerPorts struct {
	ID      string     `json:"id"`
	Address string     `json:"address"`
	Ports   []portJSON `json:"ports"`
}

func (a *agentProc) inspectPorts(id string) containerPorts {
	a.t.Helper()
	var c containerPorts
	if err := json.Unmarshal([]byte(a.mustBrim("container", "inspect", id)), &c); err != nil {
		a.t.Fatal(err)
	}
	return c
}

// pongServer answers "pong" to every connection on at (port 0: any) until
// the test ends, and returns its port.
func pongServer(t *testing.T, at netip.AddrPort) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp4", at.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("pong\n"))
			c.Close()
		}
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// askPong connects to addr, sends a line and expects "pong".
func askPong(addr netip.AddrPort) error {
	c, err := net.DialTimeout("tcp4", addr.String(), 3*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "pong\n" {
		return fmt.Errorf("got %q", line)
	}
	return nil
}

// nftRules returns the number of rules per chain of the ip table named
// table in this namespace, and whether the table exists.
func nftRules(t *testing.T, table string) (map[string]int, bool) {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	out, found := map[string]int{}, false
	for _, ch := range chains {
		if ch.Table.Name != table {
			continue
		}
		found = true
		rules, err := c.GetRules(ch.Table, ch)
		if err != nil {
			t.Fatal(err)
		}
		out[ch.Name] = len(rules)
	}
	return out, found
}
