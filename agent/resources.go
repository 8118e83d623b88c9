package agent

import (
	"strconv"
	"strings"
)

// Resources are the scalar resources the agent accounts containers against:
// cpus in thousandths (the resource model's fixed point), memory in MiB and
// network bandwidth (net_bw) in Mbit/s. NetMbit is accounted only when the
// agent's total has some.
// cmd/brim converts the operator's --resources (Mesos syntax, parsed by
// package resources) into this.
type Resources struct {
	MilliCPUs int64
	MemMiB    int64
	NetMbit   int64
}

// String formats r in the Mesos text syntax ("cpus:1.5;mem:1024"), leaving
// out zero resources unless r is empty.
func (r Resources) String() string {
	var parts []string
	if r.MilliCPUs != 0 {
		parts = append(parts, "cpus:"+FormatMilli(r.MilliCPUs))
	}
	if r.MemMiB != 0 {
		parts = append(parts, "mem:"+strconv.FormatInt(r.MemMiB, 10))
	}
	if r.NetMbit != 0 {
		parts = append(parts, "net_bw:"+strconv.FormatInt(r.NetMbit, 10))
	}
	if len(parts) == 0 {
		return "cpus:0;mem:0"
	}
	return strings.Join(parts, ";")
}

func (r Resources) add(o Resources) Resources {
	return Resources{r.MilliCPUs + o.MilliCPUs, r.MemMiB + o.MemMiB, r.NetMbit + o.NetMbit}
}

func (r Resources) sub(o Resources) Resources {
	return Resources{r.MilliCPUs - o.MilliCPUs, r.MemMiB - o.MemMiB, r.NetMbit - o.NetMbit}
}

// fits returns nil if ask fits in free, else an error naming the resources
// that do not.
func fits(ask, free Resources) error {
	var a, f Resources
	short := false
	if ask.MilliCPUs > free.MilliCPUs {
		a.MilliCPUs, f.MilliCPUs, short = ask.MilliCPUs, max(free.MilliCPUs, 0), true
	}
	if ask.MemMiB > free.MemMiB {
		a.MemMiB, f.MemMiB, short = ask.MemMiB, max(free.MemMiB, 0), true
	}
	if ask.NetMbit > free.NetMbit {
		a.NetMbit, f.NetMbit, short = ask.NetMbit, max(free.NetMbit, 0), true
	}
	if !short {
		return nil
	}
	return &InsufficientResourcesError{Asked: a, Free: f}
}

// FormatMilli formats thousandths as a decimal without trailing zeros
// (1500 → "1.5", 2000 → "2").
func FormatMilli(m int64) string {
	neg := m < 0
	if neg {
		m = -m
	}
	s := strconv.FormatInt(m/1000, 10)
	if frac := m % 1000; frac != 0 {
		s += "." + strings.TrimRight(strconv.FormatInt(1000+frac, 10)[1:], "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}
