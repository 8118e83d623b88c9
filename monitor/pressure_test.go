package monitor

import (
	"testing"
	"time"
)

func TestParsePressure(t *testing.T) {
	p, err := parsePressure("some avg10=34.21 avg60=36.69 avg300=38.35 total=280109479\nfull avg10=1.50 avg60=0.00 avg300=0.00 total=12\n")
	if err != nil {
		t.Fatal(err)
	}
	if p.SomeAvg10 != 34.21 || p.SomeAvg300 != 38.35 || p.SomeTotal != 280109479*time.Microsecond || p.FullAvg10 != 1.5 || p.FullTotal != 12*time.Microsecond {
		t.Fatalf("parsed %+v", p)
	}
	for _, bad := range []string{"", "some avg10=x avg60=0 avg300=0 total=1", "none avg10=0", "some avg10=1 avg60=1 avg300=1"} {
		if _, err := parsePressure(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
