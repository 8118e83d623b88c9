//go:build linux

package chaos

import (
	"fmt"
	"os/exec"
	"path/filepath"
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
