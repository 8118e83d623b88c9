//go:build linux

package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLeftoversSeeAProcess: the teardown leak check finds a process that
// names an agent's directory (as a shim does) and nothing else.
func TestLeftoversSeeAProcess(t *testing.T) {
	a := &Agent{Base: t.TempDir(), Parent: "/brim-chaos-none"}
	if left := a.Leftovers(); len(left) != 0 {
		t.Fatalf("leftovers before anything ran: %v", left)
	}
	cmd := exec.Command("sh", "-c", "sleep 60", filepath.Join(a.Base, "containers", "x", "shim"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	left := a.Leftovers()
	if len(left) != 1 || !strings.Contains(left[0], fmt.Sprintf("process %d ", cmd.Process.Pid)) {
		t.Fatalf("leftovers %v, want process %d", left, cmd.Process.Pid)
	}
}

// TestNetworkLeftoversSeeRecords: the network leak check reports a netns
// file and an address record left by a container that is gone.
func TestNetworkLeftoversSeeRecords(t *testing.T) {
	dir := t.TempDir()
	n := newNetwork("/brim-chaos-none", 0, dir, filepath.Join(dir, "state"))
	if len(n.Bridge) > 12 {
		t.Fatalf("bridge name %q: over 12 bytes", n.Bridge)
	}
	if left := n.Leftovers(); len(left) != 0 {
		t.Fatalf("leftovers before anything ran: %v", left)
	}
	for _, f := range []string{filepath.Join(n.NetNSDir, "c1"), filepath.Join(n.StateDir, "c1.json")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if left := n.Leftovers(); !slices.Equal(left, []string{"netns file c1", "address record c1.json"}) {
		t.Fatalf("leftovers %v, want the netns file and the record of c1", left)
	}
}
