package agent

import (
	"syscall"
	"testing"
)

func TestRaiseFileLimit(t *testing.T) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	got, err := RaiseFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	if got != l.Max {
		t.Errorf("RaiseFileLimit = %d, want the hard limit %d", got, l.Max)
	}
}
