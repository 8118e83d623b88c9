package timespec

import (
	"testing"
	"time"
)

func TestWindows(t *testing.T) {
	at := func(m int) time.Time { return ref.Add(time.Duration(m) * time.Minute) }
	for _, tc := range []struct {
		name, time string
		want       []Window
	}{
		{"open", `[]`, []Window{{}}},
		{"now+5m", `["NOW", "+5m"]`, []Window{{at(0), at(5)}}},
		{"from", `["2026-11-25 10:30:00", null]`, []Window{{From: at(30)}}},
		{"until", `[null, "2026-11-25 10:30:00"]`, []Window{{To: at(30)}}},
		{"delay is no time bound", `["NOW", "^3"]`, []Window{{From: at(0)}}},
		{"or", `{"OR": [["NOW", "+5m"], ["2026-11-25 10:20:00", "+10m"]]}`, []Window{{at(0), at(5)}, {at(20), at(30)}}},
		{"or overlapping", `{"OR": [["NOW", "+15m"], ["2026-11-25 10:10:00", "+10m"]]}`, []Window{{at(0), at(20)}}},
		{"and", `{"AND": [["NOW", "+15m"], ["2026-11-25 10:10:00", "+10m"]]}`, []Window{{at(10), at(15)}}},
		{"and disjoint", `{"AND": [["NOW", "+5m"], ["2026-11-25 10:10:00", "+10m"]]}`, nil},
		{"not", `{"NOT": ["2026-11-25 10:10:00", "+10m"]}`, []Window{{To: at(10).Add(-time.Nanosecond)}, {From: at(20).Add(time.Nanosecond)}}},
		{"and not", `{"AND": [["NOW", "+30m"], {"NOT": ["2026-11-25 10:10:00", "+10m"]}]}`, []Window{{at(0), at(10).Add(-time.Nanosecond)}, {at(20).Add(time.Nanosecond), at(30)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse([]byte(`{"DemandID": "d", "Start": {"Time": ` + tc.time + `}}`))
			if err != nil {
				t.Fatal(err)
			}
			got := Windows(d.Start.Time, ref)
			if len(got) != len(tc.want) {
				t.Fatalf("Windows = %v, want %v", got, tc.want)
			}
			for i := range got {
				if !got[i].From.Equal(tc.want[i].From) || !got[i].To.Equal(tc.want[i].To) {
					t.Errorf("window %d = %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}
