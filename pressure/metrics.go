package pressure

import "github.com/prometheus/client_golang/prometheus"

var (
	descEvictions   = prometheus.NewDesc("brim_pressure_evictions_total", "Revocable containers evicted by the memory guard (result: ok or error).", []string{"result"}, nil)
	descWakes       = prometheus.NewDesc("brim_pressure_memory_wakes_total", "Memory guard rounds run on the kernel's memory-pressure notification.", nil, nil)
	descIOActions   = prometheus.NewDesc("brim_pressure_io_actions_total", "IO throttles set and lifted by the IO guard (action: throttle or lift).", []string{"action"}, nil)
	descIOThrottled = prometheus.NewDesc("brim_pressure_io_throttled", "Revocable containers whose IO the IO guard throttles now.", nil, nil)
)

// Describe implements prometheus.Collector.
func (g *MemoryGuard) Describe(ch chan<- *prometheus.Desc) {
	ch <- descEvictions
	ch <- descWakes
}

// Collect implements prometheus.Collector.
func (g *MemoryGuard) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	ok, failed := g.evicted, g.failed
	g.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descEvictions, prometheus.CounterValue, float64(ok), "ok")
	ch <- prometheus.MustNewConstMetric(descEvictions, prometheus.CounterValue, float64(failed), "error")
	ch <- prometheus.MustNewConstMetric(descWakes, prometheus.CounterValue, float64(g.wakes.Load()))
}

// Describe implements prometheus.Collector.
func (g *IOGuard) Describe(ch chan<- *prometheus.Desc) {
	ch <- descIOActions
	ch <- descIOThrottled
}

// Collect implements prometheus.Collector.
func (g *IOGuard) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	set, lifted, n := g.nSet, g.nLift, len(g.throttled)
	g.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descIOActions, prometheus.CounterValue, float64(set), "throttle")
	ch <- prometheus.MustNewConstMetric(descIOActions, prometheus.CounterValue, float64(lifted), "lift")
	ch <- prometheus.MustNewConstMetric(descIOThrottled, prometheus.GaugeValue, float64(n))
}
