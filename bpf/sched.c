//go:build ignore

// Scheduler and OOM monitor. Per tracked cgroup (cpu hierarchy on v1, the
// unified hierarchy on v2) it keeps, per CPU, a log2 histogram of run-queue
// waits, their sum and count, on-CPU time and wakeups, in a mmapable array
// that user space reads without a system call. OOM victims go to a ring
// buffer.
//
// Cost matters more than anything here (every context switch runs this), and
// helper calls are expensive on this class of machine (return thunks), so
// the hot path uses no out-of-line helper at all:
//   - the wait is computed from the scheduler's own bookkeeping
//     (next->sched_info.last_queued, stamped at enqueue with the run-queue
//     clock) against that run queue's clock, both read through BTF;
//   - on-CPU time is the growth of prev->se.sum_exec_runtime over its slice,
//     the very counter cpuacct charges;
//   - per-CPU state and the statistics arrays are ARRAY / PERCPU_ARRAY maps,
//     whose lookups the verifier inlines; bpf_get_smp_processor_id is inlined;
//   - cgroup id -> slot goes through a tiny per-CPU direct-mapped cache, the
//     hash map is only consulted on a miss (also negative: untracked cgroups
//     cost a load and a compare).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define NR_BUCKETS 32
#define CACHE_SIZE 4
#define NO_SLOT 0xffffffff

// cg_stats is one cgroup's counters on one CPU: 5 cache lines, so CPUs never
// share a line.
struct cg_stats {
	__u64 hist[NR_BUCKETS]; // run-queue waits, bucket i = [2^i, 2^(i+1)) ns
	__u64 run_delay_ns;     // sum of waits
	__u64 waits;            // number of waits
	__u64 oncpu_ns;         // on-CPU time, charged at switch-out and at ticks
	__u64 wakeups;          // sched_wakeup + sched_wakeup_new
	__u64 switches;         // times a task of the cgroup got a CPU
	__u64 _pad[3];
};

struct oom_event {
	__u64 cgroup_id;     // cpu hierarchy (v1) or unified (v2) id
	__u64 mem_cgroup_id; // memory hierarchy (v1) or unified (v2) id
	__u64 time_ns;       // CLOCK_MONOTONIC
	__u32 pid;           // thread group id
	__u32 tid;
	__u32 uid;
	__u8 comm[16];
};

struct cache_entry {
	__u64 cgid;
	__u32 slot;
	__u32 _pad;
};

struct cpu_state {
	struct cache_entry cache[CACHE_SIZE];
	__u64 cur_task;    // task switched in last on this CPU
	__u64 cur_runtime; // its se.sum_exec_runtime when last charged
	__u32 cur_slot;    // its slot or NO_SLOT
	__u32 gen;         // tracked_gen the cache was filled under
};

// Written by user space before load.
const volatile __u32 nr_slots = 1;
const volatile bool cgroup_v2 = false;

// Bumped by user space after every change of the tracked map: per-CPU caches
// (and the slot of the running task) are dropped when it moves.
volatile __u32 tracked_gen SEC(".data.gen");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);   // cgroup id
	__type(value, __u32); // slot
} tracked SEC(".maps");

// Index cpu*nr_slots + slot; max_entries set by user space.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cg_stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_state);
} cpu_states SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} oom_events SEC(".maps");

// Force BTF for the types user space decodes.
const struct cg_stats *unused_cg_stats __attribute__((unused));
const struct oom_event *unused_oom_event __attribute__((unused));

static __always_inline __u64 task_cgroup_id(struct task_struct *t, int subsys)
{
	if (cgroup_v2)
		return t->cgroups->dfl_cgrp->kn->id;
	return t->cgroups->subsys[subsys]->cgroup->kn->id;
}

static __always_inline __u64 cpu_cgroup_id(struct task_struct *t)
{
	return task_cgroup_id(t, bpf_core_enum_value(enum cgroup_subsys_id, cpu_cgrp_id));
}

// Bound for a slice charged without a switch-in event: anything larger is a
// stale slice start, not CPU time.
#define MAX_UNTRACED_SLICE_NS (1000ULL * 1000 * 1000)

#define SCHED_NORMAL 0
#define SCHED_BATCH 3
#define SCHED_IDLE 5

static __always_inline bool is_fair(struct task_struct *t)
{
	unsigned int p = t->policy;

	return p == SCHED_NORMAL || p == SCHED_BATCH || p == SCHED_IDLE;
}

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r, shift;

	r = (v > 0xffffffff) << 5;
	v >>= r;
	shift = (v > 0xffff) << 4;
	v >>= shift;
	r |= shift;
	shift = (v > 0xff) << 3;
	v >>= shift;
	r |= shift;
	shift = (v > 0xf) << 2;
	v >>= shift;
	r |= shift;
	shift = (v > 0x3) << 1;
	v >>= shift;
	r |= shift;
	r |= (v >> 1);
	return r;
}

static __always_inline struct cpu_state *this_cpu_state(void)
{
	__u32 zero = 0;
	struct cpu_state *cs = bpf_map_lookup_elem(&cpu_states, &zero);

	if (cs && cs->gen != tracked_gen) {
		for (int i = 0; i < CACHE_SIZE; i++) {
			cs->cache[i].cgid = 0;
			cs->cache[i].slot = NO_SLOT;
		}
		cs->cur_slot = NO_SLOT;
		cs->gen = tracked_gen;
	}
	return cs;
}

static __always_inline __u32 slot_of(struct cpu_state *cs, __u64 cgid)
{
	struct cache_entry *e = &cs->cache[cgid & (CACHE_SIZE - 1)];
	__u32 *slot;

	if (e->cgid == cgid)
		return e->slot;
	slot = bpf_map_lookup_elem(&tracked, &cgid);
	e->cgid = cgid;
	e->slot = slot ? *slot : NO_SLOT;
	return e->slot;
}

static __always_inline struct cg_stats *stats_of(__u32 slot)
{
	__u32 idx = bpf_get_smp_processor_id() * nr_slots + slot;

	return bpf_map_lookup_elem(&stats, &idx);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct cpu_state *cs = this_cpu_state();
	struct cg_stats *st;
	__u64 queued, now;
	__u32 slot;

	if (!cs)
		return 0;
	if (cs->cur_task == (__u64)prev) {
		if (cs->cur_slot != NO_SLOT) {
			st = stats_of(cs->cur_slot);
			if (st)
				st->oncpu_ns += prev->se.sum_exec_runtime - cs->cur_runtime;
		}
	} else if (prev->pid != 0) {
		// prev got this CPU without a sched_switch event here (seen on
		// this kernel: about 1 switch in 1000). Nothing was charged for
		// its slice: charge it whole from the scheduler's own slice start,
		// which only fair-class tasks maintain.
		slot = slot_of(cs, cpu_cgroup_id(prev));
		if (slot != NO_SLOT && is_fair(prev)) {
			queued = prev->se.sum_exec_runtime - prev->se.prev_sum_exec_runtime;
			st = stats_of(slot);
			if (st && queued < MAX_UNTRACED_SLICE_NS)
				st->oncpu_ns += queued;
		}
	}
	cs->cur_task = (__u64)next;
	cs->cur_slot = NO_SLOT;
	if (next->pid == 0) // idle
		return 0;
	cs->cur_runtime = next->se.sum_exec_runtime;
	slot = slot_of(cs, cpu_cgroup_id(next));
	if (slot == NO_SLOT)
		return 0;
	st = stats_of(slot);
	if (!st)
		return 0;
	cs->cur_slot = slot;
	st->switches++;
	// sched_info_arrive() runs after this tracepoint: last_queued is still
	// the enqueue stamp, in the run-queue clock updated by __schedule().
	queued = next->sched_info.last_queued;
	if (!queued)
		return 0;
	now = next->se.cfs_rq->rq->clock;
	if (now <= queued)
		return 0;
	now -= queued;
	slot = log2_u64(now);
	if (slot >= NR_BUCKETS)
		slot = NR_BUCKETS - 1;
	// The mask changes nothing but lets older verifiers see the bound:
	// clang checks a zero-extended copy of slot and indexes with the
	// original, which 6.1's verifier rejects ("R3 unbounded memory
	// access"). The empty asm keeps clang from dropping the mask.
	asm volatile("" : "+r"(slot));
	st->hist[slot & (NR_BUCKETS - 1)]++;
	st->run_delay_ns += now;
	st->waits++;
	return 0;
}

static __always_inline void count_wakeup(struct task_struct *p)
{
	struct cpu_state *cs = this_cpu_state();
	struct cg_stats *st;
	__u32 slot;

	if (!cs)
		return;
	slot = slot_of(cs, cpu_cgroup_id(p));
	if (slot == NO_SLOT)
		return;
	st = stats_of(slot);
	if (st)
		st->wakeups++;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	count_wakeup(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	count_wakeup(p);
	return 0;
}

// Charges the running slice at every timer expiry (the scheduler tick among
// them), so a task that is never descheduled still shows its CPU time within
// a tick instead of at its next switch.
SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(hrtimer_expire_entry)
{
	struct cpu_state *cs = this_cpu_state();
	struct task_struct *cur;
	struct cg_stats *st;
	__u64 rt;

	if (!cs || cs->cur_slot == NO_SLOT)
		return 0;
	cur = bpf_get_current_task_btf();
	if ((__u64)cur != cs->cur_task)
		return 0;
	st = stats_of(cs->cur_slot);
	if (!st)
		return 0;
	rt = cur->se.sum_exec_runtime;
	st->oncpu_ns += rt - cs->cur_runtime;
	cs->cur_runtime = rt;
	return 0;
}

// A running task that moves itself to another cgroup (a container's init
// joining its cgroup) is charged to the old cgroup up to the move and to the
// new one after, instead of to the old one until its next switch.
SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(cgroup_attach_task, struct cgroup *dst, const char *path, struct task_struct *task)
{
	struct cpu_state *cs = this_cpu_state();
	struct cg_stats *st;
	__u64 rt;

	if (!cs || cs->cur_task != (__u64)task)
		return 0;
	rt = task->se.sum_exec_runtime;
	if (cs->cur_slot != NO_SLOT) {
		st = stats_of(cs->cur_slot);
		if (st)
			st->oncpu_ns += rt - cs->cur_runtime;
	}
	cs->cur_runtime = rt;
	cs->cur_slot = slot_of(cs, cpu_cgroup_id(task));
	return 0;
}

SEC("tp_btf/mark_victim")
int BPF_PROG(mark_victim, struct task_struct *task, uid_t uid)
{
	struct oom_event *e;

	e = bpf_ringbuf_reserve(&oom_events, sizeof(*e), 0);
	if (!e)
		return 0;
	e->cgroup_id = cpu_cgroup_id(task);
	e->mem_cgroup_id = task_cgroup_id(task, bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id));
	e->time_ns = bpf_ktime_get_ns();
	e->pid = task->tgid;
	e->tid = task->pid;
	e->uid = uid;
	BPF_CORE_READ_STR_INTO(&e->comm, task, comm);
	bpf_ringbuf_submit(e, 0);
	return 0;
}
