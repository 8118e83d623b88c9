package monitor

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Collector exports the monitor's latest samples to Prometheus: per
// container with cAdvisor's names and labels (id = cgroup path, name), and
// brim's own series (brim_*). It reads the latest round on each scrape and
// registers nothing per sample. Safe for concurrent use.
type Collector struct {
	m *Monitor
}

// NewCollector returns the collector of m.
func NewCollector(m *Monitor) *Collector { return &Collector{m: m} }

var _ prometheus.Collector = (*Collector)(nil)

var (
	cLabels = []string{"id", "name", "brim_revocable"}

	descCPUUsage     = prometheus.NewDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", append(cLabels, "cpu"), nil)
	descCPUUser      = prometheus.NewDesc("container_cpu_user_seconds_total", "Cumulative user cpu time consumed in seconds.", cLabels, nil)
	descCPUSystem    = prometheus.NewDesc("container_cpu_system_seconds_total", "Cumulative system cpu time consumed in seconds.", cLabels, nil)
	descCFSPeriods   = prometheus.NewDesc("container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals.", cLabels, nil)
	descCFSThrottled = prometheus.NewDesc("container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals.", cLabels, nil)
	descCFSThrTime   = prometheus.NewDesc("container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled.", cLabels, nil)
	descCPUQuota     = prometheus.NewDesc("container_spec_cpu_quota_cpus", "CPU limit of the container in cpus.", cLabels, nil)
	descCPUShares    = prometheus.NewDesc("container_spec_cpu_shares", "CPU share of the container (1024 per allocated cpu).", cLabels, nil)

	descMemUsage   = prometheus.NewDesc("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed.", cLabels, nil)
	descMemWS      = prometheus.NewDesc("container_memory_working_set_bytes", "Current working set in bytes.", cLabels, nil)
	descMemRSS     = prometheus.NewDesc("container_memory_rss", "Size of RSS in bytes.", cLabels, nil)
	descMemCache   = prometheus.NewDesc("container_memory_cache", "Number of bytes of page cache memory.", cLabels, nil)
	descMemMax     = prometheus.NewDesc("container_memory_max_usage_bytes", "Maximum memory usage recorded in bytes.", cLabels, nil)
	descMemLimit   = prometheus.NewDesc("container_spec_memory_limit_bytes", "Memory limit for the container.", cLabels, nil)
	descOOMEvents  = prometheus.NewDesc("container_oom_events_total", "Count of out of memory events observed for the container.", cLabels, nil)
	descProcesses  = prometheus.NewDesc("container_processes", "Number of processes (tasks) running inside the container.", cLabels, nil)
	descTasksLimit = prometheus.NewDesc("container_spec_pids_limit", "Maximum number of tasks in the container.", cLabels, nil)

	descPSIWaiting = prometheus.NewDesc("container_pressure_cpu_waiting_seconds_total", "Total time duration tasks in the container have waited due to CPU congestion.", cLabels, nil)
	descPSICPUStl  = prometheus.NewDesc("container_pressure_cpu_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to CPU congestion.", cLabels, nil)
	descPSIMemWait = prometheus.NewDesc("container_pressure_memory_waiting_seconds_total", "Total time duration tasks in the container have waited due to memory congestion.", cLabels, nil)
	descPSIMemStl  = prometheus.NewDesc("container_pressure_memory_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to memory congestion.", cLabels, nil)
	descPSIIOWait  = prometheus.NewDesc("container_pressure_io_waiting_seconds_total", "Total time duration tasks in the container have waited due to IO congestion.", cLabels, nil)
	descPSIIOStl   = prometheus.NewDesc("container_pressure_io_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to IO congestion.", cLabels, nil)

	nLabels        = append(append([]string(nil), cLabels...), "interface")
	descNetRx      = prometheus.NewDesc("container_network_receive_bytes_total", "Cumulative count of bytes received.", nLabels, nil)
	descNetRxPkts  = prometheus.NewDesc("container_network_receive_packets_total", "Cumulative count of packets received.", nLabels, nil)
	descNetRxDrop  = prometheus.NewDesc("container_network_receive_packets_dropped_total", "Cumulative count of packets dropped while receiving.", nLabels, nil)
	descNetRxErr   = prometheus.NewDesc("container_network_receive_errors_total", "Cumulative count of errors encountered while receiving.", nLabels, nil)
	descNetTx      = prometheus.NewDesc("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted.", nLabels, nil)
	descNetTxPkts  = prometheus.NewDesc("container_network_transmit_packets_total", "Cumulative count of packets transmitted.", nLabels, nil)
	descNetTxDrop  = prometheus.NewDesc("container_network_transmit_packets_dropped_total", "Cumulative count of packets dropped while transmitting.", nLabels, nil)
	descNetTxErr   = prometheus.NewDesc("container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting.", nLabels, nil)
	descLastSeen   = prometheus.NewDesc("container_last_seen", "Last time the container was seen by the monitor (unix seconds).", cLabels, nil)
	descStartTime  = prometheus.NewDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds.", cLabels, nil)
	descRunQueue   = prometheus.NewDesc("brim_container_runqueue_latency_seconds", "Run-queue (scheduling) latency of the container over the last interval.", append(cLabels, "percentile", "source"), nil)
	descAppLatency = prometheus.NewDesc("brim_container_app_latency_seconds", "Latency the application reported through the agent API.", append(cLabels, "percentile"), nil)
	descRQHist     = prometheus.NewDesc("brim_runqueue_latency_seconds", "Run-queue (scheduling) latency of the container's tasks since it was first seen.", append(cLabels, "source"), nil)
	descOnCPU      = prometheus.NewDesc("brim_container_oncpu_seconds_total", "On-cpu time measured by the eBPF monitor.", cLabels, nil)

	descSource     = prometheus.NewDesc("brim_monitor_source", "Run-queue latency sources in use (1 per source).", []string{"source"}, nil)
	descContainers = prometheus.NewDesc("brim_monitor_containers", "Containers sampled in the last round.", nil, nil)
	descRingBytes  = prometheus.NewDesc("brim_monitor_history_bytes", "Memory held by the history rings (slots only).", nil, nil)
	descHostLoad   = prometheus.NewDesc("brim_host_load", "Host load average.", []string{"window"}, nil)
	descHostBusy   = prometheus.NewDesc("brim_host_cpu_busy_ratio", "Fraction of all host cpus busy over the last interval.", nil, nil)
	descHostMem    = prometheus.NewDesc("brim_host_memory_bytes", "Host memory.", []string{"kind"}, nil)
	descAgentCPU   = prometheus.NewDesc("brim_agent_cpu_seconds_total", "CPU time used by the agent process.", []string{"mode"}, nil)
	descAgentMem   = prometheus.NewDesc("brim_agent_memory_bytes", "Resident memory of the agent process.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
	c.m.samples.Describe(ch)
	c.m.sampleErrors.Describe(ch)
	c.m.duration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.m.samples.Collect(ch)
	c.m.sampleErrors.Collect(ch)
	c.m.duration.Collect(ch)

	u := c.m.Usage()
	sources := map[string]bool{}
	ringBytes := 0
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
	}
	for i := range u.Containers {
		cu := &u.Containers[i]
		ringBytes += cu.History.MemoryBytes()
		id := cu.CgroupPath
		if id == "" {
			id = cu.ID
		}
		l := []string{id, cu.Name, strconv.FormatBool(cu.Revocable)}
		s := &cu.Latest
		gauge(descCPUShares, float64(cu.Limits.MilliCPUs)*1024/1000, l...)
		if !cu.StartedAt.IsZero() {
			gauge(descStartTime, float64(cu.StartedAt.UnixNano())/1e9, l...)
		}
		if s.Timestamp.IsZero() {
			continue
		}
		gauge(descLastSeen, float64(s.Timestamp.Unix()), l...)
		if s.HasCPU {
			counter(descCPUUsage, float64(s.CPUUsageNanos)/1e9, append(l, "total")...)
			counter(descCPUUser, s.CPUUserSeconds, l...)
			counter(descCPUSystem, s.CPUSystemSeconds, l...)
			counter(descCFSPeriods, float64(s.CPUPeriods), l...)
			counter(descCFSThrottled, float64(s.CPUThrottled), l...)
			counter(descCFSThrTime, s.CPUThrottledTime.Seconds(), l...)
			if s.CPULimit > 0 {
				gauge(descCPUQuota, s.CPULimit, l...)
			}
		}
		if s.HasMemory {
			gauge(descMemUsage, float64(s.MemUsageBytes), l...)
			gauge(descMemWS, float64(s.MemWorkingSet), l...)
			gauge(descMemRSS, float64(s.MemRSSBytes), l...)
			gauge(descMemCache, float64(s.MemCacheBytes), l...)
			gauge(descMemMax, float64(s.MemMaxUsage), l...)
			gauge(descMemLimit, float64(s.MemLimitBytes), l...)
			counter(descOOMEvents, float64(s.MemOOMKills), l...)
		}
		if s.HasPids {
			gauge(descProcesses, float64(s.Pids), l...)
			if s.PidsLimit > 0 {
				gauge(descTasksLimit, float64(s.PidsLimit), l...)
			}
		}
		if s.HasPressure {
			counter(descPSIWaiting, s.CPUPressure.SomeTotal.Seconds(), l...)
			counter(descPSICPUStl, s.CPUPressure.FullTotal.Seconds(), l...)
			counter(descPSIMemWait, s.MemPressure.SomeTotal.Seconds(), l...)
			counter(descPSIMemStl, s.MemPressure.FullTotal.Seconds(), l...)
			counter(descPSIIOWait, s.IOPressure.SomeTotal.Seconds(), l...)
			counter(descPSIIOStl, s.IOPressure.FullTotal.Seconds(), l...)
		}
		if s.HasNet {
			nl := append(append([]string(nil), l...), "eth0")
			counter(descNetRx, float64(s.NetRxBytes), nl...)
			counter(descNetRxPkts, float64(s.NetRxPackets), nl...)
			counter(descNetRxDrop, float64(s.NetRxDropped), nl...)
			counter(descNetRxErr, float64(s.NetRxErrors), nl...)
			counter(descNetTx, float64(s.NetTxBytes), nl...)
			counter(descNetTxPkts, float64(s.NetTxPackets), nl...)
			counter(descNetTxDrop, float64(s.NetTxDropped), nl...)
			counter(descNetTxErr, float64(s.NetTxErrors), nl...)
		}
		if rq := s.RunQueue; rq != nil {
			sources[rq.Source] = true
			for _, q := range []struct {
				q string
				v float64
			}{{"50", rq.P50.Seconds()}, {"99", rq.P99.Seconds()}, {"99.9", rq.P999.Seconds()}} {
				gauge(descRunQueue, q.v, append(l, q.q, rq.Source)...)
			}
			if rq.Buckets != nil {
				ch <- prometheus.MustNewConstHistogram(descRQHist, rq.Count, rq.Sum.Seconds(), rq.Buckets, append(l, rq.Source)...)
			}
		}
		if s.OnCPU > 0 {
			counter(descOnCPU, s.OnCPU.Seconds(), l...)
		}
		if al := s.AppLatency; al != nil {
			gauge(descAppLatency, al.P50.Seconds(), append(l, "50")...)
			gauge(descAppLatency, al.P99.Seconds(), append(l, "99")...)
			gauge(descAppLatency, al.P999.Seconds(), append(l, "99.9")...)
		}
	}
	for s := range sources {
		gauge(descSource, 1, s)
	}
	gauge(descContainers, float64(len(u.Containers)))
	gauge(descRingBytes, float64(ringBytes))

	h := u.Host
	if !h.Timestamp.IsZero() {
		gauge(descHostLoad, h.Load1, "1m")
		gauge(descHostLoad, h.Load5, "5m")
		gauge(descHostLoad, h.Load15, "15m")
		gauge(descHostBusy, h.CPUBusyFraction)
		gauge(descHostMem, float64(h.MemTotalBytes), "total")
		gauge(descHostMem, float64(h.MemAvailableBytes), "available")
		gauge(descHostMem, float64(h.MemUsedBytes), "used")
	}
	if p, err := readSelf(); err == nil {
		counter(descAgentCPU, p.user, "user")
		counter(descAgentCPU, p.system, "system")
		gauge(descAgentMem, float64(p.rss))
	}
}

// NewRegistry returns a registry with the monitor's collector; the agent
// registers the estimator's and the QoS applier's collectors on it too and
// serves it with Handler.
func NewRegistry(m *Monitor) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(m))
	return reg
}

// Handler serves g in the Prometheus exposition format (the agent mounts it
// at /metrics).
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
