package cgroups

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

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
	b, err := io.ReadAll(r)
	if err != nil {
		return isolator.PSI{}, fmt.Errorf("parse pressure: %w", err)
	}
	return parsePSIBytes(b)
}

// ReadV1Stats fills stats from the v1 group dirs of one container, given
// as controller → directory (a missing controller is skipped).
func ReadV1Stats(dirs map[string]string, stats *isolator.Statistics) error {
	var src pathSource
	for r, name := range statNamesV1 {
		if d, ok := dirs[statCtrlV1[r]]; ok {
			src[r] = filepath.Join(d, name)
		}
	}
	has := func(c string) bool { _, ok := dirs[c]; return ok }
	l := statLayout{cpu: has("cpu"), cpuacct: has("cpuacct"), memory: has("memory"), pid: has("pids")}
	return fillV1(&src, l, nil, stats)
}

// ReadV2Stats fills stats from the v2 directory dir of one container, for
// the controllers f says are enabled. PSI is read too (see ReadPressure).
func ReadV2Stats(dir string, f Features, stats *isolator.Statistics) error {
	var src pathSource
	for r, name := range statNamesV2 {
		if name != "" {
			src[r] = filepath.Join(dir, name)
		}
	}
	return fillV2(&src, statLayout{v2: true, cpu: true, memory: f.Memory, pid: f.Pids, psi: true}, nil, stats)
}

// ReadPressure fills the PSI fields from dir's {cpu,memory,io}.pressure.
// A directory without pressure files (no v2 directory, or PSI off) leaves
// HasPressure false and is not an error.
func ReadPressure(dir string, stats *isolator.Statistics) error {
	var src pathSource
	for _, r := range []statRole{rCPUPressure, rMemPressure, rIOPressure} {
		src[r] = filepath.Join(dir, statNamesV2[r])
	}
	return fillPressure(&src, &statNamesV2, stats)
}

func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile > usage {
		return 0
	}
	return usage - inactiveFile
}
