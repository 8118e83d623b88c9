package bpf

import (
	"math"
	"testing"
	"time"
)

func TestHistogramQuantile(t *testing.T) {
	var one Histogram
	one[10] = 100 // all waits in [1024, 2048) ns
	var two Histogram
	two[4] = 90  // [16, 32) ns
	two[20] = 10 // [~1 ms, ~2 ms)
	tests := []struct {
		name   string
		h      Histogram
		q      float64
		lo, hi time.Duration
	}{
		{"empty", Histogram{}, 0.5, 0, 0},
		{"single bucket median", one, 0.5, 1024, 2048},
		{"single bucket max", one, 1, 2047, 2048},
		{"single bucket min", one, 0, 1024, 1024},
		{"p50 in low bucket", two, 0.5, 16, 32},
		{"p90 at boundary", two, 0.9, 16, 32},
		{"p99 in high bucket", two, 0.99, 1 << 20, 1 << 21},
		{"q above 1 clamps", two, 7, 1<<21 - 1, 1 << 21},
		{"q below 0 clamps", two, -1, 16, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.h.Quantile(tt.q)
			if got < tt.lo || got > tt.hi {
				t.Errorf("Quantile(%v) = %v, want in [%v, %v]", tt.q, got, tt.lo, tt.hi)
			}
		})
	}
}

func TestHistogramQuantileMonotonic(t *testing.T) {
	var h Histogram
	for i := range h {
		h[i] = uint64(i%5 + 1)
	}
	prev := time.Duration(0)
	for q := 0.0; q <= 1; q += 0.01 {
		got := h.Quantile(q)
		if got < prev {
			t.Fatalf("Quantile(%v) = %v < Quantile of smaller q %v", q, got, prev)
		}
		prev = got
	}
	if got, want := h.Quantile(1), time.Duration(math.Ldexp(1, Buckets)); got != want {
		t.Errorf("Quantile(1) = %v, want top of last bucket %v", got, want)
	}
}

func TestHistogramSubAdd(t *testing.T) {
	var a, b Histogram
	a[0], a[3], a[31] = 5, 7, 1
	b[0], b[3] = 2, 9 // b[3] > a[3]: clamped
	d := a.Sub(b)
	if d[0] != 3 || d[3] != 0 || d[31] != 1 {
		t.Errorf("Sub = %v", d)
	}
	d.Add(b)
	if d[0] != 5 || d[3] != 9 || d[31] != 1 || d.Count() != 15 {
		t.Errorf("Add = %v (count %d)", d, d.Count())
	}
}

func TestCgroupStatsSub(t *testing.T) {
	cur := CgroupStats{RunDelay: 300, Waits: 30, OnCPU: 1000, Wakeups: 4, Switches: 40}
	prev := CgroupStats{RunDelay: 100, Waits: 10, OnCPU: 1500, Wakeups: 1, Switches: 10}
	d := cur.Sub(prev)
	want := CgroupStats{RunDelay: 200, Waits: 20, OnCPU: 0, Wakeups: 3, Switches: 30}
	if d != want {
		t.Errorf("Sub = %+v, want %+v", d, want)
	}
	if got := d.MeanRunDelay(); got != 10 {
		t.Errorf("MeanRunDelay = %v, want 10ns", got)
	}
	if got := (CgroupStats{}).MeanRunDelay(); got != 0 {
		t.Errorf("MeanRunDelay without waits = %v", got)
	}
}

func TestProgramStatsPerRun(t *testing.T) {
	if got := (ProgramStats{RunCount: 4, RunTime: 400}).PerRun(); got != 100 {
		t.Errorf("PerRun = %v", got)
	}
	if got := (ProgramStats{}).PerRun(); got != 0 {
		t.Errorf("PerRun of idle program = %v", got)
	}
}

func TestLayoutDir(t *testing.T) {
	v1 := layout{root: "/sys/fs/cgroup"}
	v2 := layout{root: "/sys/fs/cgroup", unified: true}
	tests := []struct {
		l       layout
		ctrl    string
		path    string
		want    string
		wantErr bool
	}{
		{v1, "cpu", "/brim/c1", "/sys/fs/cgroup/cpu/brim/c1", false},
		{v1, "cpuacct", "/brim/c1/", "/sys/fs/cgroup/cpuacct/brim/c1", false},
		{v2, "cpu", "/brim/c1", "/sys/fs/cgroup/brim/c1", false},
		{v1, "cpu", "brim/c1", "", true},
		{v1, "cpu", "/", "", true},
		{v1, "cpu", "", "", true},
		{v1, "cpu", "/brim/../../etc", "", true},
	}
	for _, tt := range tests {
		got, err := tt.l.dir(tt.ctrl, tt.path)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("dir(%q, %q) = %q, %v; want %q, err %v", tt.ctrl, tt.path, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestInterval(t *testing.T) {
	var iv Interval
	dst := map[uint64]CgroupStats{7: {Waits: 99}}
	iv.Next(map[uint64]CgroupStats{1: {Waits: 5, OnCPU: 10}}, dst)
	if len(dst) != 1 || dst[1] != (CgroupStats{Waits: 5, OnCPU: 10}) {
		t.Fatalf("first interval = %+v", dst)
	}
	iv.Next(map[uint64]CgroupStats{1: {Waits: 8, OnCPU: 30}, 2: {Waits: 1}}, dst)
	if dst[1] != (CgroupStats{Waits: 3, OnCPU: 20}) || dst[2] != (CgroupStats{Waits: 1}) {
		t.Fatalf("second interval = %+v", dst)
	}
	// 1 disappears and comes back re-tracked (from zero): counted afresh.
	iv.Next(map[uint64]CgroupStats{2: {Waits: 1}}, dst)
	iv.Next(map[uint64]CgroupStats{1: {Waits: 2}, 2: {Waits: 4}}, dst)
	if dst[1] != (CgroupStats{Waits: 2}) || dst[2] != (CgroupStats{Waits: 3}) {
		t.Fatalf("after re-track = %+v", dst)
	}
}

func TestHistogramCumulativeBuckets(t *testing.T) {
	var h Histogram
	h[0], h[9], h[Buckets-1] = 1, 2, 4
	b := h.CumulativeBuckets()
	if len(b) != Buckets-1 {
		t.Fatalf("%d buckets, want %d", len(b), Buckets-1)
	}
	if b[2e-9] != 1 || b[512e-9] != 1 || b[1024e-9] != 3 || b[math.Ldexp(1, Buckets-1)/1e9] != 3 {
		t.Errorf("buckets = %v", b)
	}
}
