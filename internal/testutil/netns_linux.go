package testutil

import (
	"os/exec"
	"testing"
)

// NewNetNS creates a named network namespace (`ip netns add`) with a unique
// name starting with "brim-test" and deletes it on cleanup. It returns the
// name; its path is /run/netns/<name>.
func NewNetNS(t testing.TB) string {
	t.Helper()
	RequireRoot(t)
	name := UniqueName("brim-test")
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete %s: %v: %s", name, err, out)
		}
	})
	return name
}
