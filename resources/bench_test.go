package resources

import (
	"testing"
	"time"
)

const (
	benchAgent = "cpus:6;mem:18432;disk:10240;ports:[31000-32000];cpus(hdfs):2;mem(hdfs):6144;cpus{REV}:1.5;mem{REV}:2048"
	benchTask  = "cpus:0.5;mem:512;ports:[31005-31006]"
)

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(benchAgent); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkString(b *testing.B) {
	r := MustParse(benchAgent)
	b.ReportAllocs()
	for b.Loop() {
		_ = r.String()
	}
}

func BenchmarkAdd(b *testing.B) {
	agent, task := MustParse(benchAgent), MustParse(benchTask)
	b.ReportAllocs()
	for b.Loop() {
		_ = agent.Add(task)
	}
}

// BenchmarkAddScalars is the master's commonest case: cpus and mem only.
func BenchmarkAddScalars(b *testing.B) {
	a, c := MustParse("cpus:6;mem:18432;disk:10240"), MustParse("cpus:0.5;mem:512")
	b.ReportAllocs()
	for b.Loop() {
		_ = a.Add(c)
	}
}

func BenchmarkSubtract(b *testing.B) {
	agent, task := MustParse(benchAgent), MustParse(benchTask)
	b.ReportAllocs()
	for b.Loop() {
		_ = agent.Subtract(task)
	}
}

func BenchmarkContains(b *testing.B) {
	agent, task := MustParse(benchAgent), MustParse(benchTask)
	b.ReportAllocs()
	for b.Loop() {
		if !agent.Contains(task) {
			b.Fatal("agent does not contain task")
		}
	}
}

// BenchmarkContainsUnnormalized measures the slow path a hand-built
// Resources literal takes.
func BenchmarkContainsUnnormalized(b *testing.B) {
	agent := MustParse(benchAgent)
	task := Resources{{Name: "mem", Scalar: 512000}, {Name: "cpus", Scalar: 500}}
	b.ReportAllocs()
	for b.Loop() {
		if !agent.Contains(task) {
			b.Fatal("agent does not contain task")
		}
	}
}

// BenchmarkAddVsFloatMap compares Add with the naive representation a
// float-based model would use (a fresh map[string]float64 per sum), timed
// in the same run so the ratio survives a noisy machine. It reports
// "ratio" = Add time / map time (below 1 means Add is faster); ns/op
// covers one batch of both.
func BenchmarkAddVsFloatMap(b *testing.B) {
	a, c := MustParse("cpus:6;mem:18432;disk:10240;net_bw:1000"), MustParse("cpus:0.5;mem:512")
	fa := map[string]float64{"cpus": 6, "mem": 18432, "disk": 10240, "net_bw": 1000}
	fc := map[string]float64{"cpus": 0.5, "mem": 512}
	b.ReportAllocs()
	const batch = 32 // amortize the clock reads
	var ours, base time.Duration
	for b.Loop() {
		t0 := time.Now()
		for range batch {
			_ = a.Add(c)
		}
		t1 := time.Now()
		for range batch {
			out := make(map[string]float64, len(fa)+len(fc))
			for k, v := range fa {
				out[k] += v
			}
			for k, v := range fc {
				out[k] += v
			}
		}
		t2 := time.Now()
		ours += t1.Sub(t0)
		base += t2.Sub(t1)
	}
	if base > 0 {
		b.ReportMetric(float64(ours)/float64(base), "ratio")
	}
}
