package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

var version = "dev" // set with -ldflags "-X main.version=…"

var _ = registerSubcommand(func() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print brim's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gov := ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				gov = bi.GoVersion
			}
			fmt.Fprintf(cmd.OutOrStdout(), "brim %s (%s)\n", version, gov)
			return nil
		},
	}
})

// registerSubcommand adds a top-level subcommand constructor; used as
// `var _ = registerSubcommand(newXCommand)` in each subcommand's file.
func registerSubcommand(f func() *cobra.Command) bool {
	subcommands = append(subcommands, f)
	return true
}
