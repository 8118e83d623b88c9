package containerizer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/containerlog"
)

// A working directory missing from the read-only root is refused before
// anything is created, naming it; one below a writable mount is made at
// start. Before, the start failed with runc's "mkdir /missing:
// read-only file system".
func TestCheckWorkDir(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "srv", "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cwd  string
		want string // "" for ok
	}{
		{"", ""}, {"/", ""}, {"/srv/app", ""}, {"/tmp/new/dir", ""}, {"/mnt/sandbox/work", ""}, {"/tmp", ""},
		{"/missing", "/missing: no such file or directory in the container's root filesystem, which is read-only"},
		{"/file", "/file: not a directory in the container's root filesystem"},
		{"/tmpx", "/tmpx: no such file or directory"},
	} {
		err := checkWorkDir(root, c.cwd)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("checkWorkDir(%q) = %v, want nil", c.cwd, err)
		case c.want != "" && (!errors.Is(err, ErrNoWorkDir) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("checkWorkDir(%q) = %v, want ErrNoWorkDir saying %q", c.cwd, err, c.want)
		}
	}
}

// TestSandboxPrefixReserved: no container ID starts as warm sandboxes'
// names do, so that an operator (and brim agent cleanup, Recover, the
// tests) can tell the agent's warm sandboxes from containers by name.
func TestSandboxPrefixReserved(t *testing.T) {
	spec := Spec{ID: SandboxPrefix + "0123", Command: []string{"true"}, LogMaxSize: containerlog.DefaultMaxSize, LogMaxFiles: containerlog.DefaultMaxFiles}
	if err := validateSpec(&spec); err == nil || !strings.Contains(err.Error(), SandboxPrefix) {
		t.Errorf("validateSpec(%q) = %v, want an error naming the reserved prefix", spec.ID, err)
	}
	spec.ID = "warm"
	if err := validateSpec(&spec); err != nil {
		t.Errorf("validateSpec(%q) = %v, want nil", spec.ID, err)
	}
}
