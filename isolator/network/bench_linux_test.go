//go:build linux

package network

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/brimnode/brim/isolator"
)

// BenchmarkPrepare is the time networking adds to a launch: Prepare with
// network against Prepare without (the baseline, in the same run), with the
// default spare namespaces and with none (what a burst of launches faster
// than the refiller gets). Launches are 20 ms apart (untimed); containers
// are cleaned up in batches of 10, timed apart (cleanup-ms).
func BenchmarkPrepare(b *testing.B) {
	withSpares := newTestIsolator(b, 1000)
	cfg := testConfig(b, 1000)
	cfg.Spares = -1
	noSpares, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { uninstall(b, noSpares) })
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		iso     *Isolator
		network bool
	}{{"none", withSpares, false}, {"network", withSpares, true}, {"network-no-spares", noSpares, true}} {
		b.Run(c.name, func(b *testing.B) {
			var prep, clean []time.Duration
			var batch []string
			flush := func() {
				for _, id := range batch {
					t0 := time.Now()
					if err := c.iso.Cleanup(ctx, id); err != nil {
						b.Fatal(err)
					}
					clean = append(clean, time.Since(t0))
				}
				batch = batch[:0]
			}
			b.StopTimer()
			for n := 0; n < b.N; n++ {
				id := fmt.Sprintf("p%d", n)
				var l isolator.Launch
				time.Sleep(20 * time.Millisecond)
				b.StartTimer()
				t0 := time.Now()
				if err := c.iso.Prepare(ctx, id, isolator.Limits{Network: c.network, NetBandwidthMbit: 100}, &l); err != nil {
					b.Fatal(err)
				}
				prep = append(prep, time.Since(t0))
				b.StopTimer()
				if batch = append(batch, id); len(batch) == 10 {
					flush()
				}
			}
			flush()
			b.ReportMetric(ms(median(prep)), "prepare-ms")
			b.ReportMetric(ms(pct(prep, 90)), "prepare-p90-ms")
			b.ReportMetric(ms(median(clean)), "cleanup-ms")
		})
	}
}

// BenchmarkShaping is the accuracy table: wire rate (class counters) and TCP
// goodput (iperf3) against the limit.
func BenchmarkShaping(b *testing.B) {
	iso := newTestIsolator(b, 1000)
	for _, mbit := range []int64{10, 50, 200} {
		for _, dir := range []string{"egress", "ingress"} {
			b.Run(fmt.Sprintf("%d/%s", mbit, dir), func(b *testing.B) {
				var wire, good float64
				for n := 0; n < b.N; n++ {
					w, g := measureShaping(b, iso, fmt.Sprintf("c%d%s%d", mbit, dir[:2], n), mbit, dir)
					wire, good = wire+w, good+g
				}
				wire, good = wire/float64(b.N), good/float64(b.N)
				b.ReportMetric(wire, "wire-Mbit/s")
				b.ReportMetric(wire/float64(mbit), "wire/limit")
				b.ReportMetric(good, "goodput-Mbit/s")
				b.ReportMetric(good/float64(mbit)/tcpGoodput, "goodput/expected")
			})
		}
	}
}

// BenchmarkLiveResize: how long a limit change takes to show on the wire.
// With the rates measured through the class before the change (r0, over
// 500 ms) and once settled (r1, from 250 to 750 ms after it), and B the
// bytes in the first T = 250 ms after it: effect = (B − r1·T) / (r0 − r1),
// 0 when the new rate applies at once, T when not yet. Measured rates
// rather than the limits keep a CPU-starved sender from passing for a slow
// shaper. The flow is UDP offered above both limits, so the figure is the
// shaper's; tcp-up shows how long a TCP sender takes to use a raised limit.
func BenchmarkLiveResize(b *testing.B) {
	iso := newTestIsolator(b, 1000)
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		from, to int64
		tcp      bool
	}{{"down", 200, 50, false}, {"up", 50, 200, false}, {"tcp-up", 50, 200, true}} {
		b.Run(c.name, func(b *testing.B) {
			var effects []time.Duration
			var calls []time.Duration
			for n := 0; n < b.N; n++ {
				id := fmt.Sprintf("r%s%d", c.name[:2], n)
				f := shapingPair(b, iso, id, isolator.Limits{NetBandwidthMbit: c.from})
				if !c.tcp {
					f.udpMbit = 240
				}
				idx := mustIndex(b, iso, id)
				wait := f.start(ctx, 3*time.Second)
				time.Sleep(1000 * time.Millisecond)
				bm, tm := rawBytes(b, iso, iso.txIFB, idx), time.Now()
				time.Sleep(500 * time.Millisecond)
				b0, t0 := rawBytes(b, iso, iso.txIFB, idx), time.Now()
				if err := iso.Update(ctx, id, isolator.Limits{Network: true, NetBandwidthMbit: c.to}); err != nil {
					b.Fatal(err)
				}
				calls = append(calls, time.Since(t0))
				time.Sleep(time.Until(t0.Add(250 * time.Millisecond)))
				b1, t1 := rawBytes(b, iso, iso.txIFB, idx), time.Now()
				time.Sleep(500 * time.Millisecond)
				b2, t2 := rawBytes(b, iso, iso.txIFB, idx), time.Now()
				if _, err := wait(); err != nil {
					b.Fatal(err)
				}
				r0 := float64(b0-bm) / t0.Sub(tm).Seconds()
				r1 := float64(b2-b1) / t2.Sub(t1).Seconds()
				T := t1.Sub(t0).Seconds()
				te := (float64(b1-b0) - r1*T) / (r0 - r1)
				te = max(0, min(te, T))
				effects = append(effects, time.Duration(te*float64(time.Second)))
			}
			b.ReportMetric(ms(median(effects)), "effect-ms")
			b.ReportMetric(ms(median(effects))/100, "effect/target")
			b.ReportMetric(float64(median(calls).Microseconds()), "update-µs")
		})
	}
}

// BenchmarkBorrowing: a guaranteed container (60 Mbit/s of a 100 Mbit/s
// uplink) starts while a best-effort one has borrowed the whole uplink. It
// reports the rates while both send and how long the guaranteed one takes
// from its first byte to 90 % of its rate, against the same start with the
// uplink idle (baseline).
func BenchmarkBorrowing(b *testing.B) {
	iso := newTestIsolator(b, 100)
	ctx := context.Background()
	for _, busy := range []bool{false, true} {
		name := "idle-uplink"
		if busy {
			name = "best-effort-borrowing"
		}
		b.Run(name, func(b *testing.B) {
			var rise []time.Duration
			var gRate, beRate float64
			for n := 0; n < b.N; n++ {
				g := shapingPair(b, iso, fmt.Sprintf("g%s%d", name[:1], n), isolator.Limits{NetBandwidthMbit: 60})
				gIdx := mustIndex(b, iso, fmt.Sprintf("g%s%d", name[:1], n))
				var waitBE func() (float64, error)
				var beIdx uint32
				if busy {
					beID := fmt.Sprintf("be%d", n)
					be := shapingPair(b, iso, beID, isolator.Limits{Class: isolator.BestEffort})
					beIdx = mustIndex(b, iso, beID)
					waitBE = be.start(ctx, 5*time.Second)
					time.Sleep(1500 * time.Millisecond)
				}
				g0 := rawBytes(b, iso, iso.txIFB, gIdx)
				waitG := g.start(ctx, 2*time.Second)
				// The first byte, then 50 ms windows until 90 % of 60 Mbit/s.
				var first time.Time
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
					if rawBytes(b, iso, iso.txIFB, gIdx) > g0+10000 {
						first = time.Now()
						break
					}
				}
				if first.IsZero() {
					b.Fatal("the guaranteed flow does not start")
				}
				for {
					w0, t0 := rawBytes(b, iso, iso.txIFB, gIdx), time.Now()
					time.Sleep(50 * time.Millisecond)
					w1, t1 := rawBytes(b, iso, iso.txIFB, gIdx), time.Now()
					if float64(w1-w0)*8/t1.Sub(t0).Seconds() >= 0.9*60*mbit || t1.Sub(first) > 5*time.Second {
						rise = append(rise, t1.Sub(first))
						break
					}
				}
				if busy {
					time.Sleep(300 * time.Millisecond)
					gb0, bb0, t0 := rawBytes(b, iso, iso.txIFB, gIdx), rawBytes(b, iso, iso.txIFB, beIdx), time.Now()
					time.Sleep(time.Second)
					gb1, bb1, t1 := rawBytes(b, iso, iso.txIFB, gIdx), rawBytes(b, iso, iso.txIFB, beIdx), time.Now()
					s := t1.Sub(t0).Seconds()
					gRate += float64(gb1-gb0) * 8 / s / 1e6
					beRate += float64(bb1-bb0) * 8 / s / 1e6
				}
				if _, err := waitG(); err != nil {
					b.Fatal(err)
				}
				if waitBE != nil {
					if _, err := waitBE(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(ms(median(rise)), "rise-ms")
			if busy {
				b.ReportMetric(gRate/float64(b.N), "guaranteed-Mbit/s")
				b.ReportMetric(beRate/float64(b.N), "best-effort-Mbit/s")
			}
		})
	}
}

func rawBytes(tb testing.TB, iso *Isolator, ifb int, index uint32) uint64 {
	tb.Helper()
	cs, err := iso.classStats(ifb, index)
	if err != nil {
		tb.Fatal(err)
	}
	return cs.Basic.Bytes
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(ds []time.Duration) time.Duration { return pct(ds, 50) }

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}
