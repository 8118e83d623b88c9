package pressure

import (
	"context"
	"time"

	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/monitor"
)

// stallSample is a container's cumulative PSI stall time when sampled.
type stallSample struct {
	total time.Duration
	at    time.Time
}

// stallTracker turns cumulative PSI totals into the fraction of the time
// between two samples that some task of a container stalled.
type stallTracker struct {
	last map[string]stallSample
}

// stallTotal picks one resource's cumulative "some" stall time.
type stallTotal func(*isolator.Statistics) time.Duration

func memoryStall(s *isolator.Statistics) time.Duration { return s.MemPressure.SomeTotal }
func ioStall(s *isolator.Statistics) time.Duration     { return s.IOPressure.SomeTotal }

func (s *stallTracker) reset() { clear(s.last) }

// add records container id's sample st and returns its stall fraction
// since its previous sample; ok is false for a first sample, a sample
// without PSI, or counters that went backwards (a new group).
func (s *stallTracker) add(id string, st *isolator.Statistics, now time.Time, total stallTotal) (float64, bool) {
	if !st.HasPressure {
		delete(s.last, id)
		return 0, false
	}
	at := st.Timestamp
	if at.IsZero() {
		at = now
	}
	cur := stallSample{total: total(st), at: at}
	prev, ok := s.last[id]
	s.last[id] = cur
	if !ok || !cur.at.After(prev.at) || cur.total < prev.total {
		return 0, false
	}
	return min(1, float64(cur.total-prev.total)/float64(cur.at.Sub(prev.at))), true
}

// keep forgets the containers not in ids.
func (s *stallTracker) keep(ids map[string]bool) {
	for id := range s.last {
		if !ids[id] {
			delete(s.last, id)
		}
	}
}

// worst samples cs and returns the container that stalled for the largest
// fraction of the time since its previous sample, and that fraction ("" if
// none is known). Containers that fail to sample are skipped.
func (s *stallTracker) worst(ctx context.Context, src Source, cs []monitor.ContainerInfo, now time.Time, total stallTotal) (string, float64) {
	var (
		worst string
		frac  float64
	)
	seen := make(map[string]bool, len(cs))
	for _, c := range cs {
		seen[c.ID] = true
		st, err := src.Usage(ctx, c.ID)
		if err != nil {
			delete(s.last, c.ID)
			continue
		}
		if f, ok := s.add(c.ID, st, now, total); ok && (worst == "" || f > frac) {
			worst, frac = c.ID, f
		}
	}
	s.keep(seen)
	return worst, frac
}
