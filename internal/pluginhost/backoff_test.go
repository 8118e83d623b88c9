package pluginhost

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/brimnode/brim/pluginpb"
)

// TestRestartBackoffJittered: a plugin that cannot start is retried after
// a delay that doubles per consecutive failure up to MaxBackoff and is
// jittered down by up to BackoffJitter, so restarts do not come in step;
// no call starts it before the delay has passed.
func TestRestartBackoffJittered(t *testing.T) {
	const minB, maxB = time.Second, 8 * time.Second
	for _, r := range []float64{0, 0.5, 0.999} {
		now := time.Unix(1_000_000, 0)
		s := NewSupervisor(Config{
			Path: filepath.Join(t.TempDir(), "no-such-plugin"), Name: pluginpb.EstimatorPlugin,
			MinBackoff: minB, MaxBackoff: maxB,
			Now: func() time.Time { return now }, Rand: func() float64 { return r },
		}, pluginpb.NewEstimatorClient, nil)
		call := func() error {
			return s.Call(context.Background(), func(context.Context, pluginpb.EstimatorClient) error { return nil })
		}
		for n := 1; n <= 6; n++ {
			if err := call(); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("r=%v failure %d: %v, want ErrUnavailable", r, n, err)
			}
			full := min(minB<<(n-1), maxB)
			got := s.nextStart.Sub(now)
			want := full - time.Duration(float64(full)*BackoffJitter*r)
			if got != want || got > full || got < time.Duration(float64(full)*(1-BackoffJitter)) {
				t.Fatalf("r=%v failure %d: restart in %v, want %v (of %v)", r, n, got, want, full)
			}
			// Before the delay: refused without a start attempt.
			now = now.Add(got - time.Millisecond)
			if err := call(); !errors.Is(err, ErrUnavailable) || s.failures != n {
				t.Fatalf("r=%v: call before the backoff: %v, failures %d, want %d", r, err, s.failures, n)
			}
			now = now.Add(time.Millisecond)
		}
	}
}

// TestRestartDelaySpread: many supervisors failing at once restart at
// different times (the default Rand).
func TestRestartDelaySpread(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 20 {
		s := NewSupervisor(Config{Path: "x", Name: pluginpb.EstimatorPlugin}, pluginpb.NewEstimatorClient, nil)
		d := restartDelay(s.cfg.MinBackoff, s.cfg.MaxBackoff, 3, s.cfg.Rand())
		if full := 4 * time.Second; d > full || d < time.Duration(float64(full)*(1-BackoffJitter)) {
			t.Fatalf("delay %v outside [%v, %v]", d, time.Duration(float64(full)*(1-BackoffJitter)), full)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Fatalf("20 supervisors all chose the same delay %v", seen)
	}
}
