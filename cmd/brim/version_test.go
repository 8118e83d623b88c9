package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/brimnode/brim/internal/buildinfo"
)

func TestVersionCommands(t *testing.T) {
	run := func(args ...string) string {
		t.Helper()
		root := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("brim %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}
	want := buildinfo.Get()
	if got := run("--version"); got != "brim "+want.String()+"\n" {
		t.Errorf("--version = %q", got)
	}
	var in buildinfo.Info
	if err := json.Unmarshal([]byte(run("version", "--json")), &in); err != nil {
		t.Fatal(err)
	}
	if in != want {
		t.Errorf("version --json = %+v, want %+v", in, want)
	}
	if got := run("version"); !strings.Contains(got, want.Commit) {
		t.Errorf("version = %q lacks commit %s", got, want.Commit)
	}
}
