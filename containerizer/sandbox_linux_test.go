package containerizer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/brimnode/brim/executor"
	"github.com/brimnode/brim/internal/hostuser"
)

// A restart's sandbox and log are moved into the new container's
// directory, and back when the launch fails; without them a new sandbox
// is made.
func TestMakeSandboxDir(t *testing.T) {
	held, dir := t.TempDir(), t.TempDir()
	prevSandbox, prevLog := filepath.Join(held, "sandbox"), filepath.Join(held, "log")
	for _, d := range []string{prevSandbox, prevLog} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "kept"), []byte(d), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	me := hostuser.ID{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	sandbox := filepath.Join(dir, executor.SandboxDir)
	c := &Containerizer{}
	giveBack, err := c.makeSandboxDir(&container{dir: dir}, Spec{Sandbox: prevSandbox, LogDir: prevLog}, me)
	if err != nil {
		t.Fatalf("makeSandboxDir: %v", err)
	}
	for from, to := range map[string]string{prevSandbox: sandbox, prevLog: filepath.Join(dir, executor.LogDir)} {
		if b, err := os.ReadFile(filepath.Join(to, "kept")); err != nil || string(b) != from {
			t.Errorf("%s not moved to %s: %q, %v", from, to, b, err)
		}
	}
	if err := giveBack(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{prevSandbox, prevLog} {
		if _, err := os.Stat(filepath.Join(d, "kept")); err != nil {
			t.Errorf("not given back: %v", err)
		}
	}
	fresh := t.TempDir()
	if giveBack, err := c.makeSandboxDir(&container{dir: fresh}, Spec{}, me); err != nil || giveBack() != nil {
		t.Fatalf("new sandbox: %v", err)
	} else if fi, err := os.Stat(filepath.Join(fresh, executor.SandboxDir)); err != nil || !fi.IsDir() {
		t.Errorf("no sandbox made: %v", err)
	}
}
