package containerizer

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// TestUserNSWithNetwork: a task in a user namespace joins the network
// isolator's netns (made by the host's root, not the task's namespace) and
// has its address; its /sys (the netns's own sysfs, mounted by the shim:
// the kernel refuses the task's root a new sysfs for a netns of another
// user namespace) is read-only and lists only lo and eth0.
func TestUserNSWithNetwork(t *testing.T) {
	e := newNetEnv(t)
	// t.TempDir's two levels, made 0700.
	for _, d := range []string{filepath.Dir(e.stateDir), filepath.Dir(filepath.Dir(e.stateDir))} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	c := e.start()
	r := testRange
	info, err := c.Launch(context.Background(), Spec{ID: testutil.UniqueName("ct"), UserNS: &r,
		Command: []string{"sh", "-c", `ip -4 -o addr show; echo uid $(id -u); awk '$2=="/sys"{split($4,o,","); print "sys", o[1]}' /proc/self/mounts; echo net $(ls /sys/class/net); echo done; exec sleep 1000`},
		Limits:  isolator.Limits{MilliCPUs: 100, Network: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Kill(context.Background(), info.ID, -1) }()
	out := waitOutput(t, info, "done\n")
	if info.Address == "" || !strings.Contains(out, info.Address+"/") || !strings.Contains(out, "uid 0\n") || !strings.Contains(out, "sys ro\n") || !strings.Contains(out, "net eth0 lo\n") {
		t.Errorf("address %q, output:\n%s", info.Address, out)
	}
}
