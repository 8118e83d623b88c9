package cgroups

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ScopeMemory is the memory state of what the containers share: brim's
// parent group when it has a limit, else the node.
type ScopeMemory struct {
	// Used is the working set (usage minus inactive page cache, as
	// cAdvisor's); Limit the limit it runs into.
	Used, Limit uint64
	// Node is true when the parent has no limit and the figures are the
	// node's (MemTotal − MemAvailable of MemTotal).
	Node bool
}

// ParentMemory reads the memory state of the containers' parent (v1
// memory.usage_in_bytes, memory.stat, memory.limit_in_bytes; v2
// memory.current, memory.stat, memory.max), or of the node when the parent
// has no limit. It is what a memory-pressure guard compares with its
// threshold before the parent's (or the node's) OOM killer runs.
func (i *Isolator) ParentMemory() (ScopeMemory, error) {
	d := i.dir("memory", i.parent)
	usageFile, limitFile, inactiveKey := "memory.usage_in_bytes", "memory.limit_in_bytes", "total_inactive_file"
	if i.version == V2 {
		usageFile, limitFile, inactiveKey = "memory.current", "memory.max", "inactive_file"
	}
	limit, err := readLimit(filepath.Join(d, limitFile))
	if err != nil {
		return ScopeMemory{}, fmt.Errorf("parent memory: %w", err)
	}
	if limit == 0 {
		return nodeMemory(procRoot)
	}
	usage, err := readUint(filepath.Join(d, usageFile))
	if err != nil {
		return ScopeMemory{}, fmt.Errorf("parent memory: %w", err)
	}
	stat, err := os.ReadFile(filepath.Join(d, "memory.stat"))
	if err != nil {
		return ScopeMemory{}, fmt.Errorf("parent memory: %w", err)
	}
	kv, err := ParseKeyValues(bytes.NewReader(stat))
	if err != nil {
		return ScopeMemory{}, fmt.Errorf("parent memory: %w", err)
	}
	used := usage
	if in := kv[inactiveKey]; in < used {
		used -= in
	}
	return ScopeMemory{Used: used, Limit: limit}, nil
}

// readLimit reads a memory limit file: 0 for none ("max", or v1's huge
// value).
func readLimit(p string) (uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", p, err)
	}
	if n >= v1Unlimited {
		return 0, nil
	}
	return n, nil
}

func readUint(p string) (uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", p, err)
	}
	return n, nil
}

// nodeMemory reads MemTotal and MemAvailable from proc's meminfo.
func nodeMemory(proc string) (ScopeMemory, error) {
	b, err := os.ReadFile(filepath.Join(proc, "meminfo"))
	if err != nil {
		return ScopeMemory{}, fmt.Errorf("node memory: %w", err)
	}
	var total, avail uint64
	var haveTotal, haveAvail bool
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			total, haveTotal = n<<10, true
		case "MemAvailable:":
			avail, haveAvail = n<<10, true
		}
	}
	if !haveTotal || !haveAvail || avail > total {
		return ScopeMemory{}, fmt.Errorf("node memory: no MemTotal/MemAvailable in %s/meminfo", proc)
	}
	return ScopeMemory{Used: total - avail, Limit: total, Node: true}, nil
}
