// Command brim-experiment runs colocation experiments and plots them
// (package experiment, docs/experiments.md). `brim experiment ARGS` runs
// it: it is a binary of its own so that the agent's binary does not carry
// the plotting library and its fonts (about 8 MB).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/brimnode/brim/experiment"
	"github.com/brimnode/brim/internal/buildinfo"
)

// exitError ends the command with a status and a message.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{
		Use:           "brim-experiment",
		Short:         "Run colocation experiments (LC beside revocable antagonists) and plot them (docs/experiments.md)",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Get().String(),
	}
	root.AddCommand(runCommand(), reportCommand())
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "brim experiment:", err)
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

func runCommand() *cobra.Command {
	var out, brim, work string
	cmd := &cobra.Command{
		Use:   "run SPEC --out DIR",
		Short: "Run every trial of every controller of SPEC (TOML), then write the tables and plots to DIR",
		Long: `Run an experiment spec (TOML, docs/experiments.md): for each trial, each
controller (in order on odd trials, reversed on even ones) gets a fresh
agent; the antagonists are launched held, the LC and its load generator
start, and after the LC's first window come the solo, contended (the
antagonists released) and after phases. Every window, correction and node
cpu sample is recorded under DIR/runs/; the summary table is printed and
DIR gets windows.csv, runs.tsv, summary.tsv, p99.png and a plot per run.

Needs root (containers, cgroups). Exit status 2 for a bad spec (the key
is named) or a DIR that is not empty; 1 when a run fails (what it made is
removed; the runs before it stay in DIR); 130 when interrupted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := experiment.LoadSpecFile(args[0])
			if err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			if out == "" {
				return exitError{code: 2, msg: "--out DIR is required (results are kept there)"}
			}
			if brim, err = brimBinary(brim); err != nil {
				return exitError{code: 2, msg: err.Error()}
			}
			if os.Geteuid() != 0 {
				return exitError{code: 2, msg: "run needs root (it starts agents, containers and cgroups)"}
			}
			r := &experiment.Runner{Spec: spec, Out: out, Brim: brim, Work: work,
				Log:      slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)),
				Progress: cmd.ErrOrStderr()}
			if err := r.Run(cmd.Context()); err != nil {
				if errors.Is(err, experiment.ErrResultsExist) {
					return exitError{code: 2, msg: "--out: " + err.Error()}
				}
				if cmd.Context().Err() != nil {
					return exitError{code: 130, msg: "interrupted; the runs finished before stay in " + out}
				}
				return err
			}
			if _, err := experiment.Report(out, cmd.OutOrStdout()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "results in %s (summary.tsv, windows.csv, p99.png, runs/*/plot.png)\n", filepath.Clean(out))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "results directory (must be new or empty)")
	cmd.Flags().StringVar(&brim, "brim", "", "brim binary the agents run (default: $BRIM_BINARY, else brim next to this binary, else on $PATH)")
	cmd.Flags().StringVar(&work, "work", "/var/tmp", "where each run's agent keeps its temporary state (not /tmp: containers see their own)")
	return cmd
}

func reportCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "report DIR",
		Short: "Recompute the tables and plots of a finished experiment from its recorded runs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := experiment.Report(args[0], cmd.OutOrStdout())
			return err
		},
	}
}

// brimBinary is --brim, else $BRIM_BINARY, else brim beside this binary,
// else brim on $PATH.
func brimBinary(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if b := os.Getenv("BRIM_BINARY"); b != "" {
		return b, nil
	}
	if self, err := os.Executable(); err == nil {
		if b := filepath.Join(filepath.Dir(self), "brim"); isExecutable(b) {
			return b, nil
		}
	}
	if b, err := exec.LookPath("brim"); err == nil {
		return b, nil
	}
	return "", errors.New("no brim binary: give --brim PATH")
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
