package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/brimnode/brim/internal/buildinfo"
)

// version is the build's version string, reported by agents to the master.
var version = buildinfo.Get().Version

var _ = registerSubcommand(func() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print brim's version, commit and build date",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := buildinfo.Get()
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(in)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "brim %s\n", in)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
})

// registerSubcommand adds a top-level subcommand constructor; used as
// `var _ = registerSubcommand(newXCommand)` in each subcommand's file.
func registerSubcommand(f func() *cobra.Command) bool {
	subcommands = append(subcommands, f)
	return true
}
