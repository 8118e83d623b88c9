package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/brimnode/brim/executor"
	"github.com/spf13/cobra"
)

// The per-container shim, started detached by the containerizer (never by
// hand): `brim shim --bundle DIR [--handshake]`.
var _ = registerSubcommand(func() *cobra.Command {
	var (
		dir       string
		handshake bool
	)
	cmd := &cobra.Command{
		Use:    "shim",
		Short:  "Run and supervise one container (started by the agent)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "shim")
			opts := executor.RunOptions{Dir: dir, Log: log}
			if handshake {
				opts.Report = os.NewFile(executor.ReportFD, "report")
				opts.GoAhead = os.NewFile(executor.GoFD, "go-ahead")
			}
			// The container outlives signals to the shim: only the
			// container's exit ends it.
			return executor.Run(context.WithoutCancel(cmd.Context()), opts)
		},
	}
	cmd.Flags().StringVar(&dir, "bundle", "", "container directory holding "+executor.BundleFile)
	cmd.Flags().BoolVar(&handshake, "handshake", false, "report on fd 3 and wait for the go-ahead on fd 4")
	_ = cmd.MarkFlagRequired("bundle")
	return cmd
})
