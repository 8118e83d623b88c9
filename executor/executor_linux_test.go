package executor

import (
	"errors"
	"testing"
)

func TestIsCommandNotFound(t *testing.T) {
	for msg, want := range map[string]bool{
		`unable to start container process: exec: "nope": executable file not found in $PATH`:      true,
		`unable to start container process: exec: "/nope": stat /nope: no such file or directory`:  true,
		`unable to start container process: error during container init: mount: permission denied`: false,
	} {
		if got := isCommandNotFound(errors.New(msg)); got != want {
			t.Errorf("isCommandNotFound(%q) = %v", msg, got)
		}
	}
}
