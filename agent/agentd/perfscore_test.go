package agentd

import (
	"context"
	"testing"
	"time"
)

// TestMeasurePerfScore: the benchmark gives a positive score, and a
// longer bench time than a second is cut to one second.
func TestMeasurePerfScore(t *testing.T) {
	if s := MeasurePerfScore(context.Background(), 20*time.Millisecond); s <= 0 {
		t.Fatalf("score %v, want > 0", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if s := MeasurePerfScore(ctx, time.Hour); s <= 0 {
		t.Fatalf("score %v after a cancelled context, want > 0 (the floor)", s)
	}
	if d := time.Since(start); d > 5*time.Second { // generous: bounded by the cap and ctx, not timed
		t.Fatalf("benchmark ran %s with a cancelled context", d)
	}
}
