package experiment

import (
	"strings"
	"testing"

	"github.com/brimnode/brim/executor"
)

// TestSandboxDirIsTheShims: the gate the antagonists wait on is made in
// the sandbox where the shim mounts it; experiment keeps its own copy of
// the path so that it links no shim code.
func TestSandboxDirIsTheShims(t *testing.T) {
	if sandboxDir != executor.SandboxMountPoint {
		t.Fatalf("sandboxDir %q, the shim mounts the sandbox at %q", sandboxDir, executor.SandboxMountPoint)
	}
	if want := "g=" + executor.SandboxMountPoint + "/" + gateFIFO + ";"; !strings.Contains(gateScript, want) {
		t.Fatalf("gate script %q does not make its FIFO at %s", gateScript, want)
	}
}
