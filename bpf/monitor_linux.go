//go:build linux && amd64

package bpf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

const (
	defaultMaxCgroups = 1024
	statsSize         = int(unsafe.Sizeof(schedCgStats{}))
	noSlot            = ^uint32(0)
)

// Monitor is the loaded eBPF scheduler and OOM monitor: its programs are
// attached to sched_switch, sched_wakeup, sched_wakeup_new,
// hrtimer_expire_entry (on-CPU time of tasks that are never descheduled),
// cgroup_attach_task (a running task changing cgroup) and mark_victim (OOM
// kills). It counts only tracked cgroups (Track).
//
// A Monitor is safe for concurrent use. The caller that loaded it closes it;
// Close detaches every program and frees the maps.
type Monitor struct {
	mu      sync.Mutex
	objs    schedObjects
	links   []link.Link
	mem     *ebpf.Memory
	stats   io.Closer // kernel.bpf_stats_enabled, when asked for
	oom     *ringbuf.Reader
	oomMu   sync.Mutex // serialises ReadOOM
	layout  layout
	nslots  int
	ncpus   int
	slots   map[uint64]uint32
	free    []uint32
	gen     uint32
	monoOff time.Duration // wall clock - CLOCK_MONOTONIC at load
	closed  bool
	buf     []byte
}

// Load loads and attaches the monitor. Errors saying BPF cannot be used here
// (no kernel BTF, no permission, a program the verifier rejects, a hook that
// cannot be attached) wrap ErrNotSupported with the detail: the caller then
// falls back to NewFallback and says why.
func Load(opts Options) (m *Monitor, err error) {
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return nil, fmt.Errorf("load bpf monitor: no kernel btf: %w: %w", ErrNotSupported, err)
	}
	l, err := detectLayout(opts.CgroupRoot)
	if err != nil {
		return nil, fmt.Errorf("load bpf monitor: %w", err)
	}
	nslots := opts.MaxCgroups
	if nslots <= 0 {
		nslots = defaultMaxCgroups
	}
	ncpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("load bpf monitor: %w", err)
	}
	spec, err := loadSched()
	if err != nil {
		return nil, fmt.Errorf("load bpf monitor: %w", err)
	}
	if err := spec.Variables["nr_slots"].Set(uint32(nslots)); err != nil {
		return nil, fmt.Errorf("load bpf monitor: set nr_slots: %w", err)
	}
	if err := spec.Variables["cgroup_v2"].Set(l.unified); err != nil {
		return nil, fmt.Errorf("load bpf monitor: set cgroup_v2: %w", err)
	}
	if nslots > 1<<16 {
		return nil, fmt.Errorf("load bpf monitor: MaxCgroups %d above %d", nslots, 1<<16)
	}
	spec.Maps["stats"].MaxEntries = uint32(nslots * ncpus)
	spec.Maps["tracked"].MaxEntries = uint32(nslots)

	m = &Monitor{
		layout: l,
		nslots: nslots,
		ncpus:  ncpus,
		slots:  make(map[uint64]uint32),
		buf:    make([]byte, statsSize),
	}
	// Not m: each failing return below sets m to nil before this runs.
	partial := m
	defer func() {
		if err != nil {
			_ = partial.Close()
		}
	}()
	if opts.RunTimeStats {
		if m.stats, err = ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err != nil {
			return nil, fmt.Errorf("load bpf monitor: enable run-time stats: %w", err)
		}
	}
	if err = spec.LoadAndAssign(&m.objs, nil); err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("load bpf monitor: %w: program rejected: %w", ErrNotSupported, err)
		}
		return nil, fmt.Errorf("load bpf monitor: %w: %w", ErrNotSupported, err)
	}
	for _, p := range []*ebpf.Program{
		m.objs.SchedSwitch, m.objs.SchedWakeup, m.objs.SchedWakeupNew,
		m.objs.HrtimerExpireEntry, m.objs.CgroupAttachTask, m.objs.MarkVictim,
	} {
		lk, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			return nil, fmt.Errorf("load bpf monitor: attach %s: %w: %w", p, ErrNotSupported, err)
		}
		m.links = append(m.links, lk)
	}
	if m.mem, err = m.objs.Stats.Memory(); err != nil {
		return nil, fmt.Errorf("load bpf monitor: map stats: %w", err)
	}
	if m.oom, err = ringbuf.NewReader(m.objs.OomEvents); err != nil {
		return nil, fmt.Errorf("load bpf monitor: open oom ring: %w", err)
	}
	for i := nslots - 1; i >= 0; i-- {
		m.free = append(m.free, uint32(i))
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return nil, fmt.Errorf("load bpf monitor: read monotonic clock: %w", err)
	}
	m.monoOff = time.Duration(time.Now().UnixNano()) - time.Duration(ts.Nano())
	return m, nil
}

// Source returns SourceEBPF.
func (m *Monitor) Source() string { return SourceEBPF }

// Track starts counting the cgroup path (absolute, relative to the hierarchy
// roots, e.g. "/brim/c1"; its directory in the cpu hierarchy on v1) and
// returns its id. Counters start from zero. Tracking a tracked cgroup again is
// a no-op. Only the tasks directly in that cgroup count, not its children.
// It returns ErrFull when every slot is taken.
func (m *Monitor) Track(path string) (uint64, error) {
	dir, err := m.layout.dir("cpu", path)
	if err != nil {
		return 0, fmt.Errorf("track: %w", err)
	}
	id, err := CgroupID(dir)
	if err != nil {
		return 0, fmt.Errorf("track: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	if _, ok := m.slots[id]; ok {
		return id, nil
	}
	if len(m.free) == 0 {
		return 0, fmt.Errorf("track %s: %w (%d tracked)", path, ErrFull, m.nslots)
	}
	slot := m.free[len(m.free)-1]
	zero := make([]byte, statsSize)
	for cpu := 0; cpu < m.ncpus; cpu++ {
		if _, err := m.mem.WriteAt(zero, m.offset(cpu, slot)); err != nil {
			return 0, fmt.Errorf("track %s: reset slot: %w", path, err)
		}
	}
	if err := m.objs.Tracked.Put(id, slot); err != nil {
		return 0, fmt.Errorf("track %s: %w", path, err)
	}
	if err := m.bumpGen(); err != nil {
		_ = m.objs.Tracked.Delete(id)
		return 0, fmt.Errorf("track %s: %w", path, err)
	}
	m.free = m.free[:len(m.free)-1]
	m.slots[id] = slot
	return id, nil
}

// Untrack stops counting cgroup id and frees its slot. It returns
// ErrNotTracked for an unknown id.
func (m *Monitor) Untrack(id uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	slot, ok := m.slots[id]
	if !ok {
		return fmt.Errorf("untrack %d: %w", id, ErrNotTracked)
	}
	if err := m.objs.Tracked.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("untrack %d: %w", id, err)
	}
	if err := m.bumpGen(); err != nil {
		return fmt.Errorf("untrack %d: %w", id, err)
	}
	delete(m.slots, id)
	m.free = append(m.free, slot)
	return nil
}

// bumpGen makes every CPU drop its cgroup-to-slot cache.
func (m *Monitor) bumpGen() error {
	m.gen++
	if err := m.objs.TrackedGen.Set(m.gen); err != nil {
		return fmt.Errorf("publish tracked generation: %w", err)
	}
	return nil
}

func (m *Monitor) offset(cpu int, slot uint32) int64 {
	return int64((cpu*m.nslots + int(slot)) * statsSize)
}

// Read replaces the contents of dst with the cumulative statistics of every
// tracked cgroup, summed over CPUs. It makes no system call: the counters are
// read from memory shared with the kernel.
func (m *Monitor) Read(dst map[uint64]CgroupStats) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	clear(dst)
	for id, slot := range m.slots {
		var s CgroupStats
		for cpu := 0; cpu < m.ncpus; cpu++ {
			if _, err := m.mem.ReadAt(m.buf, m.offset(cpu, slot)); err != nil {
				return fmt.Errorf("read cgroup %d: %w", id, err)
			}
			addRaw(&s, m.buf)
		}
		dst[id] = s
	}
	return nil
}

// addRaw adds one struct cg_stats (little endian) into s.
func addRaw(s *CgroupStats, b []byte) {
	le := binary.LittleEndian
	for i := 0; i < Buckets; i++ {
		s.RunQueue[i] += le.Uint64(b[i*8:])
	}
	o := Buckets * 8
	s.RunDelay += time.Duration(le.Uint64(b[o:]))
	s.Waits += le.Uint64(b[o+8:])
	s.OnCPU += time.Duration(le.Uint64(b[o+16:]))
	s.Wakeups += le.Uint64(b[o+24:])
	s.Switches += le.Uint64(b[o+32:])
}

// ReadOOM blocks until the kernel picks an OOM victim, ctx is done (it then
// returns ctx.Err()) or m is closed (ErrClosed). Events are buffered in the
// kernel (64 KiB) while nobody reads. Calls are serialised.
func (m *Monitor) ReadOOM(ctx context.Context) (OOMEvent, error) {
	m.oomMu.Lock()
	defer m.oomMu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = m.oom.Flush() })
	defer stop()
	for {
		if err := ctx.Err(); err != nil {
			return OOMEvent{}, err
		}
		rec, err := m.oom.Read()
		switch {
		case errors.Is(err, ringbuf.ErrFlushed):
			continue
		case errors.Is(err, os.ErrClosed):
			return OOMEvent{}, ErrClosed
		case err != nil:
			return OOMEvent{}, fmt.Errorf("read oom event: %w", err)
		}
		var raw schedOomEvent
		if err := binary.Read(bytes.NewReader(rec.RawSample), binary.LittleEndian, &raw); err != nil {
			return OOMEvent{}, fmt.Errorf("decode oom event: %w", err)
		}
		return OOMEvent{
			CgroupID:    raw.CgroupId,
			MemCgroupID: raw.MemCgroupId,
			Pid:         int(raw.Pid),
			Tid:         int(raw.Tid),
			UID:         raw.Uid,
			Comm:        unix.ByteSliceToString(raw.Comm[:]),
			Time:        time.Unix(0, int64(m.monoOff)+int64(raw.TimeNs)),
		}, nil
	}
}

// Stats returns the kernel's run-time statistics of each program. They are
// zero unless the Monitor was loaded with Options.RunTimeStats (or
// kernel.bpf_stats_enabled is set by someone else).
func (m *Monitor) Stats() ([]ProgramStats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	progs := []struct {
		name string
		p    *ebpf.Program
	}{
		{"sched_switch", m.objs.SchedSwitch},
		{"sched_wakeup", m.objs.SchedWakeup},
		{"sched_wakeup_new", m.objs.SchedWakeupNew},
		{"hrtimer_expire_entry", m.objs.HrtimerExpireEntry},
		{"cgroup_attach_task", m.objs.CgroupAttachTask},
		{"mark_victim", m.objs.MarkVictim},
	}
	out := make([]ProgramStats, 0, len(progs))
	for _, p := range progs {
		st, err := p.p.Stats()
		if err != nil {
			return nil, fmt.Errorf("stats of %s: %w", p.name, err)
		}
		out = append(out, ProgramStats{Name: p.name, RunCount: st.RunCount, RunTime: st.Runtime})
	}
	return out, nil
}

// Close detaches the programs and frees the maps. It is safe to call more
// than once; a concurrent ReadOOM returns ErrClosed.
func (m *Monitor) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	for _, lk := range m.links {
		if err := lk.Close(); err != nil {
			errs = append(errs, fmt.Errorf("detach: %w", err))
		}
	}
	m.links = nil
	if m.oom != nil {
		if err := m.oom.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close oom ring: %w", err))
		}
	}
	if err := m.objs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close objects: %w", err))
	}
	if m.stats != nil {
		if err := m.stats.Close(); err != nil {
			errs = append(errs, fmt.Errorf("disable run-time stats: %w", err))
		}
	}
	return errors.Join(errs...)
}
