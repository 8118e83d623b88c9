package registry

import (
	"slices"
	"testing"
)

func TestRegistry(t *testing.T) {
	r := New[func() int]("test")
	r.Register("b", func() int { return 2 })
	r.Register("a", func() int { return 1 })
	if got := r.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Names = %v", got)
	}
	if f, ok := r.Lookup("b"); !ok || f() != 2 {
		t.Fatalf("Lookup(b) = %v", ok)
	}
	if _, ok := r.Lookup("c"); ok {
		t.Fatal("Lookup(c) found something")
	}
	for _, name := range []string{"", "plugin:/bin/x", "a"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			r.Register(name, func() int { return 0 })
		}()
	}
}
