package cgroups

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/brimnode/brim/isolator"
)

// statRole is one file Usage reads, named per layout by statNames.
type statRole uint8

const (
	rCPUAcctStat  statRole = iota // v1 only
	rCPUAcctUsage                 // v1 only
	rCPUStat
	rMemStat
	rMemUsage
	rMemLimit // static: taken from the spec when brim knows it
	rMemMax
	rMemFailcnt   // v1 only
	rMemswFailcnt // v1 only, optional (swap accounting)
	rMemOOM
	rPidsCurrent
	rPidsMax // static: taken from the spec when brim knows it
	rCPUPressure
	rMemPressure
	rIOPressure
	nStatRoles
)

var (
	statNamesV1 = [nStatRoles]string{
		rCPUAcctStat: "cpuacct.stat", rCPUAcctUsage: "cpuacct.usage", rCPUStat: "cpu.stat",
		rMemStat: "memory.stat", rMemUsage: "memory.usage_in_bytes", rMemLimit: "memory.limit_in_bytes",
		rMemMax: "memory.max_usage_in_bytes", rMemFailcnt: "memory.failcnt", rMemswFailcnt: "memory.memsw.failcnt",
		rMemOOM: "memory.oom_control", rPidsCurrent: "pids.current", rPidsMax: "pids.max",
		rCPUPressure: "cpu.pressure", rMemPressure: "memory.pressure", rIOPressure: "io.pressure",
	}
	// statCtrlV1 is the v1 hierarchy of each file ("" for the PSI files,
	// which are in the unified directory).
	statCtrlV1 = [nStatRoles]string{
		rCPUAcctStat: "cpuacct", rCPUAcctUsage: "cpuacct", rCPUStat: "cpu",
		rMemStat: "memory", rMemUsage: "memory", rMemLimit: "memory", rMemMax: "memory",
		rMemFailcnt: "memory", rMemswFailcnt: "memory", rMemOOM: "memory",
		rPidsCurrent: "pids", rPidsMax: "pids",
	}
	statNamesV2 = [nStatRoles]string{
		rCPUStat: "cpu.stat", rMemStat: "memory.stat", rMemUsage: "memory.current", rMemLimit: "memory.max",
		rMemMax: "memory.peak", rMemOOM: "memory.events", rPidsCurrent: "pids.current", rPidsMax: "pids.max",
		rCPUPressure: "cpu.pressure", rMemPressure: "memory.pressure", rIOPressure: "io.pressure",
	}
)

// statSource gives the contents of a container group's stat files. read
// returns an error wrapping fs.ErrNotExist for a missing file; the bytes
// are valid until the next read.
type statSource interface {
	read(r statRole) ([]byte, error)
}

// statLayout says which files a group has: the v1 controllers present,
// or the v2 features.
type statLayout struct {
	v2                        bool
	cpu, cpuacct, memory, pid bool // v1 hierarchies; v2: Features
	psi                       bool // has a directory with PSI files
}

// statPaths returns the path of every file of group p (relative to the
// hierarchy roots) in the layout of i.
func (i *Isolator) statPaths(p string) (paths [nStatRoles]string, l statLayout) {
	if i.version == V2 {
		f := i.Features()
		l = statLayout{v2: true, cpu: true, memory: f.Memory, pid: f.Pids, psi: true}
		for r, name := range statNamesV2 {
			if name != "" {
				paths[r] = filepath.Join(i.root, p, name)
			}
		}
		return paths, l
	}
	l = statLayout{
		cpu:     exists(filepath.Join(i.root, "cpu")),
		cpuacct: exists(filepath.Join(i.root, "cpuacct")),
		memory:  exists(filepath.Join(i.root, "memory")),
		pid:     exists(filepath.Join(i.root, "pids")),
		psi:     i.unified != "",
	}
	for r, name := range statNamesV1 {
		if ctrl := statCtrlV1[r]; ctrl != "" {
			paths[r] = filepath.Join(i.root, ctrl, p, name)
		} else if l.psi {
			paths[r] = filepath.Join(i.unified, p, name)
		}
	}
	return paths, l
}

// pathSource reads files by path, opening each every time.
type pathSource [nStatRoles]string

func (s *pathSource) read(r statRole) ([]byte, error) {
	if s[r] == "" {
		return nil, fmt.Errorf("stat file %d: %w", r, fs.ErrNotExist)
	}
	return os.ReadFile(s[r])
}

// specLimits are the limits brim wrote, so Usage need not read them back.
type specLimits struct {
	memBytes uint64 // 0: none
	pids     uint64 // 0: none
}

// limitsOf returns the limits the kernel reports for s: a memory limit is
// rounded down to whole pages, as the kernel stores it.
func limitsOf(s *Spec) specLimits {
	l := specLimits{pids: uint64(s.Limits.Pids)}
	if s.Limits.MemoryBytes > 0 {
		page := uint64(os.Getpagesize())
		l.memBytes = uint64(s.Limits.MemoryBytes) / page * page
	}
	return l
}

// errFirst keeps the first error of a sequence of reads.
type errFirst struct{ err error }

func (e *errFirst) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

func (e *errFirst) uint(src statSource, r statRole, names *[nStatRoles]string) uint64 {
	b, err := src.read(r)
	if err != nil {
		e.fail(err)
		return 0
	}
	n, err := parseUintBytes(b)
	if err != nil {
		e.fail(fmt.Errorf("read %s: %w", names[r], err))
	}
	return n
}

func (e *errFirst) file(src statSource, r statRole) []byte {
	b, err := src.read(r)
	if err != nil {
		e.fail(err)
		return nil
	}
	return b
}

// fillStats fills stats from src for layout l; lim (nil when unknown)
// replaces reading the limit files.
func fillStats(src statSource, l statLayout, lim *specLimits, stats *isolator.Statistics) error {
	if l.v2 {
		return fillV2(src, l, lim, stats)
	}
	return fillV1(src, l, lim, stats)
}

func fillV1(src statSource, l statLayout, lim *specLimits, stats *isolator.Statistics) error {
	var e errFirst
	names := &statNamesV1
	if l.cpuacct {
		for k, v := range keyValues(e.file(src, rCPUAcctStat)) {
			switch string(k) {
			case "user":
				stats.CPUUserSeconds = float64(v) / userHZ
			case "system":
				stats.CPUSystemSeconds = float64(v) / userHZ
			}
		}
		stats.CPUUsageNanos = e.uint(src, rCPUAcctUsage, names)
		stats.HasCPU = true
	}
	if l.cpu {
		for k, v := range keyValues(e.file(src, rCPUStat)) {
			switch string(k) {
			case "nr_periods":
				stats.CPUPeriods = v
			case "nr_throttled":
				stats.CPUThrottled = v
			case "throttled_time":
				stats.CPUThrottledTime = time.Duration(v)
			}
		}
		stats.HasCPU = true
	}
	if l.memory {
		var inactiveFile uint64
		// total_* include descendant groups (hierarchy is always on).
		for k, v := range keyValues(e.file(src, rMemStat)) {
			switch string(k) {
			case "total_rss":
				stats.MemRSSBytes = v
			case "total_cache":
				stats.MemCacheBytes = v
			case "total_inactive_file":
				inactiveFile = v
			}
		}
		stats.MemUsageBytes = e.uint(src, rMemUsage, names)
		stats.MemWorkingSet = workingSet(stats.MemUsageBytes, inactiveFile)
		if lim != nil {
			stats.MemLimitBytes = lim.memBytes
		} else if n := e.uint(src, rMemLimit, names); n < v1Unlimited {
			stats.MemLimitBytes = n
		}
		stats.MemMaxUsage = e.uint(src, rMemMax, names)
		// With memsw = limit the memsw counter is charged (and fails) first.
		stats.MemLimitHit = e.uint(src, rMemFailcnt, names) > 0
		if b, err := src.read(rMemswFailcnt); err == nil {
			n, _ := parseUintBytes(b)
			stats.MemLimitHit = stats.MemLimitHit || n > 0
		}
		for k, v := range keyValues(e.file(src, rMemOOM)) {
			if string(k) == "oom_kill" {
				stats.MemOOMKills = v
			}
		}
		// Linux 6.x leaves failcnt at 0 on some paths that end in an OOM
		// kill; an OOM kill in the group means it hit its limit.
		stats.MemLimitHit = stats.MemLimitHit || stats.MemOOMKills > 0
		stats.HasMemory = true
	}
	if l.pid {
		stats.Pids = e.uint(src, rPidsCurrent, names)
		if lim != nil {
			stats.PidsLimit = lim.pids
		} else {
			stats.PidsLimit = e.uint(src, rPidsMax, names)
		}
		stats.HasPids = true
	}
	if e.err == nil && l.psi {
		e.fail(fillPressure(src, names, stats))
	}
	return e.err
}

func fillV2(src statSource, l statLayout, lim *specLimits, stats *isolator.Statistics) error {
	var e errFirst
	names := &statNamesV2
	// cpu.stat's usage/user/system exist without the cpu controller.
	if b := e.file(src, rCPUStat); b != nil {
		for k, v := range keyValues(b) {
			switch string(k) {
			case "usage_usec":
				stats.CPUUsageNanos = v * 1000
			case "user_usec":
				stats.CPUUserSeconds = float64(v) / 1e6
			case "system_usec":
				stats.CPUSystemSeconds = float64(v) / 1e6
			case "nr_periods":
				stats.CPUPeriods = v
			case "nr_throttled":
				stats.CPUThrottled = v
			case "throttled_usec":
				stats.CPUThrottledTime = time.Duration(v) * time.Microsecond
			}
		}
		stats.HasCPU = true
	}
	if l.memory {
		var inactiveFile uint64
		for k, v := range keyValues(e.file(src, rMemStat)) {
			switch string(k) {
			case "anon":
				stats.MemRSSBytes = v
			case "file":
				stats.MemCacheBytes = v
			case "inactive_file":
				inactiveFile = v
			}
		}
		stats.MemUsageBytes = e.uint(src, rMemUsage, names)
		stats.MemWorkingSet = workingSet(stats.MemUsageBytes, inactiveFile)
		if lim != nil {
			stats.MemLimitBytes = lim.memBytes
		} else {
			stats.MemLimitBytes = e.uint(src, rMemLimit, names)
		}
		if b, err := src.read(rMemMax); err == nil { // Linux ≥ 5.19
			stats.MemMaxUsage, _ = parseUintBytes(b)
		}
		var max uint64
		for k, v := range keyValues(e.file(src, rMemOOM)) {
			switch string(k) {
			case "oom_kill":
				stats.MemOOMKills = v
			case "max":
				max = v
			}
		}
		stats.MemLimitHit = max > 0 || stats.MemOOMKills > 0
		stats.HasMemory = true
	}
	if l.pid {
		stats.Pids = e.uint(src, rPidsCurrent, names)
		if lim != nil {
			stats.PidsLimit = lim.pids
		} else {
			stats.PidsLimit = e.uint(src, rPidsMax, names)
		}
		stats.HasPids = true
	}
	if l.psi {
		e.fail(fillPressure(src, names, stats))
	}
	return e.err
}

// fillPressure fills the PSI fields. Missing pressure files (no v2
// directory, or PSI off) leave HasPressure false and are not an error.
func fillPressure(src statSource, names *[nStatRoles]string, stats *isolator.Statistics) error {
	for _, p := range [...]struct {
		r   statRole
		dst *isolator.PSI
	}{{rCPUPressure, &stats.CPUPressure}, {rMemPressure, &stats.MemPressure}, {rIOPressure, &stats.IOPressure}} {
		r, dst := p.r, p.dst
		b, err := src.read(r)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case errors.Is(err, syscall.EOPNOTSUPP):
			// PSI disabled at runtime reads EOPNOTSUPP: not an error here.
			return nil
		case err != nil:
			return fmt.Errorf("read pressure: %w", err)
		}
		if *dst, err = parsePSIBytes(b); err != nil {
			return fmt.Errorf("read %s: %w", names[r], err)
		}
	}
	stats.HasPressure = true
	return nil
}

// keyValues iterates the "key value" lines of b whose value is an
// unsigned integer, without allocating.
func keyValues(b []byte) func(func([]byte, uint64) bool) {
	return func(yield func([]byte, uint64) bool) {
		for len(b) > 0 {
			var line []byte
			line, b, _ = bytes.Cut(b, []byte{'\n'})
			k, v, ok := bytes.Cut(line, []byte{' '})
			if !ok {
				continue
			}
			n, err := parseDigits(bytes.TrimSpace(v))
			if err != nil {
				continue
			}
			if !yield(k, n) {
				return
			}
		}
	}
}

var errSyntax = errors.New("not an unsigned integer")

// parseDigits parses a decimal unsigned integer without allocating.
func parseDigits(b []byte) (uint64, error) {
	if len(b) == 0 || len(b) > 20 {
		return 0, errSyntax
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errSyntax
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, errSyntax
		}
		n = n*10 + d
	}
	return n, nil
}

// parseUintBytes is ParseUint without allocating on success.
func parseUintBytes(b []byte) (uint64, error) {
	s := bytes.TrimSpace(b)
	if string(s) == "max" || string(s) == "-1" {
		return 0, nil
	}
	n, err := parseDigits(s)
	if err != nil {
		return 0, fmt.Errorf("parse %q: %w", s, err)
	}
	return n, nil
}

// parsePSIBytes parses a pressure file: a "some" line and, except for cpu
// on old kernels, a "full" line.
func parsePSIBytes(b []byte) (isolator.PSI, error) {
	var p isolator.PSI
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		kind, fields, _ := bytes.Cut(bytes.TrimSpace(line), []byte{' '})
		var avg10, avg60, avg300 *float64
		var total *time.Duration
		switch string(kind) {
		case "":
			continue
		case "some":
			avg10, avg60, avg300, total = &p.SomeAvg10, &p.SomeAvg60, &p.SomeAvg300, &p.SomeTotal
		case "full":
			avg10, avg60, avg300, total = &p.FullAvg10, &p.FullAvg60, &p.FullAvg300, &p.FullTotal
		default:
			return p, fmt.Errorf("parse pressure line %q: %w", line, ErrInvalid)
		}
		for len(fields) > 0 {
			var f []byte
			f, fields, _ = bytes.Cut(fields, []byte{' '})
			if len(f) == 0 {
				continue
			}
			k, v, ok := bytes.Cut(f, []byte{'='})
			if !ok {
				return p, fmt.Errorf("parse pressure field %q: %w", f, ErrInvalid)
			}
			var err error
			switch string(k) {
			case "avg10":
				*avg10, err = parseDecimal(v)
			case "avg60":
				*avg60, err = parseDecimal(v)
			case "avg300":
				*avg300, err = parseDecimal(v)
			case "total":
				var us uint64
				us, err = parseDigits(v)
				*total = time.Duration(us) * time.Microsecond
			}
			if err != nil {
				return p, fmt.Errorf("parse pressure field %q: %w", f, err)
			}
		}
	}
	return p, nil
}

// parseDecimal parses the kernel's "%lu.%02lu" averages exactly as
// strconv.ParseFloat would (one correctly rounded division), without
// allocating; other forms go to strconv.
func parseDecimal(b []byte) (float64, error) {
	ip, fp, ok := bytes.Cut(b, []byte{'.'})
	i, err1 := parseDigits(ip)
	f, err2 := parseDigits(fp)
	if !ok || err1 != nil || err2 != nil || len(ip)+len(fp) > 15 {
		return strconv.ParseFloat(string(b), 64)
	}
	scale := 1.0
	for range len(fp) {
		scale *= 10
	}
	return float64(i*uint64(scale)+f) / scale, nil
}
