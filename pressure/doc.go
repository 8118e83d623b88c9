// Package pressure keeps an oversubscribed node's memory and disk safe for
// its non-revocable work, beside the QoS controller (package qos), with
// two small guards the agent runs when oversubscription is on:
//
//   - MemoryGuard evicts revocable containers, largest working set first,
//     when the memory the containers share (brim's parent group, or the
//     node) is nearly full or a non-revocable container stalls on memory
//     (PSI), so that revocable work goes before the kernel's OOM killer
//     has to pick anyone. An eviction ends the task with reason
//     CONTAINER_PREEMPTED and the message "evicted: memory pressure (…)".
//   - IOGuard throttles the IO of revocable containers that are doing IO
//     (v1 blkio.throttle.*, v2 io.max) while a non-revocable container
//     stalls on IO, and lifts the throttle once it has been healthy for a
//     while.
//
// Both read the containers through a Source (the agent implements it, as
// it does monitor.Source) and act through one-method interfaces (Evictor,
// IOThrottler). They keep no state across agent restarts: the cgroup
// isolator lifts io throttles on recovery.
//
// It never decides what the QoS controller does and never touches cgroup
// files itself. Sentinel: ErrInvalidConfig.
package pressure
