package timespec

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var ref = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// The seed's example: demand 1234 is allocated after 1200 finishes and
// should finish within 20 minutes of its allocation.
func TestSeedExample(t *testing.T) {
	d, err := Parse([]byte(`{
		"DemandID": 1234,
		"OrderBy": 1200,
		"Duration": {"Time": [null, "+20m"], "Strategy": "loose"}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.DemandID != "1234" || d.Start != nil || d.Deadline != nil {
		t.Fatalf("got %+v", d)
	}
	if !d.OrderBy.Satisfied(func(id string) bool { return id == "1200" }) || d.OrderBy.Satisfied(func(string) bool { return false }) {
		t.Error("OrderBy does not wait for 1200 alone")
	}
	iv := d.Duration.Time.(*Interval)
	if _, to, _ := iv.Bounds(ref); !to.Equal(ref.Add(20 * time.Minute)) {
		t.Errorf("duration bound = %v, want ref+20m", to)
	}
	if d.Duration.Strategy != Loose {
		t.Error("strategy not loose")
	}
}

func TestHolds(t *testing.T) {
	for _, tc := range []struct {
		name string
		time string
		at   time.Duration // after ref
		opp  int
		want bool
	}{
		{"open", `[]`, 1000 * time.Hour, 99, true},
		{"nulls", `[null, null]`, -time.Hour, 0, true},
		{"now+5m inside", `["NOW", "+5m"]`, 5 * time.Minute, 0, true},
		{"now+5m after", `["NOW", "+5m"]`, 5*time.Minute + time.Second, 0, false},
		{"now+5m before", `["NOW", "+5m"]`, -time.Second, 0, false},
		{"from only", `["2026-11-25 11:00:00", null]`, 2 * time.Hour, 0, true},
		{"from only early", `["26-11-25 11:00:00", null]`, 30 * time.Minute, 0, false},
		{"until only", `[null, "2026-11-25T10:30:00Z"]`, 31 * time.Minute, 0, false},
		{"rfc3339 zone", `["2026-11-25T11:00:00+01:00", "+1s"]`, 0, 0, true},
		{"delay ok", `["NOW", "^3"]`, time.Hour, 3, true},
		{"delay spent", `["NOW", "^3"]`, time.Second, 4, false},
		{"or delay", `{"OR": [["NOW", "+5m"], ["NOW", "^3"]]}`, time.Hour, 2, true},
		{"or neither", `{"OR": [["NOW", "+5m"], ["NOW", "^3"]]}`, time.Hour, 4, false},
		{"and both", `{"AND": [["NOW", "+1h"], [null, "^1"]]}`, time.Minute, 1, true},
		{"and one", `{"AND": [["NOW", "+1h"], [null, "^1"]]}`, time.Minute, 2, false},
		{"not", `{"NOT": ["2026-11-25 10:10:00", "+10m"]}`, 15 * time.Minute, 0, false},
		{"not outside", `{"NOT": ["2026-11-25 10:10:00", "+10m"]}`, 25 * time.Minute, 0, true},
		{"compound relative", `["NOW", "+1h30m"]`, 90 * time.Minute, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse([]byte(`{"DemandID": "d", "Start": {"Time": ` + tc.time + `, "Strategy": "strict"}}`))
			if err != nil {
				t.Fatal(err)
			}
			if d.Start.Strategy != Strict {
				t.Error("strategy not strict")
			}
			if got := d.Start.Time.Holds(ref.Add(tc.at), ref, tc.opp); got != tc.want {
				t.Errorf("Holds(ref%+v, %d) = %v, want %v", tc.at, tc.opp, got, tc.want)
			}
		})
	}
}

func TestOrderBy(t *testing.T) {
	done := map[string]bool{"a": true, "b": true}
	fin := func(id string) bool { return done[id] }
	for in, want := range map[string]bool{
		`"a"`:                           true,
		`"c"`:                           false,
		`["a", "b"]`:                    true,
		`["a", "c"]`:                    false,
		`{"OR": ["c", "b"]}`:            true,
		`{"AND": ["a", {"OR": ["c"]}]}`: false,
	} {
		d, err := Parse([]byte(`{"DemandID": "x", "OrderBy": ` + in + `}`))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := d.OrderBy.Satisfied(fin); got != want {
			t.Errorf("%s: Satisfied = %v, want %v", in, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"DemandID": "a", "Start": {"Time": ["NOW", "+5x"]}}`, `Start.Time[1]: "+5x"`},
		{`{"DemandID": "a", "Start": {"Time": ["+5m", null]}}`, `Start.Time[0]: "+5m": a relative time is only an end`},
		{`{"DemandID": "a", "Start": {"Time": ["^3", null]}}`, `Start.Time[0]: "^3"`},
		{`{"DemandID": "a", "Start": {"Time": [null, "NOW"]}}`, `Start.Time[1]: "NOW"`},
		{`{"DemandID": "a", "Start": {"Time": ["2026-11-25 12:00:00", "2026-11-25 11:00:00"]}}`, `Start.Time: ["2026-11-25 12:00:00", "2026-11-25 11:00:00"]: T2 is before T1`},
		{`{"DemandID": "a", "Start": {"Time": ["tomorrow", null]}}`, `Start.Time[0]: "tomorrow"`},
		{`{"DemandID": "a", "Start": {"Time": ["NOW"]}}`, `Start.Time: ["NOW"]: an interval has two ends`},
		{`{"DemandID": "a", "Start": {"Time": ["NOW", "+1m", "+2m"]}}`, `Start.Time`},
		{`{"DemandID": "a", "Start": {"Time": ["NOW", "+1m"], "Strategy": "maybe"}}`, `Start.Strategy: "maybe"`},
		{`{"DemandID": "a", "Start": {"Time": {"XOR": []}}}`, `Start.Time: "XOR": unknown operator`},
		{`{"DemandID": "a", "Start": {"Time": {"OR": []}}}`, `Start.Time.OR: []`},
		{`{"DemandID": "a", "Start": {"Time": {"AND": [["NOW", "+1q"]]}}}`, `Start.Time.AND[0][1]: "+1q"`},
		{`{"DemandID": "a", "Start": {"Time": {"AND": [], "OR": []}}}`, `exactly one of AND, OR, NOT`},
		{`{"DemandID": "a", "Start": {"Time": 5}}`, `Start.Time: 5`},
		{`{"DemandID": "a", "Start": {}}`, `Start.Time: missing`},
		{`{"DemandID": "a", "Start": {"Tim": []}}`, `Start: {"Tim": []}: json: unknown field "Tim"`},
		{`{"DemandID": "a", "Begin": {}}`, `unknown field "Begin"`},
		{`{"Start": {"Time": []}}`, `DemandID: missing`},
		{`{"DemandID": "a b"}`, `DemandID: "a b"`},
		{`{"DemandID": "a", "OrderBy": "a"}`, `OrderBy: "a": a demand cannot wait for itself`},
		{`{"DemandID": "a", "OrderBy": {"NOT": "b"}}`, `OrderBy: NOT is not allowed`},
		{`{"DemandID": "a", "OrderBy": []}`, `OrderBy: []`},
		{`{"DemandID": "a", "OrderBy": ["b", "../c"]}`, `OrderBy[1]: "../c"`},
		{`{"DemandID": "a", "Start": {"Time": ["NOW", "^9999999"]}}`, `Start.Time[1]: "^9999999"`},
		{`{"DemandID": "a"} {}`, `trailing data`},
		{`{"DemandID": "a"`, `unexpected EOF`},
		{`{"DemandID": "a", "Start": {"Time": ["NOW", "+0s"]}}`, `Start.Time[1]: "+0s": want a positive duration`},
		{`{"DemandID": "a", "Start": {"Time": ` + strings.Repeat(`{"NOT": `, 20) + `[]` + strings.Repeat(`}`, 20) + `}}`, `nested deeper than`},
	} {
		_, err := Parse([]byte(tc.in))
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", tc.in, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n  err  %q\n  want %q", tc.in, err, tc.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	in := `{"DemandID": "w-1", "OrderBy": {"OR": ["a", ["b", "c"]]},
		"Start": {"Time": {"OR": [["NOW", "+5m"], ["NOW", "^3"]]}, "Strategy": "strict"},
		"Duration": {"Time": [null, "+1h30m"]},
		"Deadline": {"Time": {"NOT": ["26-11-25 10:00:00", "2026-11-26T00:00:00+02:00"]}}}`
	d, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := Parse(b)
	if err != nil {
		t.Fatalf("canonical form does not parse: %v\n%s", err, b)
	}
	b2, _ := d2.MarshalJSON()
	if string(b) != string(b2) {
		t.Errorf("not canonical:\n%s\n%s", b, b2)
	}
	for _, s := range []string{`"+5400s"`, `"^3"`, `"2026-11-25T22:00:00Z"`, `"Strategy":"loose"`} {
		if !strings.Contains(string(b), s) {
			t.Errorf("canonical form lacks %s:\n%s", s, b)
		}
	}
}

// TestAbsoluteZones: an absolute time without a zone is UTC; one followed
// by an offset or a time zone name is that zone's; a zone that is neither
// is refused, naming the text.
func TestAbsoluteZones(t *testing.T) {
	utc10 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"2026-11-26 10:00:00", utc10},
		{"26-11-26 10:00:00", utc10},
		{"2026-11-26 11:00:00 +01:00", utc10},
		{"2026-11-26 11:00:00 +0100", utc10},
		{"2026-11-26 10:00:00 Z", utc10},
		{"2026-11-26 05:00:00 -05:00", utc10},
		{"26-11-26 11:00:00 +01:00", utc10},
		{"2026-11-26 11:00:00 Europe/Paris", utc10}, // CET in November
		{"2026-11-26 10:00:00 UTC", utc10},
		{"2026-11-26T11:00:00+01:00", utc10},
	} {
		d, err := Parse([]byte(`{"DemandID": "z", "Start": {"Time": ["` + tc.in + `", null]}}`))
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		from, _, _ := d.Start.Time.(*Interval).Bounds(ref)
		if !from.Equal(tc.want) {
			t.Errorf("%q = %s, want %s", tc.in, from, tc.want)
		}
	}
	for _, in := range []string{"2026-11-26 10:00:00 Mars/Olympus", "2026-11-26 10:00:00 +25:00", "2026-11-26 10:00:00 +01:00 x", "2026-11-26 10:00"} {
		_, err := Parse([]byte(`{"DemandID": "z", "Start": {"Time": ["` + in + `", null]}}`))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), in) {
			t.Errorf("%q: %v, want ErrInvalid naming it", in, err)
		}
	}
}
