package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brimnode/brim/chaos"
	"github.com/brimnode/brim/internal/cgtree"
)

// TestAgentCleanup (issue 30): `brim agent cleanup --config FILE` tears
// down a node whose agent will not come back. A real agent with --network
// runs 4 containers with port mappings (TCP and UDP) and net_bw, each
// with a child process; while it runs, cleanup refuses (exit 1, naming
// its PID) and touches nothing, and so it does (exit 2) given a cgroup
// parent other than the agent's. After a kill -9 of the agent, containers,
// shims, cgroups, netns mounts, veths, address records, HTB classes, the
// nftables table (DNAT rules), IFBs and bridge are all there (the chaos
// harness's leak probes see them); cleanup, reading the agent's settings
// from the configuration file alone, removes every one of them and says
// so, the state dir can be removed (`rm -rf` failed with "Device or
// resource busy" on the netns mounts), and a second cleanup has nothing
// to do (exit 0). Before, there was no such command, and the agent's
// shutdown keeps all of it on purpose.
func TestAgentCleanup(t *testing.T) {
	cfg := newTestNetwork(t, "brx")
	a := startAgent(t, append(agentArgs(cfg), "--resources", "cpus:2;mem:2048;net_bw:100")...)
	var ids []string
	for range 4 {
		p := freeMapPort(t)
		ids = append(ids, a.run("--network", "--net-bw", "10", "-p", fmt.Sprintf("%d:80", p), "-p", fmt.Sprintf("%d:53/udp", p),
			"--cpus", "0.05", "--mem", "16", "--", "sh", "-c", "sleep 1000 & exec sleep 1000"))
	}
	// The agent's settings, as a package's /etc/brim/agent.toml holds them.
	conf := writeTemp(t, t.TempDir(), "agent.toml", fmt.Sprintf(`state-dir = %q
socket = %q
cgroup-parent = %q
resources = "cpus:2;mem:2048;net_bw:100"
network = true
network-bridge = %q
network-subnet = %q
network-netns-dir = %q
`, a.StateDir, a.Socket, a.Parent, cfg.Bridge, cfg.Subnet, cfg.NetNSDir))
	cleanup := func() result { return runBrim(t, "agent", "cleanup", "--config", conf) }
	probe := &chaos.Agent{Base: filepath.Dir(a.StateDir), StateDir: a.StateDir, Parent: a.Parent,
		Net: &chaos.Network{Bridge: cfg.Bridge, Subnet: cfg.Subnet, NetNSDir: cfg.NetNSDir, StateDir: filepath.Join(a.StateDir, "network")}}

	r := cleanup()
	if want := fmt.Sprintf("an agent (pid %d) holds state dir %s", a.cmd.Process.Pid, a.StateDir); r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("cleanup beside a running agent: exit %d: %s%s; want exit 1 saying %q", r.code, r.stdout, r.stderr, want)
	}
	for _, c := range a.list() {
		if c.State != "running" {
			t.Errorf("container %s is %s after a refused cleanup", c.ID, c.State)
		}
	}

	a.kill9()
	// A wrong parent (a typo) must not kill the host's services.
	if r := runBrim(t, "agent", "cleanup", "--config", conf, "--cgroup-parent", "/system.slice"); r.code != 2 ||
		!strings.Contains(r.stderr, "the agent of state dir "+a.StateDir+" used "+a.Parent) || r.stdout != "" {
		t.Errorf("cleanup with another cgroup parent: exit %d: %s%s; want exit 2 naming the agent's", r.code, r.stdout, r.stderr)
	}
	before := strings.Join(append(probe.Leftovers(), probe.Net.Remains()...), "\n")
	for _, want := range []string{"process ", "netns file " + ids[0], "address record " + ids[3] + ".json", "class 1:", "link " + cfg.Bridge, "nftables table ip brim-" + cfg.Bridge} {
		if !strings.Contains(before, want) {
			t.Fatalf("after the kill -9 the probes do not see %q (they must, or the check below means nothing):\n%s", want, before)
		}
	}
	r = cleanup()
	if r.code != 0 {
		t.Fatalf("cleanup: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"killed ", "removed cgroup " + a.Parent + " ", "removed nftables table ip brim-" + cfg.Bridge,
		"removed veth ", "removed netns " + filepath.Join(cfg.NetNSDir, ids[1]), "removed address record ",
		"removed ifb " + cfg.Bridge + "-tx with 4 container classes", "removed bridge " + cfg.Bridge,
		"removed container " + ids[2], "removed checkpoint of container " + ids[3], "removed socket " + a.Socket} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("cleanup's output lacks %q:\n%s", want, r.stdout)
		}
	}
	if left := append(probe.Leftovers(), probe.Net.Remains()...); len(left) > 0 {
		t.Errorf("left after cleanup:\n%s", strings.Join(left, "\n"))
	}
	if roots := cgtree.Roots(a.Parent); len(roots) > 0 {
		t.Errorf("cgroup parent left: %v", roots)
	}
	for _, p := range []string{"containers", "runc", "checkpoint", "network"} {
		if _, err := os.Stat(filepath.Join(a.StateDir, p)); !os.IsNotExist(err) {
			t.Errorf("state %s: %v, want it gone", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(a.StateDir, "agent-id")); err != nil {
		t.Errorf("the agent's ID went with the cleanup: %v", err)
	}

	r = cleanup()
	if r.code != 0 || !strings.Contains(r.stdout, "nothing to clean up") || strings.Contains(r.stdout, "removed") {
		t.Errorf("second cleanup: exit %d: %s%s; want exit 0 with nothing to clean up", r.code, r.stdout, r.stderr)
	}
	// docs/operators.md's last step of a decommission.
	if err := os.RemoveAll(filepath.Dir(a.StateDir)); err != nil {
		t.Errorf("rm -rf of the agent's directory after cleanup: %v", err)
	}
}
