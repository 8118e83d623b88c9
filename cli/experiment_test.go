package cli

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
	var ee ExitError
	if !errors.As(err, &ee) || ee.Code != 2 || !strings.Contains(ee.Msg, "brim-experiment") {
		t.Fatalf("brim experiment without its binary: %v", err)
	}
}
