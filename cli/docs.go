package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/brimnode/brim/internal/buildinfo"
)

// newDocsCommand is the hidden `brim docs man DIR`: the manual pages of
// every command, generated from the commands themselves (make package
// ships them in the .deb).
func newDocsCommand() *cobra.Command {
	docs := &cobra.Command{
		Use:    "docs",
		Short:  "Generate brim's documentation from its commands",
		Hidden: true,
		Args:   UsageArgs(cobra.NoArgs),
		RunE:   func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	docs.AddCommand(&cobra.Command{
		Use:   "man DIR",
		Short: "Write a manual page (section 1) per command into DIR: brim.1, brim-container-run.1, …",
		Args:  UsageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return ExitError{Code: 1, Msg: fmt.Sprintf("docs man: %v", err)}
			}
			in := buildinfo.Get()
			// The build's date, so that two builds of one commit ship the
			// same pages.
			date, err := time.Parse(time.RFC3339, in.BuildDate)
			if err != nil {
				date = time.Now()
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true
			err = doc.GenManTreeFromOpts(root, doc.GenManTreeOptions{
				Path: args[0], CommandSeparator: "-",
				Header: &doc.GenManHeader{Section: "1", Date: &date, Source: "brim " + in.Version, Manual: "brim manual"},
			})
			if err != nil {
				return ExitError{Code: 1, Msg: fmt.Sprintf("docs man %s: %v", args[0], err)}
			}
			return nil
		},
	})
	return docs
}
