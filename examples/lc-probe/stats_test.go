package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(i + 1)
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 0.99, 0},
		{"one", []time.Duration{ms(7)}, 0.5, ms(7)},
		{"median of 100", hundred, 0.5, ms(50)},
		{"p99 of 100", hundred, 0.99, ms(99)},
		{"p999 of 100 is the max", hundred, 0.999, ms(100)},
		{"p100", hundred, 1, ms(100)},
	} {
		if got := percentile(tc.in, tc.q); got != tc.want {
			t.Errorf("%s: percentile(%v) = %v, want %v", tc.name, tc.q, got, tc.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	w := summarize(time.Unix(10, 0), []time.Duration{ms(4), ms(1), ms(3), ms(2)})
	want := windowStats{End: time.Unix(10, 0), Requests: 4, P50: ms(2), P99: ms(4), P999: ms(4), Max: ms(4), Mean: 2500 * time.Microsecond}
	if w != want {
		t.Fatalf("summarize = %+v, want %+v", w, want)
	}
	if got, want := w.csv(), "10000,4,2000,4000,4000,4000,2500\n"; got != want {
		t.Fatalf("csv = %q, want %q", got, want)
	}
	if w := summarize(time.Unix(1, 0), nil); w.Requests != 0 || w.P99 != 0 {
		t.Fatalf("empty window: %+v", w)
	}
}

func TestHistogramQuantileWithin2Percent(t *testing.T) {
	h := newHistogram()
	exact := make([]time.Duration, 0, 10000)
	for i := range 10000 {
		d := time.Duration(i*i/10+500) * time.Microsecond // skewed
		h.add(d)
		exact = append(exact, d)
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		want := percentile(exact, q) // exact is sorted
		got := h.quantile(q)
		if got < want || float64(got) > float64(want)*histGrowth {
			t.Errorf("quantile(%v) = %v, want within [%v, %v]", q, got, want, time.Duration(float64(want)*histGrowth))
		}
	}
	if newHistogram().quantile(0.5) != 0 {
		t.Error("empty histogram: quantile not 0")
	}
}

func TestParseFlags(t *testing.T) {
	var sb strings.Builder
	c, err := parseFlags([]string{"--dir", "/x", "--rate", "50"}, &sb)
	if err != nil {
		t.Fatal(err)
	}
	if c.out != "/x/lc-probe.csv" || c.summary != "/x/lc-probe.json" || c.rate != 50 {
		t.Fatalf("defaults: %+v", c)
	}
	for _, bad := range [][]string{{"--rate", "0"}, {"--window", "1ms"}, {"--work", "-1s"}, {"extra"}} {
		if _, err := parseFlags(bad, &sb); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}

// TestRun runs the probe briefly with every kind of work and checks its
// outputs: a CSV header and whole window lines, a summary consistent with
// them.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	c, err := parseFlags([]string{"--dir", dir, "--rate", "500", "--work", "50us", "--window", "100ms",
		"--touch-kib", "64", "--fsync-bytes", "512"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 450*time.Millisecond)
	defer cancel()
	var sb strings.Builder
	if err := run(ctx, c, &sb); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(c.out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if lines[0]+"\n" != csvHeader || len(lines) < 2 {
		t.Fatalf("windows file:\n%s", b)
	}
	if got := strings.Join(lines[1:], "\n") + "\n"; got != sb.String() {
		t.Fatalf("stdout %q differs from the file's windows %q", sb.String(), got)
	}
	for _, l := range lines[1:] {
		if n := len(strings.Split(l, ",")); n != 7 {
			t.Fatalf("window line %q: %d fields", l, n)
		}
	}
	var s summary
	b, err = os.ReadFile(filepath.Join(dir, "lc-probe.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Requests == 0 || s.Windows != len(lines)-1 || s.SpinsPerReq == 0 || s.P50Us > s.P99Us || s.P99Us > s.MaxUs || s.Interrupted {
		t.Fatalf("summary: %+v", s)
	}
}
