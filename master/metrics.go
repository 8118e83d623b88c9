package master

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/brimnode/brim/internal/buildinfo"
	"github.com/brimnode/brim/internal/sdnotify"
)

// metrics are the master's Prometheus series (GET /metrics). Safe for
// concurrent use.
type metrics struct {
	reg          *prometheus.Registry
	cycle        prometheus.Histogram
	offers       *prometheus.CounterVec
	launches     prometheus.Counter
	storeWrite   prometheus.Histogram
	authFailures *prometheus.CounterVec
}

func newMetrics(m *Master) *metrics {
	x := &metrics{
		reg: prometheus.NewRegistry(),
		cycle: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "brim_master_allocation_cycle_seconds", Help: "Duration of the allocation cycles.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16), // 50 µs … 1.6 s
		}),
		offers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brim_master_offers_total", Help: "Offers by event: made, declined, rescinded.",
		}, []string{"event"}),
		launches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "brim_master_task_launches_total", Help: "Tasks launched through ACCEPT.",
		}),
		storeWrite: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "brim_master_store_write_seconds", Help: "Latency of the store's write transactions.",
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 14), // 100 µs … 0.8 s
		}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brim_master_auth_failures_total", Help: "Refused requests by transport (grpc, http) and kind (unauthenticated, forbidden).",
		}, []string{"transport", "kind"}),
	}
	for _, e := range []string{"made", "declined", "rescinded"} {
		x.offers.WithLabelValues(e)
	}
	connected := func(name, help string, count func() int) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			m.mu.Lock()
			defer m.mu.Unlock()
			return float64(count())
		})
	}
	x.reg.MustRegister(x.cycle, x.offers, x.launches, x.storeWrite, x.authFailures,
		connected("brim_master_agents_connected", "Agents with a live link.", func() int {
			n := 0
			for _, a := range m.agents {
				if a.out != nil {
					n++
				}
			}
			return n
		}),
		connected("brim_master_frameworks_connected", "Frameworks with a live subscription.", func() int {
			n := 0
			for _, f := range m.frameworks {
				if f.out != nil {
					n++
				}
			}
			return n
		}),
		connected("brim_master_offers_outstanding", "Offers made and not yet used, declined or rescinded.", func() int { return len(m.offers) }),
		connected("brim_master_agents_awaited", "Agents of the registry not re-registered since the master started or was elected (0 once the re-registration window closed).",
			func() int { return len(m.awaited) }),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return x
}

// authFailure counts err if it is an authentication or ACL refusal.
func (x *metrics) authFailure(transport string, err error) {
	switch {
	case errors.Is(err, ErrUnauthenticated):
		x.authFailures.WithLabelValues(transport, "unauthenticated").Inc()
	case errors.Is(err, ErrForbidden):
		x.authFailures.WithLabelValues(transport, "forbidden").Inc()
	}
}

// observeStoreWrite records one store write that began at start.
func (x *metrics) observeStoreWrite(start time.Time) {
	x.storeWrite.Observe(time.Since(start).Seconds())
}

// Metrics is the master's Prometheus registry (served on GET /metrics).
func (m *Master) Metrics() *prometheus.Registry { return m.metrics.reg }

// SetReady says whether the master serves: Start sets it once the store
// is loaded and the port listens. GET /health answers 200 only then.
func (m *Master) SetReady(ready bool) { m.ready.Store(ready) }

// grpcError is toStatus, counting authentication and ACL refusals.
func (m *Master) grpcError(err error) error {
	if err != nil {
		m.metrics.authFailure("grpc", err)
	}
	return toStatus(err)
}

// serviceRoutes adds /health, /version and /metrics to mux; none needs
// credentials (health checks and scrapers have none).
func (m *Master) serviceRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if !m.ready.Load() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, buildinfo.Get())
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.metrics.reg, promhttp.HandlerOpts{}))
}

// watchdog beats the "allocation" loop while allocation cycles complete
// (each takes the master's lock: a wedged domain stops them), so that
// systemd's watchdog pings stop when the master wedges.
func (m *Master) watchdog(ctx context.Context, n *sdnotify.Notifier, interval time.Duration) {
	loop := n.Loop("allocation", max(2*interval, 3*m.opts.AllocationInterval))
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	last := -1
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if cycles, _, _, _, _ := m.CycleStats(); cycles != last {
			last = cycles
			loop.Beat()
		}
	}
}
