package agentd

import (
	"context"
	"crypto/sha256"
	"math"
	"time"
)

// perfBenchTime is how long the agent measures its performance score at
// start when --perf-score is 0.
const perfBenchTime = 300 * time.Millisecond

// perfReference is the SHA-256 throughput of one core that scores 1.
const perfReference = 100 << 20 // bytes per second

// MeasurePerfScore measures the machine performance score for meDRF, as
// the meDRF seed does with a benchmark at the node's start: the SHA-256
// throughput of one core over d (capped at one second; less if ctx ends),
// relative to 100 MiB/s, rounded to two decimals and at least 0.01. The
// master normalizes scores by their mean, so only ratios between agents
// matter. It blocks one core for d.
func MeasurePerfScore(ctx context.Context, d time.Duration) float64 {
	d = min(max(d, 10*time.Millisecond), time.Second)
	var buf [64 << 10]byte
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	start := time.Now()
	var n int64
	for time.Since(start) < d && ctx.Err() == nil {
		sum := sha256.Sum256(buf[:])
		buf[0] ^= sum[0]
		n += int64(len(buf))
	}
	rate := float64(n) / time.Since(start).Seconds()
	return max(math.Round(rate/perfReference*100)/100, 0.01)
}
