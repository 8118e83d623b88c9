package cgroups

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/brimnode/brim/isolator"
)

var (
	// ErrInvalid is returned for a bad configuration, container ID or
	// limits.
	ErrInvalid = errors.New("invalid cgroup request")
	// ErrBusy is returned by Cleanup when a group still holds processes:
	// the containerizer kills them first.
	ErrBusy = errors.New("cgroup still has processes")
	// ErrMemoryInUse is returned when a memory limit is lowered below what
	// the container uses and the kernel cannot reclaim enough (EBUSY).
	ErrMemoryInUse = errors.New("memory limit below current usage")
	// ErrNotMember is returned by Isolate when the pid is not in the
	// container's group.
	ErrNotMember = errors.New("process is not in the container's cgroup")
)

// Version is a cgroup hierarchy layout.
type Version int

const (
	// V1 is the legacy layout, one hierarchy per controller; also used on a
	// hybrid host (v1 controllers plus an empty v2 tree at "unified").
	V1 Version = 1
	// V2 is the unified hierarchy.
	V2 Version = 2
)

func (v Version) String() string {
	if v == V2 {
		return "v2"
	}
	return "v1"
}

// Features are what the host's cgroups offer the container groups; Plan
// only emits writes for what is there.
type Features struct {
	// CPU, Memory and Pids say whether the controller is available.
	CPU, Memory, Pids bool
	// CPUIdle says the cpu controller has cpu.idle (SCHED_IDLE groups,
	// Linux ≥ 5.15; present in the v1 cpu controller too).
	CPUIdle bool
	// MemSwap says the host accounts swap: v1 memory.memsw.limit_in_bytes,
	// v2 memory.swap.max.
	MemSwap bool
	// MemSoft says the host has a memory soft limit: v1
	// memory.soft_limit_in_bytes, v2 memory.high (and memory.low).
	MemSoft bool
	// IOWeightFile is the io weight file the host offers ("" for none): v1
	// blkio.weight (CFQ) or blkio.bfq.weight, v2 io.weight (blk-iocost) or
	// io.bfq.weight. Which one depends on the kernel and the disks'
	// scheduler.
	IOWeightFile string
	// IOThrottle says the host can cap a group's IO: v1
	// blkio.throttle.*_device, v2 io.max.
	IOThrottle bool
	// IODevices are the whole disks ("MAJ:MIN") the IO throttle applies to
	// (Config.IOPaths resolved); none: no throttle is written.
	IODevices []string
}

// check returns an error wrapping isolator.ErrNotSupported when spec needs
// a controller the host lacks.
func (f Features) check(s Spec) error {
	switch {
	case (s.Limits.MilliCPUs > 0 || s.Limits.CPUQuota || s.ThrottleMilliCPUs > 0) && !f.CPU:
		return fmt.Errorf("cpu limits: cpu controller: %w", isolator.ErrNotSupported)
	case s.Limits.MemoryBytes > 0 && !f.Memory:
		return fmt.Errorf("memory limit: memory controller: %w", isolator.ErrNotSupported)
	case s.Limits.Pids > 0 && !f.Pids:
		return fmt.Errorf("pids limit: pids controller: %w", isolator.ErrNotSupported)
	case !s.IOCap().IsZero() && (!f.IOThrottle || len(f.IODevices) == 0):
		return fmt.Errorf("io throttle: blkio/io controller with throttling and a disk to throttle (Config.IOPaths): %w", isolator.ErrNotSupported)
	}
	return nil
}

// Spec is what a container group should look like: the container's limits,
// what the isolator's policy derives from their class (soft limits, io
// weight, oom_score_adj: see Policy) and the QoS corrections (cpu and io
// throttles).
type Spec struct {
	Limits isolator.Limits
	// ThrottleMilliCPUs, when > 0, caps the CFS quota below the limits
	// (set by SetCPUQuota; 0 = no correction).
	ThrottleMilliCPUs int64
	// IOThrottle caps the group's IO on Features.IODevices (set by
	// ThrottleIO: the agent's io guard; zero = no correction).
	IOThrottle IOLimit
	// QoSIOLimit is the QoS controller's io correction (set by
	// SetIOLimit: THROTTLE_IO, the slow start; zero = none). The io
	// guard and the controller act on their own and lift their own
	// caps: the group gets the tighter of the two, field by field
	// (IOCap), so that one lifting its cap does not lift the other's.
	QoSIOLimit IOLimit

	// MemorySoft is the soft limit in bytes: v1 memory.soft_limit_in_bytes,
	// v2 memory.high; 0 = none (-1 / max).
	MemorySoft int64
	// MemoryLow is v2 memory.low in bytes (reclaim protection); 0 = none.
	MemoryLow int64
	// IOWeight is written to Features.IOWeightFile; 0 leaves it alone.
	IOWeight uint64
	// OOMScoreAdj is the oom_score_adj of the group's processes (not a
	// cgroup file: the launcher applies it to the init, and Update and
	// Recover rewrite it for every process in the group).
	OOMScoreAdj int
}

// IOLimit caps a group's IO per disk; a zero field is no cap.
type IOLimit struct {
	ReadBPS, WriteBPS   int64 // bytes per second
	ReadIOPS, WriteIOPS int64 // operations per second
}

// IsZero reports whether l caps nothing.
func (l IOLimit) IsZero() bool { return l == IOLimit{} }

// tighter returns the tighter of l and m field by field (a zero field
// caps nothing).
func (l IOLimit) tighter(m IOLimit) IOLimit {
	f := func(a, b int64) int64 {
		if a == 0 || (b != 0 && b < a) {
			return b
		}
		return a
	}
	return IOLimit{ReadBPS: f(l.ReadBPS, m.ReadBPS), WriteBPS: f(l.WriteBPS, m.WriteBPS),
		ReadIOPS: f(l.ReadIOPS, m.ReadIOPS), WriteIOPS: f(l.WriteIOPS, m.WriteIOPS)}
}

// IOCap is the io cap the group gets: the tighter of the io guard's
// throttle and the QoS controller's limit, field by field.
func (s Spec) IOCap() IOLimit { return s.IOThrottle.tighter(s.QoSIOLimit) }

func (s Spec) validate() error {
	l := s.Limits
	if l.MilliCPUs < 0 || l.MemoryBytes < 0 || l.Pids < 0 || s.ThrottleMilliCPUs < 0 {
		return fmt.Errorf("negative limit in %+v: %w", s, ErrInvalid)
	}
	for _, t := range []IOLimit{s.IOThrottle, s.QoSIOLimit} {
		if t.ReadBPS < 0 || t.WriteBPS < 0 || t.ReadIOPS < 0 || t.WriteIOPS < 0 {
			return fmt.Errorf("negative io throttle %+v: %w", t, ErrInvalid)
		}
	}
	if s.MemorySoft < 0 || s.MemoryLow < 0 {
		return fmt.Errorf("negative memory soft limit or protection in %+v: %w", s, ErrInvalid)
	}
	if s.OOMScoreAdj < -1000 || s.OOMScoreAdj > 1000 {
		return fmt.Errorf("oom_score_adj %d outside [-1000, 1000]: %w", s.OOMScoreAdj, ErrInvalid)
	}
	if l.CPUQuota && l.MilliCPUs == 0 {
		return fmt.Errorf("cpu quota without cpus: %w", ErrInvalid)
	}
	if l.Class != isolator.Guaranteed && l.Class != isolator.BestEffort {
		return fmt.Errorf("qos class %d: %w", l.Class, ErrInvalid)
	}
	return nil
}

// Write is one cgroup file write. Controller names the v1 hierarchy
// ("cpu", "memory", "pids"); it is empty on v2.
type Write struct {
	Controller string
	File       string
	Value      string
}

func (w Write) String() string {
	if w.Controller == "" {
		return w.File + "=" + w.Value
	}
	return w.Controller + "/" + w.File + "=" + w.Value
}

// CFSPeriodMicros is the CFS period brim uses for every quota (100 ms).
const CFSPeriodMicros = 100000

// minQuotaMicros is the smallest quota the kernel accepts.
const minQuotaMicros = 1000

// DefaultShares is the kernel's cpu.shares of a new group (v2 weight 100).
const DefaultShares = 1024

// Shares returns the v1 cpu.shares for limits: 1024 per cpu for
// Guaranteed, 10 per cpu for BestEffort (as Mesos does), at least 2;
// DefaultShares for a Guaranteed container with FlatShares.
func Shares(l isolator.Limits) uint64 {
	if l.FlatShares && l.Class == isolator.Guaranteed {
		return DefaultShares
	}
	per := int64(1024)
	if l.Class == isolator.BestEffort {
		per = 10
	}
	s := l.MilliCPUs * per / 1000
	if s < 2 {
		s = 2
	}
	if s > 262144 {
		s = 262144
	}
	return uint64(s)
}

// Weight converts v1 shares to a v2 cpu.weight (the conversion runc, crun
// and the kubelet use): [2, 262144] → [1, 10000].
func Weight(shares uint64) uint64 {
	if shares < 2 {
		shares = 2
	}
	return 1 + ((shares-2)*9999)/262142
}

// quotaMicros returns the CFS quota in µs per CFSPeriodMicros, 0 for none.
func quotaMicros(s Spec) int64 {
	var milli int64
	if s.Limits.CPUQuota {
		milli = s.Limits.MilliCPUs
	}
	if t := s.ThrottleMilliCPUs; t > 0 && (milli == 0 || t < milli) {
		milli = t
	}
	if milli == 0 {
		return 0
	}
	q := milli * CFSPeriodMicros / 1000
	if q < minQuotaMicros {
		q = minQuotaMicros
	}
	return q
}

func (p *planner) add(ctrl, file, value string) {
	if p.v == V2 {
		ctrl = ""
	}
	p.out = append(p.out, Write{Controller: ctrl, File: file, Value: value})
}

type planner struct {
	v   Version
	out []Write
}

// Plan returns the ordered file writes that turn a group in state have into
// want. have == nil means the current state is unknown (a new group, or one
// found after a restart): every file is written, in an order that is valid
// whatever the group holds. Otherwise only what changes is written.
//
// Ordering rules it encodes: on v1 memory.memsw.limit_in_bytes must stay ≥
// memory.limit_in_bytes (grow memsw first, shrink the limit first); a group
// with cpu.idle=1 refuses shares/weight writes (EINVAL) and clearing
// cpu.idle resets them, so shares are written before idle is set and after
// it is cleared.
func Plan(v Version, f Features, want Spec, have *Spec) []Write {
	p := &planner{v: v}
	if f.CPU {
		p.cpu(f, want, have)
	}
	if f.Memory {
		p.memory(f, want, have)
	}
	if f.Pids && (have == nil || have.Limits.Pids != want.Limits.Pids) {
		val := "max"
		if want.Limits.Pids > 0 {
			val = strconv.FormatInt(want.Limits.Pids, 10)
		}
		p.add("pids", "pids.max", val)
	}
	p.io(f, want, have)
	return p.out
}

func (p *planner) cpu(f Features, want Spec, have *Spec) {
	weightFile, weight := "cpu.shares", Shares(want.Limits)
	if p.v == V2 {
		weightFile, weight = "cpu.weight", Weight(weight)
	}
	writeWeight := func() { p.add("cpu", weightFile, strconv.FormatUint(weight, 10)) }
	wantIdle := f.CPUIdle && want.Limits.Class == isolator.BestEffort
	switch have {
	case nil:
		if f.CPUIdle {
			p.add("cpu", "cpu.idle", "0")
		}
		writeWeight()
		if wantIdle {
			p.add("cpu", "cpu.idle", "1")
		}
	default:
		haveIdle := f.CPUIdle && have.Limits.Class == isolator.BestEffort
		changed := Shares(have.Limits) != Shares(want.Limits)
		switch {
		case haveIdle && wantIdle:
			// The weight of an idle group is fixed; the kernel refuses writes.
		case haveIdle:
			p.add("cpu", "cpu.idle", "0")
			writeWeight()
		case wantIdle:
			if changed {
				writeWeight()
			}
			p.add("cpu", "cpu.idle", "1")
		case changed:
			writeWeight()
		}
	}

	q := quotaMicros(want)
	if have != nil && quotaMicros(*have) == q {
		return
	}
	if p.v == V2 {
		val := "max"
		if q > 0 {
			val = strconv.FormatInt(q, 10)
		}
		p.add("cpu", "cpu.max", val+" "+strconv.Itoa(CFSPeriodMicros))
		return
	}
	if have == nil {
		p.add("cpu", "cpu.cfs_period_us", strconv.Itoa(CFSPeriodMicros))
	}
	if q == 0 {
		q = -1
	}
	p.add("cpu", "cpu.cfs_quota_us", strconv.FormatInt(q, 10))
}

func (p *planner) memory(f Features, want Spec, have *Spec) {
	p.memoryLimit(f, want, have)
	if !f.MemSoft {
		return
	}
	if have == nil || have.MemorySoft != want.MemorySoft {
		if p.v == V2 {
			p.add("memory", "memory.high", bytesOrMax(want.MemorySoft))
		} else {
			val := "-1"
			if want.MemorySoft > 0 {
				val = strconv.FormatInt(want.MemorySoft, 10)
			}
			p.add("memory", "memory.soft_limit_in_bytes", val)
		}
	}
	if p.v == V2 && (have == nil || have.MemoryLow != want.MemoryLow) {
		p.add("memory", "memory.low", strconv.FormatInt(want.MemoryLow, 10))
	}
}

// bytesOrMax renders a v2 byte limit: "max" for none.
func bytesOrMax(n int64) string {
	if n > 0 {
		return strconv.FormatInt(n, 10)
	}
	return "max"
}

// io writes the io weight and the io throttle (per disk).
func (p *planner) io(f Features, want Spec, have *Spec) {
	ctrl := "blkio"
	if f.IOWeightFile != "" && want.IOWeight > 0 && (have == nil || have.IOWeight != want.IOWeight) {
		p.add(ctrl, f.IOWeightFile, strconv.FormatUint(want.IOWeight, 10))
	}
	if !f.IOThrottle || (have != nil && have.IOCap() == want.IOCap()) {
		return
	}
	t := want.IOCap()
	for _, dev := range f.IODevices {
		if p.v == V2 {
			n := func(v int64) string { return bytesOrMax(v) }
			p.add(ctrl, "io.max", fmt.Sprintf("%s rbps=%s wbps=%s riops=%s wiops=%s", dev, n(t.ReadBPS), n(t.WriteBPS), n(t.ReadIOPS), n(t.WriteIOPS)))
			continue
		}
		// 0 removes a v1 rule.
		for _, w := range []struct {
			file string
			v    int64
		}{{"blkio.throttle.read_bps_device", t.ReadBPS}, {"blkio.throttle.write_bps_device", t.WriteBPS},
			{"blkio.throttle.read_iops_device", t.ReadIOPS}, {"blkio.throttle.write_iops_device", t.WriteIOPS}} {
			if have != nil && !changedIO(w.file, *have, want) {
				continue
			}
			p.add(ctrl, w.file, dev+" "+strconv.FormatInt(w.v, 10))
		}
	}
}

// changedIO reports whether v1 throttle file changes between have and want.
func changedIO(file string, have, want Spec) bool {
	h, w := have.IOCap(), want.IOCap()
	switch file {
	case "blkio.throttle.read_bps_device":
		return h.ReadBPS != w.ReadBPS
	case "blkio.throttle.write_bps_device":
		return h.WriteBPS != w.WriteBPS
	case "blkio.throttle.read_iops_device":
		return h.ReadIOPS != w.ReadIOPS
	}
	return h.WriteIOPS != w.WriteIOPS
}

func (p *planner) memoryLimit(f Features, want Spec, have *Spec) {
	m := want.Limits.MemoryBytes
	if have != nil && have.Limits.MemoryBytes == m {
		return
	}
	if p.v == V2 {
		val := "max"
		if m > 0 {
			val = strconv.FormatInt(m, 10)
		}
		p.add("memory", "memory.max", val)
		if f.MemSwap {
			// Same as v1 memsw = limit: no swap beyond the memory limit.
			swap := "max"
			if m > 0 {
				swap = "0"
			}
			p.add("memory", "memory.swap.max", swap)
		}
		return
	}
	val := "-1"
	if m > 0 {
		val = strconv.FormatInt(m, 10)
	}
	limit := func() { p.add("memory", "memory.limit_in_bytes", val) }
	memsw := func(v string) { p.add("memory", "memory.memsw.limit_in_bytes", v) }
	switch {
	case !f.MemSwap:
		limit()
	case m == 0:
		memsw(val)
		limit()
	case have == nil:
		// Unknown current limits: lift memsw, set the limit, then memsw.
		memsw("-1")
		limit()
		memsw(val)
	case have.Limits.MemoryBytes != 0 && m > have.Limits.MemoryBytes:
		memsw(val)
		limit()
	default:
		limit()
		memsw(val)
	}
}
