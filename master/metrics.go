package master

import (
	"sync"
	"time"
)

// The master's figures as plain values: counted under the master's lock
// (or, for the store's writes, their own), read by Metrics. The transport
// exposes them (GET /metrics, master/transport): the domain names no
// exposition format.

// Histogram is a distribution of durations in seconds: Counts[i] are
// the observations of at most Bounds[i] (cumulative, as Prometheus's
// buckets), Count and Sum all of them.
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
	Sum    float64
}

// newHistogram has buckets from start doubling n times.
func newHistogram(start float64, n int) Histogram {
	h := Histogram{Bounds: make([]float64, n), Counts: make([]uint64, n)}
	for i := range h.Bounds {
		h.Bounds[i] = start
		start *= 2
	}
	return h
}

func (h *Histogram) observe(d time.Duration) {
	s := d.Seconds()
	for i, b := range h.Bounds {
		if s <= b {
			h.Counts[i]++
		}
	}
	h.Count++
	h.Sum += s
}

func (h Histogram) clone() Histogram {
	h.Bounds, h.Counts = append([]float64(nil), h.Bounds...), append([]uint64(nil), h.Counts...)
	return h
}

// Metrics are the master's figures at one moment.
type Metrics struct {
	// Cycles are the allocation cycles' durations (50 µs … 1.6 s).
	Cycles Histogram
	// StoreWrites are the store's write latencies as the master sees
	// them, fencing and network included (100 µs … 0.8 s).
	StoreWrites Histogram
	// Offers made, declined and rescinded; tasks launched through ACCEPT.
	OffersMade, OffersDeclined, OffersRescinded uint64
	Launches                                    uint64
	// Gauges: agents with a live link, frameworks with a live
	// subscription, offers outstanding, agents of the registry not
	// re-registered since the master started or was elected.
	AgentsConnected, FrameworksConnected, OffersOutstanding, AgentsAwaited int
	// RegistrationsAdmitted are the agents' registrations admitted and
	// under way (at most Options.RegistrationSlots).
	RegistrationsAdmitted int
}

// counters are the figures Master.mu guards; storeWrites has its own
// lock (writes are timed outside the master's).
type counters struct {
	cycles                   Histogram
	made, declined, rescinds uint64
	launches                 uint64

	storeMu     sync.Mutex
	storeWrites Histogram
}

func newCounters() *counters {
	return &counters{cycles: newHistogram(50e-6, 16), storeWrites: newHistogram(100e-6, 14)}
}

// observeStoreWrite records one store write that began at start.
func (c *counters) observeStoreWrite(start time.Time) {
	d := time.Since(start)
	c.storeMu.Lock()
	defer c.storeMu.Unlock()
	c.storeWrites.observe(d)
}

// Metrics returns the master's figures. It takes the master's lock for
// a moment (no store call is ever made under it: writes.go). Safe for
// concurrent use.
func (m *Master) Metrics() Metrics {
	m.metrics.storeMu.Lock()
	store := m.metrics.storeWrites.clone()
	m.metrics.storeMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	x := Metrics{Cycles: m.metrics.cycles.clone(), StoreWrites: store, OffersMade: m.metrics.made,
		OffersDeclined: m.metrics.declined, OffersRescinded: m.metrics.rescinds, Launches: m.metrics.launches,
		OffersOutstanding: len(m.offers), AgentsAwaited: len(m.awaited), RegistrationsAdmitted: m.admission.inUse()}
	for _, a := range m.agents {
		if a.out != nil {
			x.AgentsConnected++
		}
	}
	for _, f := range m.frameworks {
		if f.out != nil {
			x.FrameworksConnected++
		}
	}
	return x
}
