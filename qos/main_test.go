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
// benchmark instead of running tests: "lc" (a latency-sensitive loop that
// prints its p99 wake-up latency in µs every 100 ms) or "burn" (a cpu
// antagonist).
const roleEnv = "BRIM_QOS_BENCH_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "lc":
		latencyLoop()
	case "burn":
		burn()
	}
	os.Exit(m.Run())
}

// latencyLoop sleeps 1 ms at a time and reports the p99 of the oversleep
// (the time the kernel took to run it again) over each 100 ms window.
func latencyLoop() {
	runtime.GOMAXPROCS(1)
	var lat []time.Duration
	window := time.Now()
	for {
		t := time.Now()
		time.Sleep(time.Millisecond)
		lat = append(lat, time.Since(t)-time.Millisecond)
		if time.Since(window) >= 100*time.Millisecond {
			slices.Sort(lat)
			p99 := lat[min(len(lat)-1, len(lat)*99/100)]
			fmt.Println(p99.Microseconds())
			lat, window = lat[:0], time.Now()
		}
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
