package cgroups

import (
	"errors"
	"testing"

	"github.com/brimnode/brim/internal/testutil"
)

// A second holder of a parent is refused until the first lets go.
func TestLockParent(t *testing.T) {
	testutil.RequireRoot(t)
	parent := testutil.NewCgroupParent(t)
	a, err := New(Config{Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.LockParent()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.LockParent(); !errors.Is(err, ErrParentInUse) {
		t.Fatalf("second lock: %v, want ErrParentInUse", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := b.LockParent()
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.Close()
}
