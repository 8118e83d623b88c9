package timespec

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// FuzzParse: Parse never panics, every error wraps ErrInvalid, and what
// parses has a canonical form that parses back to the same form.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"DemandID": 1234, "OrderBy": 1200, "Duration": {"Time": [null, "+20m"], "Strategy": "loose"}}`,
		`{"DemandID": "a", "Start": {"Time": {"OR": [["NOW", "+5m"], ["NOW", "^3"]]}, "Strategy": "strict"}}`,
		`{"DemandID": "a", "Deadline": {"Time": {"NOT": ["26-11-25 10:00:00", null]}}, "OrderBy": ["b", {"OR": ["c"]}]}`,
		`{"DemandID": "a", "Start": {"Time": ["2026-11-25T11:00:00+01:00", "2026-11-25 12:00:00"]}}`,
		`[]`, `null`, `{}`, `{"DemandID": "a", "Start": {"Time": {"AND": [[]]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		for _, c := range []*Condition{d.Start, d.Duration, d.Deadline} {
			if c == nil {
				continue
			}
			ws := Windows(c.Time, time.Unix(1_800_000_000, 0))
			for i, w := range ws {
				if !w.From.IsZero() && !w.To.IsZero() && w.To.Before(w.From) {
					t.Fatalf("window %d ends before it starts: %v", i, w)
				}
				if i > 0 && (ws[i-1].To.IsZero() || !ws[i-1].To.Before(w.From)) {
					t.Fatalf("windows not sorted and disjoint: %v", ws)
				}
			}
		}
		b, err := d.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		d2, err := Parse(b)
		if err != nil {
			t.Fatalf("canonical form %s does not parse: %v", b, err)
		}
		b2, err := d2.MarshalJSON()
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("canonical form not stable:\n%s\n%s", b, b2)
		}
	})
}
