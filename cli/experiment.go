package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// experimentBinary is the program `brim experiment` runs: a binary of its
// own (cmd/brim-experiment), so that the agent's does not carry the
// plotting library.
const experimentBinary = "brim-experiment"

// newExperimentCommand is `brim experiment run|report …`: it executes
// brim-experiment (beside this binary, else on $PATH) with the same
// arguments, and this binary as the agents' brim.
func newExperimentCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "experiment run SPEC --out DIR | report DIR",
		Short: "Run colocation experiments (LC beside revocable antagonists) and plot them (docs/experiments.md)",
		Long: `Run colocation experiments and plot them (docs/experiments.md). This runs
the brim-experiment binary (installed beside brim by make build and the
.deb); see brim experiment run --help.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			bin := filepath.Join(filepath.Dir(self), experimentBinary)
			if _, err := os.Stat(bin); err != nil {
				if bin, err = exec.LookPath(experimentBinary); err != nil {
					return ExitError{Code: 2, Msg: fmt.Sprintf("brim experiment needs %s beside %s or on $PATH (make build writes bin/%s; the .deb installs /usr/bin/%s)",
						experimentBinary, self, experimentBinary, experimentBinary)}
				}
			}
			env := os.Environ()
			if os.Getenv("BRIM_BINARY") == "" {
				env = append(env, "BRIM_BINARY="+self)
			}
			return syscall.Exec(bin, append([]string{experimentBinary}, args...), env)
		},
	}
}
