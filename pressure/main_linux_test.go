package pressure

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// shimBinary is the brim binary the real-container tests start as the
// shim: $BRIM_BINARY (set by the Makefile and the v2 lane) or one built
// here (as root only: the tests that need it are privileged).
var shimBinary string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		shimBinary = os.Getenv("BRIM_BINARY")
		if os.Geteuid() == 0 && shimBinary == "" {
			tmp, err := os.MkdirTemp("", "brim-pressure-test")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(tmp)
			shimBinary = filepath.Join(tmp, "brim")
			cmd := exec.Command("go", "build", "-tags", "seccomp", "-o", shimBinary, "./cmd/brim")
			cmd.Dir = ".."
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintf(os.Stderr, "build brim for the shim: %v\n", err)
				return 1
			}
		}
		return m.Run()
	}())
}
