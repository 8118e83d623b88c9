package cgroups

import (
	"errors"
	"strings"
	"testing"

	"github.com/brimnode/brim/isolator"
)

// TestPlanPolicy covers the oversubscription writes: soft limits, memory
// protection, io weight and the io throttle, on v1 and v2, derived from
// the class by the default policy.
func TestPlanPolicy(t *testing.T) {
	const (
		G  = isolator.Guaranteed
		BE = isolator.BestEffort
	)
	v1 := Features{Memory: true, MemSoft: true, IOWeightFile: "blkio.weight", IOThrottle: true, IODevices: []string{"8:0", "254:0"}}
	v2 := Features{Memory: true, MemSoft: true, IOWeightFile: "io.weight", IOThrottle: true, IODevices: []string{"254:0"}}
	pol := DefaultPolicy()
	d := func(s Spec, f Features) Spec { return pol.derive(s, f.IOWeightFile) }
	be := d(spec(1000, false, 100<<20, 0, BE), v1)
	lc := d(spec(1000, false, 100<<20, 0, G), v1)
	beThrottled := be
	beThrottled.IOThrottle = IOLimit{WriteBPS: 1 << 20}
	be2 := d(spec(1000, false, 100<<20, 0, BE), v2)
	lc2 := d(spec(1000, false, 100<<20, 0, G), v2)
	be2Throttled := be2
	be2Throttled.IOThrottle = IOLimit{WriteBPS: 1 << 20, ReadIOPS: 50}
	noLimit := d(spec(1000, false, 0, 0, BE), v2)
	be2Both := be2Throttled // the guard's cap and the controller's: the tighter per field
	be2Both.QoSIOLimit = IOLimit{ReadBPS: 2 << 20, WriteBPS: 2 << 20}
	be2QoS := be2
	be2QoS.QoSIOLimit = be2Both.QoSIOLimit

	tests := []struct {
		name string
		v    Version
		f    Features
		want Spec
		have *Spec
		out  string
	}{
		{"v1 new best-effort", V1, v1, be, nil,
			"memory/memory.limit_in_bytes=104857600 memory/memory.soft_limit_in_bytes=94371840 blkio/blkio.weight=10 " +
				"blkio/blkio.throttle.read_bps_device=8:0 0 blkio/blkio.throttle.write_bps_device=8:0 0 blkio/blkio.throttle.read_iops_device=8:0 0 blkio/blkio.throttle.write_iops_device=8:0 0 " +
				"blkio/blkio.throttle.read_bps_device=254:0 0 blkio/blkio.throttle.write_bps_device=254:0 0 blkio/blkio.throttle.read_iops_device=254:0 0 blkio/blkio.throttle.write_iops_device=254:0 0"},
		{"v1 new guaranteed, no throttle files", V1, Features{Memory: true, MemSoft: true, IOWeightFile: "blkio.weight"}, lc, nil,
			"memory/memory.limit_in_bytes=104857600 memory/memory.soft_limit_in_bytes=-1 blkio/blkio.weight=500"},
		{"v1 throttle on", V1, v1, beThrottled, &be,
			"blkio/blkio.throttle.write_bps_device=8:0 1048576 blkio/blkio.throttle.write_bps_device=254:0 1048576"},
		{"v1 throttle off", V1, v1, be, &beThrottled,
			"blkio/blkio.throttle.write_bps_device=8:0 0 blkio/blkio.throttle.write_bps_device=254:0 0"},
		{"v1 no change", V1, v1, be, &be, ""},
		{"v2 new best-effort", V2, v2, be2, nil,
			"memory.max=104857600 memory.high=94371840 memory.low=0 io.weight=1 io.max=254:0 rbps=max wbps=max riops=max wiops=max"},
		{"v2 new guaranteed", V2, v2, lc2, nil,
			"memory.max=104857600 memory.high=max memory.low=104857600 io.weight=100 io.max=254:0 rbps=max wbps=max riops=max wiops=max"},
		{"v2 best-effort without memory limit", V2, Features{Memory: true, MemSoft: true}, noLimit, nil,
			"memory.max=max memory.high=max memory.low=0"},
		{"v2 throttle", V2, v2, be2Throttled, &be2, "io.max=254:0 rbps=max wbps=1048576 riops=50 wiops=max"},
		{"v2 throttle and controller limit", V2, v2, be2Both, &be2, "io.max=254:0 rbps=2097152 wbps=1048576 riops=50 wiops=max"},
		{"v2 guard lifts, controller stays", V2, v2, be2QoS, &be2Both, "io.max=254:0 rbps=2097152 wbps=2097152 riops=max wiops=max"},
		{"v2 controller limit unchanged", V2, v2, be2QoS, &be2QoS, ""},
		{"v2 class change", V2, v2, lc2, &be2, "memory.high=max memory.low=104857600 io.weight=100"},
		{"v2 bfq weight", V2, Features{IOWeightFile: "io.bfq.weight"}, d(spec(1000, false, 0, 0, BE), Features{IOWeightFile: "io.bfq.weight"}), nil, "io.bfq.weight=1"},
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
	if be.OOMScoreAdj != 1000 || lc.OOMScoreAdj != 0 {
		t.Errorf("oom_score_adj best-effort %d, guaranteed %d; want 1000, 0", be.OOMScoreAdj, lc.OOMScoreAdj)
	}
}

func TestPolicyValidate(t *testing.T) {
	good := DefaultPolicy()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Policy){
		"best-effort not above guaranteed": func(p *Policy) { p.BestEffortOOMScoreAdj = 0 },
		"adj out of range":                 func(p *Policy) { p.GuaranteedOOMScoreAdj = -1001 },
		"soft zero":                        func(p *Policy) { p.BestEffortMemorySoft = 0 },
		"soft above one":                   func(p *Policy) { p.BestEffortMemorySoft = 1.5 },
		"low negative":                     func(p *Policy) { p.GuaranteedMemoryLow = -0.1 },
	} {
		p := good
		mod(&p)
		if err := p.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := New(Config{Root: t.TempDir(), Policy: &Policy{BestEffortOOMScoreAdj: 5, GuaranteedOOMScoreAdj: 10, BestEffortMemorySoft: 1}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("New with a bad policy = %v, want ErrInvalid", err)
	}
}

func TestIOWeight(t *testing.T) {
	for _, tt := range []struct {
		file      string
		be, guara uint64
	}{{"blkio.weight", 10, 500}, {"blkio.bfq.weight", 1, 100}, {"io.weight", 1, 100}, {"io.bfq.weight", 1, 100}, {"", 0, 0}} {
		if be, g := IOWeight(tt.file, isolator.BestEffort), IOWeight(tt.file, isolator.Guaranteed); be != tt.be || g != tt.guara {
			t.Errorf("IOWeight(%q) = %d best-effort, %d guaranteed; want %d, %d", tt.file, be, g, tt.be, tt.guara)
		}
	}
}

func TestSpecValidateIO(t *testing.T) {
	s := spec(1000, false, 0, 0, isolator.BestEffort)
	s.IOThrottle = IOLimit{WriteBPS: -1}
	if err := s.validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative io throttle: %v", err)
	}
	s.IOThrottle = IOLimit{WriteBPS: 1}
	if err := (Features{IOThrottle: true}).check(s); !errors.Is(err, isolator.ErrNotSupported) {
		t.Errorf("io throttle without a disk: %v, want ErrNotSupported", err)
	}
}
