package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/brimnode/brim/executor"
)

// The per-container shim, started detached by the containerizer (never by
// hand): `brim shim --bundle DIR [--handshake]`, or `brim shim --handshake
// [--recycle] [--prepare]` for a warm shim that reads its directory from
// fd 4.
var _ = registerSubcommand(func() *cobra.Command {
	var (
		dir       string
		handshake bool
		recycle   bool
		prepare   bool
	)
	cmd := &cobra.Command{
		Use:    "shim",
		Short:  "Run and supervise one container (started by the agent)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" && !handshake {
				return errors.New("shim: --bundle is required without --handshake")
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "shim")
			if (recycle || prepare) && (dir != "" || !handshake) {
				return errors.New("shim: --recycle and --prepare are for a warm shim (--handshake without --bundle)")
			}
			opts := executor.RunOptions{Dir: dir, Log: log, Recycle: recycle, Prepare: prepare}
			if handshake {
				opts.Report = os.NewFile(executor.ReportFD, "report")
				opts.GoAhead = os.NewFile(executor.GoFD, "go-ahead")
			}
			// The container outlives signals to the shim: only the
			// container's exit ends it.
			return executor.Run(context.WithoutCancel(cmd.Context()), opts)
		},
	}
	cmd.Flags().StringVar(&dir, "bundle", "", "container directory holding "+executor.BundleFile+" (empty: read from fd 4)")
	cmd.Flags().BoolVar(&handshake, "handshake", false, "report on fd 3 and wait for the go-ahead on fd 4")
	cmd.Flags().BoolVar(&recycle, "recycle", false, "after the container ends, report \"free\" on fd 3 and wait for another (a warm shim only)")
	cmd.Flags().BoolVar(&prepare, "prepare", false, "make the next container's network, IPC and UTS namespaces and its /dev, /tmp and /sys mounts while waiting for it (a warm shim only)")
	return cmd
})
