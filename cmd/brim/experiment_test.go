package main

import (
	"errors"
	"strings"
	"testing"
)

// Without brim-experiment beside brim or on $PATH, brim experiment says
// where it looked for it (exit 2), instead of failing obscurely.
func TestExperimentNeedsItsBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	cmd := newExperimentCommand()
	cmd.SetArgs([]string{"run", "spec.toml", "--out", "x"})
	err := cmd.Execute()
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(ee.msg, "brim-experiment") {
		t.Fatalf("brim experiment without its binary: %v", err)
	}
}
