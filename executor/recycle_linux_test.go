package executor

import (
	"log/slog"
	"os"
	"testing"
	"time"
)

// TestRecyclerBounds: a shim takes at most maxRecycleUses containers,
// none once maxRecycleAge has passed since its first one's launch, and
// none after a container that left a file descriptor open (against the
// count after its first container); off, it takes none after the first.
func TestRecyclerBounds(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	if newRecycler(false).again() {
		t.Error("a shim without Recycle takes another container")
	}
	r := newRecycler(true)
	n := 0
	for r.again() {
		n++
		if n > maxRecycleUses {
			break
		}
	}
	if n != maxRecycleUses-1 {
		t.Errorf("again() true %d times, want %d (then the last container)", n, maxRecycleUses-1)
	}

	r = newRecycler(true)
	r.again()
	if !r.reset(log) {
		t.Fatal("reset after the first container: false")
	}
	r.again()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	if r.reset(log) {
		t.Error("reset with a file descriptor more than after the first container: true")
	}
	f.Close()
	if !r.reset(log) {
		t.Error("reset once the descriptor is closed: false")
	}
	r.first = time.Now().Add(-maxRecycleAge)
	if r.reset(log) {
		t.Errorf("reset %v after the first launch: true", maxRecycleAge)
	}
}

// TestUnescapeMountinfo: mountinfo's octal escapes are undone.
func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:           "/a/b",
		`/a\040b`:        "/a b",
		`/tab\011x\134y`: "/tab\tx\\y",
		`/end\04`:        `/end\04`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}
