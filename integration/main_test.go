package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// brimBinary is the brim binary under test.
var brimBinary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	brimBinary = os.Getenv("BRIM_BINARY")
	if brimBinary == "" && os.Geteuid() == 0 {
		dir, err := os.MkdirTemp("", "brim-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		brimBinary = filepath.Join(dir, "brim")
		// brim-experiment beside brim: `brim experiment` runs it.
		for pkg, out := range map[string]string{"../cmd/brim": brimBinary, "../cmd/brim-experiment": brimBinary + "-experiment"} {
			build := exec.Command("go", "build", "-tags", "seccomp", "-o", out, pkg)
			build.Stdout, build.Stderr = os.Stderr, os.Stderr
			if err := build.Run(); err != nil {
				fmt.Fprintln(os.Stderr, "build", pkg+":", err)
				return 1
			}
		}
	}
	return m.Run()
}
