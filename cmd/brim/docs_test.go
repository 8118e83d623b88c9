package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// brim docs man writes a page per command brim shows (hidden ones, such
// as the shim, have none), each with its summary.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	root := newRootCommand()
	root.SetArgs([]string{"docs", "man", dir})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	want := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.IsAvailableCommand() && c != root || c.IsAdditionalHelpTopicCommand() {
			return
		}
		want++
		page := filepath.Join(dir, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		b, err := os.ReadFile(page)
		if err != nil {
			t.Errorf("%s: %v", c.CommandPath(), err)
			return
		}
		// roff escapes dashes; compare a dash-free word of the summary
		if first := strings.Fields(c.Short)[0]; !strings.Contains(string(b), first) || !strings.Contains(string(b), ".TH") {
			t.Errorf("%s: the page lacks its summary %q", page, c.Short)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	pages, _ := filepath.Glob(filepath.Join(dir, "*.1"))
	if len(pages) != want || want < 40 {
		t.Errorf("%d pages for %d commands", len(pages), want)
	}
	for _, p := range []string{"brim-container-stop.1", "brim-container-top.1", "brim-agent.1"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "brim-shim.1")); err == nil {
		t.Error("a page for the hidden shim")
	}
}
