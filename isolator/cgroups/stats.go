package cgroups

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/brimnode/brim/isolator"
)

// userHZ is the unit of cpuacct.stat (USER_HZ, 100 on every Linux ABI).
const userHZ = 100

// v1Unlimited is what v1 limit files read above this when unlimited
// (PAGE_COUNTER_MAX pages, rounded): anything this large means no limit.
const v1Unlimited = 1 << 62

// ParseKeyValues parses "key value" lines (memory.stat, cpu.stat,
// cpuacct.stat, memory.events, memory.oom_control) into a map. Lines
// whose value is not an unsigned integer are skipped.
func ParseKeyValues(r io.Reader) (map[string]uint64, error) {
	m := make(map[string]uint64)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		m[k] = n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parse key values: %w", err)
	}
	return m, nil
}

// ParseUint parses a one-value cgroup file ("123\n"). "max" and "-1"
// (no limit) parse as 0.
func ParseUint(b []byte) (uint64, error) {
	s := string(bytes.TrimSpace(b))
	if s == "max" || s == "-1" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %q: %w", s, err)
	}
	return n, nil
}

// ParsePSI parses a pressure file (cpu.pressure, memory.pressure,
// io.pressure): a "some" line and, except for cpu on old kernels, a "full"
// line.
func ParsePSI(r io.Reader) (isolator.PSI, error) {
	var p isolator.PSI
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		var avg10, avg60, avg300 *float64
		var total *time.Duration
		switch fields[0] {
		case "some":
			avg10, avg60, avg300, total = &p.SomeAvg10, &p.SomeAvg60, &p.SomeAvg300, &p.SomeTotal
		case "full":
			avg10, avg60, avg300, total = &p.FullAvg10, &p.FullAvg60, &p.FullAvg300, &p.FullTotal
		default:
			return p, fmt.Errorf("parse pressure line %q: %w", sc.Text(), ErrInvalid)
		}
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				return p, fmt.Errorf("parse pressure field %q: %w", f, ErrInvalid)
			}
			var err error
			switch k {
			case "avg10":
				*avg10, err = strconv.ParseFloat(v, 64)
			case "avg60":
				*avg60, err = strconv.ParseFloat(v, 64)
			case "avg300":
				*avg300, err = strconv.ParseFloat(v, 64)
			case "total":
				var us uint64
				us, err = strconv.ParseUint(v, 10, 64)
				*total = time.Duration(us) * time.Microsecond
			}
			if err != nil {
				return p, fmt.Errorf("parse pressure field %q: %w", f, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return p, fmt.Errorf("parse pressure: %w", err)
	}
	return p, nil
}

// statReader reads files of one container group.
type statReader struct {
	err error
}

func (r *statReader) keyValues(path string) map[string]uint64 {
	f, err := os.Open(path)
	if err != nil {
		r.fail(err)
		return nil
	}
	defer f.Close()
	m, err := ParseKeyValues(f)
	if err != nil {
		r.fail(fmt.Errorf("read %s: %w", path, err))
	}
	return m
}

func (r *statReader) uint(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		r.fail(err)
		return 0
	}
	n, err := ParseUint(b)
	if err != nil {
		r.fail(fmt.Errorf("read %s: %w", path, err))
	}
	return n
}

func (r *statReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// ReadV1Stats fills stats from the v1 group dirs of one container, given
// as controller → directory (a missing controller is skipped).
func ReadV1Stats(dirs map[string]string, stats *isolator.Statistics) error {
	r := &statReader{}
	if d, ok := dirs["cpuacct"]; ok {
		st := r.keyValues(filepath.Join(d, "cpuacct.stat"))
		stats.CPUUserSeconds = float64(st["user"]) / userHZ
		stats.CPUSystemSeconds = float64(st["system"]) / userHZ
		stats.CPUUsageNanos = r.uint(filepath.Join(d, "cpuacct.usage"))
		stats.HasCPU = true
	}
	if d, ok := dirs["cpu"]; ok {
		st := r.keyValues(filepath.Join(d, "cpu.stat"))
		stats.CPUPeriods = st["nr_periods"]
		stats.CPUThrottled = st["nr_throttled"]
		stats.CPUThrottledTime = time.Duration(st["throttled_time"])
		stats.HasCPU = true
	}
	if d, ok := dirs["memory"]; ok {
		st := r.keyValues(filepath.Join(d, "memory.stat"))
		stats.MemUsageBytes = r.uint(filepath.Join(d, "memory.usage_in_bytes"))
		// total_* include descendant groups (hierarchy is always on).
		stats.MemRSSBytes = st["total_rss"]
		stats.MemCacheBytes = st["total_cache"]
		stats.MemWorkingSet = workingSet(stats.MemUsageBytes, st["total_inactive_file"])
		if lim := r.uint(filepath.Join(d, "memory.limit_in_bytes")); lim < v1Unlimited {
			stats.MemLimitBytes = lim
		}
		stats.MemMaxUsage = r.uint(filepath.Join(d, "memory.max_usage_in_bytes"))
		// With memsw = limit the memsw counter is charged (and fails) first.
		stats.MemLimitHit = r.uint(filepath.Join(d, "memory.failcnt")) > 0
		if b, err := os.ReadFile(filepath.Join(d, "memory.memsw.failcnt")); err == nil {
			n, _ := ParseUint(b)
			stats.MemLimitHit = stats.MemLimitHit || n > 0
		}
		stats.MemOOMKills = r.keyValues(filepath.Join(d, "memory.oom_control"))["oom_kill"]
		// Linux 6.x leaves failcnt at 0 on some paths that end in an OOM
		// kill; an OOM kill in the group means it hit its limit.
		stats.MemLimitHit = stats.MemLimitHit || stats.MemOOMKills > 0
		stats.HasMemory = true
	}
	if d, ok := dirs["pids"]; ok {
		stats.Pids = r.uint(filepath.Join(d, "pids.current"))
		stats.PidsLimit = r.uint(filepath.Join(d, "pids.max"))
		stats.HasPids = true
	}
	return r.err
}

// ReadV2Stats fills stats from the v2 directory dir of one container, for
// the controllers f says are enabled. PSI is read too (see ReadPressure).
func ReadV2Stats(dir string, f Features, stats *isolator.Statistics) error {
	r := &statReader{}
	// cpu.stat's usage/user/system exist without the cpu controller.
	st := r.keyValues(filepath.Join(dir, "cpu.stat"))
	stats.CPUUsageNanos = st["usage_usec"] * 1000
	stats.CPUUserSeconds = float64(st["user_usec"]) / 1e6
	stats.CPUSystemSeconds = float64(st["system_usec"]) / 1e6
	stats.CPUPeriods = st["nr_periods"]
	stats.CPUThrottled = st["nr_throttled"]
	stats.CPUThrottledTime = time.Duration(st["throttled_usec"]) * time.Microsecond
	stats.HasCPU = st != nil
	if f.Memory {
		st := r.keyValues(filepath.Join(dir, "memory.stat"))
		stats.MemUsageBytes = r.uint(filepath.Join(dir, "memory.current"))
		stats.MemRSSBytes = st["anon"]
		stats.MemCacheBytes = st["file"]
		stats.MemWorkingSet = workingSet(stats.MemUsageBytes, st["inactive_file"])
		stats.MemLimitBytes = r.uint(filepath.Join(dir, "memory.max"))
		if b, err := os.ReadFile(filepath.Join(dir, "memory.peak")); err == nil { // Linux ≥ 5.19
			stats.MemMaxUsage, _ = ParseUint(b)
		}
		ev := r.keyValues(filepath.Join(dir, "memory.events"))
		stats.MemOOMKills = ev["oom_kill"]
		stats.MemLimitHit = ev["max"] > 0 || ev["oom_kill"] > 0
		stats.HasMemory = true
	}
	if f.Pids {
		stats.Pids = r.uint(filepath.Join(dir, "pids.current"))
		stats.PidsLimit = r.uint(filepath.Join(dir, "pids.max"))
		stats.HasPids = true
	}
	if err := ReadPressure(dir, stats); err != nil {
		r.fail(err)
	}
	return r.err
}

// ReadPressure fills the PSI fields from dir's {cpu,memory,io}.pressure.
// A directory without pressure files (no v2 directory, or PSI off) leaves
// HasPressure false and is not an error.
func ReadPressure(dir string, stats *isolator.Statistics) error {
	for _, p := range []struct {
		file string
		dst  *isolator.PSI
	}{{"cpu.pressure", &stats.CPUPressure}, {"memory.pressure", &stats.MemPressure}, {"io.pressure", &stats.IOPressure}} {
		f, err := os.Open(filepath.Join(dir, p.file))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read pressure: %w", err)
		}
		*p.dst, err = ParsePSI(f)
		f.Close()
		if err != nil {
			// PSI disabled at runtime reads EOPNOTSUPP: not an error here.
			if errors.Is(err, syscall.EOPNOTSUPP) {
				return nil
			}
			return fmt.Errorf("read %s: %w", p.file, err)
		}
	}
	stats.HasPressure = true
	return nil
}

func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile > usage {
		return 0
	}
	return usage - inactiveFile
}
