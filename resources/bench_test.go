package resources

import "testing"

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
