package cgtree

import (
	"errors"
	"testing"
)

func TestRemoveRefusesWhatBrimDidNotName(t *testing.T) {
	for _, p := range []string{"", "/", "relative/brim-x", "/system.slice", "/brim-x/..", "/brim-parent/user.slice"} {
		if err := Remove(p); !errors.Is(err, ErrRefused) {
			t.Errorf("Remove(%q) = %v, want ErrRefused", p, err)
		}
	}
}

func TestRemoveMissingParentIsNoError(t *testing.T) {
	if err := Remove("/brim-cgtree-test-never-made"); err != nil {
		t.Fatalf("Remove of a parent that does not exist: %v", err)
	}
	if r := Roots("/brim-cgtree-test-never-made"); len(r) != 0 {
		t.Fatalf("Roots = %v, want none", r)
	}
}
