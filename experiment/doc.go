// Package experiment runs colocation experiments a researcher can trust:
// a latency-critical (LC) command beside best-effort antagonists on
// revocable resources, under each QoS controller of a spec, repeated in
// interleaved trials, each with a fresh agent (`brim experiment run`).
//
// A run records raw data only (record.go): the LC's latency windows as it
// wrote them, the node's cpu use, every correction the agent applied, and
// what each antagonist did. The figures (analyze.go: ratios over the
// run's own solo median, breaches of the SLO, the solo spread that says
// how noisy a window is without any antagonist), the tables and the plots
// (plot.go) are computed from those files alone, so a finished experiment
// can be reported again (`brim experiment report DIR`).
//
// Nothing is built in: the LC, its load generator and the antagonists are
// commands named by the spec (docs/experiments.md).
package experiment
