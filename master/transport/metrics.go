package transport

import (
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/brimnode/brim/internal/buildinfo"
	"github.com/brimnode/brim/master"
)

// metrics are the master's Prometheus series (GET /metrics): the
// domain's figures (master.Metrics, plain values) read at each scrape,
// and the transport's own count of refused requests. Safe for
// concurrent use.
type metrics struct {
	reg          *prometheus.Registry
	authFailures *prometheus.CounterVec
}

func newMetrics(m figures) *metrics {
	x := &metrics{
		reg: prometheus.NewRegistry(),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brim_master_auth_failures_total", Help: "Refused requests by transport (grpc, http) and kind (unauthenticated, forbidden).",
		}, []string{"transport", "kind"}),
	}
	x.reg.MustRegister(x.authFailures, domainCollector{m: m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return x
}

// The domain's series, by name: their help and kind never change.
var (
	descCycle  = prometheus.NewDesc("brim_master_allocation_cycle_seconds", "Duration of the allocation cycles.", nil, nil)
	descStore  = prometheus.NewDesc("brim_master_store_write_seconds", "Latency of the store's write transactions.", nil, nil)
	descOffer  = prometheus.NewDesc("brim_master_offers_total", "Offers by event: made, declined, rescinded.", []string{"event"}, nil)
	descLaunch = prometheus.NewDesc("brim_master_task_launches_total", "Tasks launched through ACCEPT.", nil, nil)
	descAgents = prometheus.NewDesc("brim_master_agents_connected", "Agents with a live link.", nil, nil)
	descFWs    = prometheus.NewDesc("brim_master_frameworks_connected", "Frameworks with a live subscription.", nil, nil)
	descOffers = prometheus.NewDesc("brim_master_offers_outstanding", "Offers made and not yet used, declined or rescinded.", nil, nil)
	descAwait  = prometheus.NewDesc("brim_master_agents_awaited",
		"Agents of the registry not re-registered since the master started or was elected (0 once the re-registration window closed).", nil, nil)
	descAdmitted = prometheus.NewDesc("brim_master_registrations_admitted", "Agents' registrations admitted and under way (at most the registration slots).", nil, nil)
)

// figures is what the collector reads of the domain (*master.Master).
type figures interface{ Metrics() master.Metrics }

// domainCollector exposes the domain's figures, read once per scrape.
type domainCollector struct{ m figures }

func (c domainCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCycle, descStore, descOffer, descLaunch, descAgents, descFWs, descOffers, descAwait, descAdmitted} {
		ch <- d
	}
}

func (c domainCollector) Collect(ch chan<- prometheus.Metric) {
	x := c.m.Metrics()
	ch <- histogram(descCycle, x.Cycles)
	ch <- histogram(descStore, x.StoreWrites)
	for _, e := range []struct {
		event string
		n     uint64
	}{{"made", x.OffersMade}, {"declined", x.OffersDeclined}, {"rescinded", x.OffersRescinded}} {
		ch <- prometheus.MustNewConstMetric(descOffer, prometheus.CounterValue, float64(e.n), e.event)
	}
	ch <- prometheus.MustNewConstMetric(descLaunch, prometheus.CounterValue, float64(x.Launches))
	ch <- prometheus.MustNewConstMetric(descAgents, prometheus.GaugeValue, float64(x.AgentsConnected))
	ch <- prometheus.MustNewConstMetric(descFWs, prometheus.GaugeValue, float64(x.FrameworksConnected))
	ch <- prometheus.MustNewConstMetric(descOffers, prometheus.GaugeValue, float64(x.OffersOutstanding))
	ch <- prometheus.MustNewConstMetric(descAwait, prometheus.GaugeValue, float64(x.AgentsAwaited))
	ch <- prometheus.MustNewConstMetric(descAdmitted, prometheus.GaugeValue, float64(x.RegistrationsAdmitted))
}

// histogram is h as a Prometheus histogram (its buckets are cumulative
// already).
func histogram(d *prometheus.Desc, h master.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = h.Counts[i]
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets)
}

// authFailure counts err if it is an authentication or ACL refusal.
func (x *metrics) authFailure(transport string, err error) {
	switch {
	case errors.Is(err, master.ErrUnauthenticated):
		x.authFailures.WithLabelValues(transport, "unauthenticated").Inc()
	case errors.Is(err, master.ErrForbidden):
		x.authFailures.WithLabelValues(transport, "forbidden").Inc()
	}
}

// Registry is the master's Prometheus registry (served on GET /metrics).
func (a *API) Registry() *prometheus.Registry { return a.metrics.reg }

// grpcError is toStatus, counting authentication and ACL refusals.
func (a *API) grpcError(err error) error {
	if err != nil {
		a.metrics.authFailure("grpc", err)
	}
	return toStatus(err)
}

// serviceRoutes adds /health, /version and /metrics to mux; none needs
// credentials (health checks and scrapers have none).
func (a *API) serviceRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if !a.ready.Load() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, buildinfo.Get())
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics.reg, promhttp.HandlerOpts{}))
}
