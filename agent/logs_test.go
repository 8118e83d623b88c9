package agent

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOpenLogRefusesPlantedFiles: the task owns its sandbox and may swap
// stdout for a symlink to a host file or a FIFO; the agent (root) must
// neither serve the host file nor block.
func TestOpenLogRefusesPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "stdout")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "stderr"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"stdout", "stderr"} {
		if f, err := openLog(filepath.Join(dir, name)); err == nil {
			f.Close()
			t.Errorf("openLog(%s planted by the task) succeeded", name)
		}
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("out"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := openLog(plain)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
