package integration

import (
	"testing"

	"github.com/brimnode/brim/internal/testutil"
)

// TestDevNetwork: brim dev's agent is assembled like brim agent's, so it
// takes --network (its own assembly had no network isolator) and
// --sandbox-retention (it had a fixed retention): a container run with
// --network on its socket gets an address on the subnet given.
func TestDevNetwork(t *testing.T) {
	testutil.RequireRoot(t)
	cfg := newTestNetwork(t, "brd")
	d := startDevProc(t, append(agentArgs(cfg), "--listen", testutil.FreeAddr(t), "--sandbox-retention", "5")...)
	r := d.brim("container", "run", "--wait", "--network", "--cpus", "0.1", "--mem", "32", "--", "sh", "-c",
		`ip=$BRIM_CONTAINER_IP; [ -n "$ip" ] && grep -q eth0 /proc/net/dev && echo "$ip" > /mnt/sandbox/ip`)
	if r.code != 0 {
		t.Fatalf("container with --network under brim dev: exit %d: %s", r.code, r.stderr)
	}
}
