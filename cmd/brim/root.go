package main

import (
	"github.com/spf13/cobra"

	"github.com/brimnode/brim/cli"
	"github.com/brimnode/brim/internal/buildinfo"
)

// newRootCommand builds the command tree: the processes brim runs as
// (agent, master, dev, shim: each adds itself from its own file through
// the subcommands list) and the client commands of package cli.
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
	root.AddCommand(cli.Commands()...)
	return root
}

// subcommands holds the constructors of the top-level subcommands. It is
// appended to only from var initialisers in this package (no side effects
// at run time), keeping each subcommand in its own file.
var subcommands []func() *cobra.Command
