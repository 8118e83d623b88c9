// Package monitor samples per-container and host statistics at a fixed
// interval, keeps a bounded history per container and builds the Usage
// snapshot (Mesos's ResourceUsage) that resource estimators and QoS
// controllers decide from. It also exports what it sees to Prometheus with
// cAdvisor-compatible names (container_*) and brim's own series (brim_*).
//
// The monitor owns: the sampling loop, the history rings, the host sampler
// (gopsutil), the hooks through which other signal providers (the eBPF
// run-queue reader, application-reported latency) add to each sample, and
// the Prometheus collector.
//
// RunQueueSignal is the SignalSource of run-queue latency and on-CPU time
// over the eBPF monitor or the schedstat fallback (OpenRunQueueSource picks
// one and logs why); with the fallback the three quantiles are the
// interval's mean wait and Source says "schedstat-mean".
//
// It never acts on what it sees: it does not resize, freeze or kill
// anything, and it reads containers only through the Source it is given
// (the agent adapts the containerizer to it).
//
// Sentinels: ErrNotFound (a container the monitor does not know, e.g. in
// ReportLatency; a Source returns an error wrapping
// internal/errdefs.ErrContainerNotFound — the agent's, the
// containerizer's or an isolator's "not found" — for a container that
// disappeared between List and Usage), ErrNotSupported (a host figure
// this platform cannot provide).
//
// ErrNotSupported is an alias of internal/errdefs.ErrNotSupported.
// ErrNotFound wraps internal/errdefs.ErrContainerNotFound, so errors.Is
// matches it with every other "container not found", but is narrower
// itself: the agent tells "not sampled yet" (retry after a round) from
// "no such container" by it.
package monitor
