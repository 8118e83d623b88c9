package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSysfsShowsOwnNetwork (issue 30): whatever the mode — host root
// alone, --network, --userns, --userns --network — a container's
// /sys/class/net lists only its own interfaces (lo, and eth0 with
// --network), never the host's: its NICs, the bridge, the IFBs, other
// containers' veths. Before, --userns --network bound the host's /sys (the
// kernel refuses the container's root a new sysfs in a network namespace
// of the host's user namespace) and showed all of them.
func TestSysfsShowsOwnNetwork(t *testing.T) {
	cfg := newTestNetwork(t, "brs")
	a := startAgent(t, append(agentArgs(cfg), "--userns-range", "3000000000:65536")...)
	// The user namespace's root must reach the container directories.
	if err := os.Chmod(filepath.Dir(a.StateDir), 0o711); err != nil {
		t.Fatal(err)
	}
	// Another container on the bridge: its veth is one more host
	// interface a leaking /sys would show.
	a.run("--network", "--cpus", "0.05", "--mem", "16", "--", "sleep", "1000")
	hostEnts, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	var host []string
	for _, e := range hostEnts {
		host = append(host, e.Name())
	}
	for _, n := range []string{cfg.Bridge, cfg.Bridge + "-tx"} {
		if !slices.Contains(host, n) {
			t.Fatalf("host's /sys/class/net %v lacks %s", host, n)
		}
	}
	for _, m := range []struct {
		name  string
		flags []string
		want  []string
	}{
		{"host root", nil, []string{"lo"}},
		{"--network", []string{"--network"}, []string{"eth0", "lo"}},
		{"--userns", []string{"--userns", "--user", "root"}, []string{"lo"}},
		{"--userns --network", []string{"--userns", "--user", "root", "--network"}, []string{"eth0", "lo"}},
	} {
		args := append(append([]string{}, m.flags...), "--cpus", "0.05", "--mem", "16", "--", "sh", "-c", `echo $(ls /sys/class/net); echo done`)
		id := a.run(args...)
		var out string
		eventually(t, m.name+": the container's output", func() bool {
			out = a.brim("container", "logs", id).stdout
			return strings.Contains(out, "done")
		})
		got := strings.Fields(strings.TrimSuffix(strings.TrimSpace(out), "done"))
		slices.Sort(got)
		if !slices.Equal(got, m.want) {
			t.Errorf("%s: /sys/class/net lists %v, want %v (the host's: %v)", m.name, got, m.want, host)
		}
	}
}
