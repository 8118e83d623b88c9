package main

import (
	"github.com/spf13/cobra"

	"github.com/brimnode/brim/internal/buildinfo"
)

// newRootCommand builds the command tree. Each feature adds its subcommands
// from its own file (agent.go, container.go, master.go, …) through the
// subcommands list, so that files can grow independently.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "brim",
		Short:         "brim runs Linux hosts to the brim: containers, oversubscription, DRF",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Get().String(),
	}
	root.SetVersionTemplate("brim {{.Version}}\n")
	for _, sub := range subcommands {
		root.AddCommand(sub())
	}
	return root
}

// subcommands holds the constructors of the top-level subcommands. It is
// appended to only from var initialisers in this package (no side effects
// at run time), keeping each subcommand in its own file.
var subcommands []func() *cobra.Command
