package qos

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// roleEnv makes the test binary act as a workload for the reaction
// benchmark instead of running tests: "lc" (a latency-sensitive request
// loop that prints its p99 latency in µs every 100 ms), "burn" (a cpu
// antagonist) or "antagonist" (a cpu antagonist that starts burning when
// a byte arrives on its stdin).
const roleEnv = "BRIM_QOS_BENCH_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "lc":
		latencyLoop()
	case "burn":
		burn()
	case "antagonist":
		_, _ = os.Stdin.Read(make([]byte, 1))
		burn()
	}
	os.Exit(m.Run())
}

// latencyLoop serves a "request" 3 ms after the previous one ended: a
// fixed amount of cpu work (calibrated to about 2 ms when it starts) whose
// wall time is the request latency, as cpu contention stretches it. It
// prints the p99 over each 100 ms window (about 20 requests), in µs.
// Requests of several scheduler slices are what cpu contention at equal
// weight stretches (measured here: p99 ×2.5–3.5 beside four equal-weight
// spinners, in 65–90 % of the windows); a 0.5 ms request runs as soon as
// it wakes, whatever else runs, and hardly moves.
func latencyLoop() {
	runtime.GOMAXPROCS(1)
	work := calibrate(2 * time.Millisecond)
	var lat []time.Duration
	window := time.Now()
	for {
		time.Sleep(3 * time.Millisecond)
		t := time.Now()
		spinN(work)
		lat = append(lat, time.Since(t))
		if time.Since(window) >= 100*time.Millisecond {
			slices.Sort(lat)
			p99 := lat[min(len(lat)-1, len(lat)*99/100)]
			fmt.Println(p99.Microseconds())
			lat, window = lat[:0], time.Now()
		}
	}
}

// calibrate returns the iterations of spinN that take about d (the
// fastest of several tries, so noise at start does not inflate it).
func calibrate(d time.Duration) uint64 {
	const probe = 1 << 16
	best := time.Duration(1<<63 - 1)
	for range 20 {
		t := time.Now()
		spinN(probe)
		best = min(best, time.Since(t))
	}
	return uint64(float64(probe) * float64(d) / float64(max(best, 1)))
}

func spinN(n uint64) {
	x := uint64(1)
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	if x == 0 {
		sink.Store(x)
	}
}

func burn() {
	for range runtime.GOMAXPROCS(0) - 1 {
		go spin()
	}
	spin()
}

var sink atomic.Uint64

// spin burns a cpu forever (a linear congruential generator nobody reads).
func spin() {
	for x := uint64(1); ; x = x*6364136223846793005 + 1442695040888963407 {
		if x == 0 {
			sink.Store(x)
		}
	}
}
