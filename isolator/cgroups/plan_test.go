package cgroups

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/brimnode/brim/isolator"
)

var allFeatures = Features{CPU: true, Memory: true, Pids: true, CPUIdle: true, MemSwap: true}

func spec(milli int64, quota bool, mem, pids int64, class isolator.QoSClass) Spec {
	return Spec{Limits: isolator.Limits{MilliCPUs: milli, CPUQuota: quota, MemoryBytes: mem, Pids: pids, Class: class}}
}

func TestPlan(t *testing.T) {
	const (
		G  = isolator.Guaranteed
		BE = isolator.BestEffort
	)
	throttled := spec(2000, false, 0, 0, G)
	throttled.ThrottleMilliCPUs = 500
	throttledUnderQuota := spec(1000, true, 0, 0, G)
	throttledUnderQuota.ThrottleMilliCPUs = 1500
	base := spec(1000, false, 64<<20, 100, G)

	tests := []struct {
		name string
		v    Version
		f    Features
		want Spec
		have *Spec
		out  string // writes joined by " "
	}{
		{"v1 new guaranteed", V1, allFeatures, spec(1500, false, 64<<20, 100, G), nil,
			"cpu/cpu.idle=0 cpu/cpu.shares=1536 cpu/cpu.cfs_period_us=100000 cpu/cpu.cfs_quota_us=-1 " +
				"memory/memory.memsw.limit_in_bytes=-1 memory/memory.limit_in_bytes=67108864 memory/memory.memsw.limit_in_bytes=67108864 " +
				"pids/pids.max=100"},
		{"v1 new best-effort with quota, no limits", V1, allFeatures, spec(500, true, 0, 0, BE), nil,
			"cpu/cpu.idle=0 cpu/cpu.shares=5 cpu/cpu.idle=1 cpu/cpu.cfs_period_us=100000 cpu/cpu.cfs_quota_us=50000 " +
				"memory/memory.memsw.limit_in_bytes=-1 memory/memory.limit_in_bytes=-1 pids/pids.max=max"},
		{"v1 new no idle no swap", V1, Features{CPU: true, Memory: true, Pids: true}, spec(100, false, 1<<20, 0, BE), nil,
			"cpu/cpu.shares=2 cpu/cpu.cfs_period_us=100000 cpu/cpu.cfs_quota_us=-1 memory/memory.limit_in_bytes=1048576 pids/pids.max=max"},
		{"v1 no change", V1, allFeatures, base, &base, ""},
		{"v1 grow memory: memsw first", V1, allFeatures, spec(1000, false, 128<<20, 100, G), &base,
			"memory/memory.memsw.limit_in_bytes=134217728 memory/memory.limit_in_bytes=134217728"},
		{"v1 shrink memory: limit first", V1, allFeatures, spec(1000, false, 32<<20, 100, G), &base,
			"memory/memory.limit_in_bytes=33554432 memory/memory.memsw.limit_in_bytes=33554432"},
		{"v1 memory to unlimited: memsw first", V1, allFeatures, spec(1000, false, 0, 100, G), &base,
			"memory/memory.memsw.limit_in_bytes=-1 memory/memory.limit_in_bytes=-1"},
		{"v1 unlimited to limited: limit first", V1, allFeatures, spec(1000, false, 64<<20, 0, G), ptr(spec(1000, false, 0, 0, G)),
			"memory/memory.limit_in_bytes=67108864 memory/memory.memsw.limit_in_bytes=67108864"},
		{"v1 resize cpu and quota", V1, allFeatures, spec(2500, true, 64<<20, 100, G), &base,
			"cpu/cpu.shares=2560 cpu/cpu.cfs_quota_us=250000"},
		{"v1 remove quota", V1, allFeatures, spec(2500, false, 64<<20, 100, G), ptr(spec(2500, true, 64<<20, 100, G)),
			"cpu/cpu.cfs_quota_us=-1"},
		{"v1 pids unlimited", V1, allFeatures, spec(1000, false, 64<<20, 0, G), &base, "pids/pids.max=max"},
		{"v1 to best-effort: shares then idle", V1, allFeatures, spec(1000, false, 64<<20, 100, BE), &base,
			"cpu/cpu.shares=10 cpu/cpu.idle=1"},
		{"v1 from best-effort: idle cleared then shares", V1, allFeatures, base, ptr(spec(1000, false, 64<<20, 100, BE)),
			"cpu/cpu.idle=0 cpu/cpu.shares=1024"},
		{"v1 best-effort resize while idle: no shares write", V1, allFeatures, spec(3000, false, 64<<20, 100, BE), ptr(spec(1000, false, 64<<20, 100, BE)), ""},
		{"v1 best-effort without cpu.idle", V1, Features{CPU: true}, spec(3000, false, 0, 0, BE), ptr(spec(1000, false, 0, 0, BE)), "cpu/cpu.shares=30"},
		{"v1 throttle below allocation", V1, allFeatures, throttled, ptr(spec(2000, false, 0, 0, G)), "cpu/cpu.cfs_quota_us=50000"},
		{"v1 throttle above the quota keeps the quota", V1, allFeatures, throttledUnderQuota, ptr(spec(1000, true, 0, 0, G)), ""},
		{"v1 throttle removed", V1, allFeatures, spec(2000, false, 0, 0, G), &throttled, "cpu/cpu.cfs_quota_us=-1"},
		{"v1 tiny quota clamps to 1ms", V1, Features{CPU: true}, spec(1, true, 0, 0, G), nil,
			"cpu/cpu.shares=2 cpu/cpu.cfs_period_us=100000 cpu/cpu.cfs_quota_us=1000"},
		{"v1 no controllers", V1, Features{}, base, nil, ""},

		{"v2 new guaranteed", V2, allFeatures, spec(1500, true, 64<<20, 100, G), nil,
			"cpu.idle=0 cpu.weight=59 cpu.max=150000 100000 memory.max=67108864 memory.swap.max=0 pids.max=100"},
		{"v2 new best-effort", V2, allFeatures, spec(2000, false, 0, 0, BE), nil,
			"cpu.idle=0 cpu.weight=1 cpu.idle=1 cpu.max=max 100000 memory.max=max memory.swap.max=max pids.max=max"},
		{"v2 shrink memory", V2, allFeatures, spec(1000, false, 32<<20, 100, G), &base, "memory.max=33554432 memory.swap.max=0"},
		{"v2 resize cpu", V2, Features{CPU: true, Memory: true}, spec(4000, true, 64<<20, 100, G), &base, "cpu.weight=157 cpu.max=400000 100000"},
		{"v2 from best-effort", V2, allFeatures, base, ptr(spec(1000, false, 64<<20, 100, BE)), "cpu.idle=0 cpu.weight=39"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, w := range Plan(tt.v, tt.f, tt.want, tt.have) {
				got = append(got, w.String())
			}
			if s := strings.Join(got, " "); s != tt.out {
				t.Errorf("Plan:\n got %q\nwant %q", s, tt.out)
			}
		})
	}
}

func ptr(s Spec) *Spec { return &s }

func TestWeight(t *testing.T) {
	for shares, want := range map[uint64]uint64{0: 1, 2: 1, 10: 1, 1024: 39, 2048: 79, 262144: 10000} {
		if got := Weight(shares); got != want {
			t.Errorf("Weight(%d) = %d, want %d", shares, got, want)
		}
	}
}

func TestShares(t *testing.T) {
	tests := []struct {
		l    isolator.Limits
		want uint64
	}{
		{isolator.Limits{MilliCPUs: 1000}, 1024},
		{isolator.Limits{MilliCPUs: 250}, 256},
		{isolator.Limits{MilliCPUs: 1}, 2},
		{isolator.Limits{MilliCPUs: 1000, Class: isolator.BestEffort}, 10},
		{isolator.Limits{MilliCPUs: 100, Class: isolator.BestEffort}, 2},
		{isolator.Limits{MilliCPUs: 1000000}, 262144},
		// quota mode: the default weight; a revocable container keeps its class's
		{isolator.Limits{MilliCPUs: 500, CPUQuota: true, FlatShares: true}, 1024},
		{isolator.Limits{MilliCPUs: 4000, CPUQuota: true, FlatShares: true}, 1024},
		{isolator.Limits{MilliCPUs: 1000, CPUQuota: true, FlatShares: true, Class: isolator.BestEffort}, 10},
	}
	for _, tt := range tests {
		if got := Shares(tt.l); got != tt.want {
			t.Errorf("Shares(%+v) = %d, want %d", tt.l, got, tt.want)
		}
	}
}

func TestSpecValidateAndCheck(t *testing.T) {
	bad := []Spec{
		spec(-1, false, 0, 0, isolator.Guaranteed),
		spec(1000, false, -5, 0, isolator.Guaranteed),
		spec(0, true, 0, 0, isolator.Guaranteed),
		spec(1000, false, 0, 0, isolator.QoSClass(7)),
	}
	for _, s := range bad {
		if err := s.validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("validate(%+v) = %v, want ErrInvalid", s, err)
		}
	}
	if err := spec(1000, true, 1<<20, 10, isolator.BestEffort).validate(); err != nil {
		t.Errorf("validate good spec: %v", err)
	}
	if err := (Features{CPU: true}).check(spec(1000, false, 1<<20, 0, isolator.Guaranteed)); !errors.Is(err, isolator.ErrNotSupported) {
		t.Errorf("check without memory controller = %v, want ErrNotSupported", err)
	}
	if err := (Features{}).check(spec(0, false, 0, 0, isolator.Guaranteed)); err != nil {
		t.Errorf("check of empty limits without controllers: %v", err)
	}
	if !reflect.DeepEqual(Plan(V2, Features{}, spec(1000, true, 1, 1, 0), nil), []Write(nil)) {
		t.Error("Plan without controllers wrote something")
	}
}

// The three cpu modes as limits, and back: the plan writes the weight and
// quota each stands for (v1 cpu.shares and cpu.cfs_quota_us).
func TestCPUModes(t *testing.T) {
	f := Features{CPU: true}
	for _, c := range []struct {
		mode          isolator.CPUMode
		shares, quota string
	}{
		{isolator.CPUModeShares, "512", "-1"},
		{isolator.CPUModeQuota, "1024", "50000"},
		{isolator.CPUModeBoth, "512", "50000"},
	} {
		l := isolator.Limits{MilliCPUs: 500}
		l.SetCPUMode(c.mode)
		if l.CPUMode() != c.mode {
			t.Errorf("SetCPUMode(%s) reads back as %s", c.mode, l.CPUMode())
		}
		got := map[string]string{}
		for _, w := range Plan(V1, f, Spec{Limits: l}, nil) {
			got[w.File] = w.Value
		}
		if got["cpu.shares"] != c.shares || got["cpu.cfs_quota_us"] != c.quota {
			t.Errorf("%s: cpu.shares %s cpu.cfs_quota_us %s, want %s and %s", c.mode, got["cpu.shares"], got["cpu.cfs_quota_us"], c.shares, c.quota)
		}
		if m, err := isolator.ParseCPUMode(string(c.mode)); err != nil || m != c.mode {
			t.Errorf("ParseCPUMode(%s) = %s, %v", c.mode, m, err)
		}
	}
	if _, err := isolator.ParseCPUMode("hard"); err == nil || !strings.Contains(err.Error(), "want shares, quota or both") {
		t.Errorf("ParseCPUMode(hard) = %v", err)
	}
}
