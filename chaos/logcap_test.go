//go:build linux

package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestLogSizes: a container's log files are found in either layout
// (stdout/stderr in the sandbox, rotated NNNNNNNNNN.log files), and
// nothing else of its directory counts (the shim's own log, the bundle).
func TestLogSizes(t *testing.T) {
	a := &Agent{StateDir: t.TempDir()}
	dir := filepath.Join(a.StateDir, "containers", "c1")
	files := map[string]int{
		"sandbox/stdout": 10, "sandbox/stderr": 20, "log/0000000001.log": 300, "log/0000000002.log": 4000,
		"shim.log": 50000, "bundle.json": 600000, "sandbox/data": 7000000,
	}
	for name, n := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := a.LogSizes("c1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"sandbox/stdout": 10, "sandbox/stderr": 20, "log/0000000001.log": 300, "log/0000000002.log": 4000}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("LogSizes = %v, want %v", got, want)
	}
	if _, err := a.LogSizes("gone"); err == nil {
		t.Fatal("LogSizes of a container without a directory: no error")
	}
}
