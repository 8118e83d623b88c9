package demandplan

import (
	"testing"

	"github.com/brimnode/brim/resources"
)

// TestShortfall: a hold is topped up by what each scalar lacks, never by
// whole tasks on top of a partial hold (which overshot one scalar and
// left stray capacity held after the hand-over).
func TestShortfall(t *testing.T) {
	per := resources.MustParse("cpus:2;mem:1024")
	held := resources.MustParse("cpus:3;mem:1024")
	if u := unitsIn(held, per); u != 1 {
		t.Fatalf("unitsIn = %d, want 1", u)
	}
	got := shortfall(per, 2, held)
	if want := resources.MustParse("cpus:1;mem:1024"); !got.Equal(want) {
		t.Fatalf("shortfall = %s, want %s", got, want)
	}
	if got := shortfall(per, 1, held); !got.IsEmpty() {
		t.Fatalf("shortfall of a held task = %s, want nothing", got)
	}
}
