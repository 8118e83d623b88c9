package chaos

import (
	"slices"
	"testing"
	"time"
)

// TestOverdueOnlyOpen: once one run has used up the wait, runs that
// already exited are not reported as still running. (A select between an
// exited run and an expired timer picked either at random: seed 5005's
// "brim run did not exit after FINISHED" was such a run.)
func TestOverdueOnlyOpen(t *testing.T) {
	hung := make(chan struct{})
	dones := []<-chan struct{}{hung}
	for range 64 {
		c := make(chan struct{})
		close(c)
		dones = append(dones, c)
	}
	late := make(chan struct{})
	dones = append(dones, late)
	got := overdue(dones, time.Now().Add(20*time.Millisecond))
	if want := []int{0, len(dones) - 1}; !slices.Equal(got, want) {
		t.Fatalf("overdue = %v, want %v (only the runs that never exited)", got, want)
	}
}
