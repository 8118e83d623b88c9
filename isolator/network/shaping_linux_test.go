//go:build linux

package network

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/brimnode/brim/isolator"
)

// tcpGoodput is TCP goodput over wire rate for 1500-byte frames with
// timestamps (1448 / 1514).
const tcpGoodput = 0.956

// flow is one iperf3 run between two prepared containers.
type flow struct {
	clientNS string
	server   netip.Addr
	reverse  bool // the server sends
	udpMbit  int  // UDP at this rate instead of TCP
}

// start runs the flow for d in the background (the server must be up);
// wait returns its goodput in Mbit/s.
func (f flow) start(ctx context.Context, d time.Duration) (wait func() (float64, error)) {
	type res struct {
		mbit float64
		err  error
	}
	c := make(chan res, 1)
	go func() {
		m, err := iperfClient(ctx, f.clientNS, f.server, d, f.reverse, f.udpMbit)
		c <- res{m, err}
	}()
	return func() (float64, error) { r := <-c; return r.mbit, r.err }
}

// shapingPair prepares a client container limited to mbit and an unlimited
// server container, and starts an iperf3 server in the latter.
func shapingPair(t testing.TB, iso *Isolator, client string, limits isolator.Limits) flow {
	t.Helper()
	nsC := prepare(t, iso, client, limits)
	srv := client + "-srv"
	nsS := prepare(t, iso, srv, isolator.Limits{})
	addr := mustAddr(t, iso, srv)
	iperfServer(t, nsS, addr)
	return flow{clientNS: nsC, server: addr}
}

// measureShaping runs one flow through a container limited to mbit in
// direction dir and returns the wire rate through its class and the goodput.
func measureShaping(t testing.TB, iso *Isolator, id string, mbit int64, dir string) (wire, goodput float64) {
	t.Helper()
	f := shapingPair(t, iso, id, isolator.Limits{NetBandwidthMbit: mbit})
	f.reverse = dir == "ingress"
	wait := f.start(context.Background(), 4*time.Second)
	time.Sleep(1200 * time.Millisecond) // past slow start
	wire = wireRate(t, iso, id, dir, 2*time.Second)
	goodput, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	return wire, goodput
}

// TestShapingAccuracy: at 10, 50 and 200 Mbit/s, in both directions, the
// wire rate through a container's class is its limit and TCP goodput about
// 0.956 of it (bounds in the test are loose below: see bench/40-network).
func TestShapingAccuracy(t *testing.T) {
	iso := newTestIsolator(t, 1000)
	for _, mbit := range []int64{10, 50, 200} {
		for _, dir := range []string{"egress", "ingress"} {
			t.Run(fmt.Sprintf("%d/%s", mbit, dir), func(t *testing.T) {
				// Shaping never lets more through than the limit: that
				// bound is strict. Below it, a loaded machine (2 vCPUs
				// shared with parallel builds) cannot always fill the link,
				// so a short run is measured again (up to 3 times) before
				// failing; the bench reports exact figures, the test
				// catches a broken shaper (wrong units, wrong class).
				for attempt := 1; ; attempt++ {
					wire, goodput := measureShaping(t, iso, fmt.Sprintf("c%d%s%d", mbit, dir[:2], attempt), mbit, dir)
					w, g := wire/float64(mbit), goodput/float64(mbit)/tcpGoodput
					t.Logf("limit %d Mbit/s %s: wire %.2f (%.3f of the limit), goodput %.2f (%.3f of 0.956 × limit)", mbit, dir, wire, w, goodput, g)
					// The wire rate (the class's byte counter) is the
					// shaper's own figure: strict. iperf3's goodput of a
					// short run also counts what sits in socket buffers and
					// the HTB burst at the start, which at 10 Mbit/s is a few
					// per cent: looser.
					if w > 1.05 || g > 1.15 {
						t.Fatalf("more than the limit went through")
					}
					if w >= 0.75 && g >= 0.7 {
						return
					}
					if attempt == 3 {
						t.Fatalf("the wire rate stays below the limit")
					}
				}
			})
		}
	}
}

// TestLiveResize: changing the limit of a running flow changes its rate, in
// both directions' classes.
func TestLiveResize(t *testing.T) {
	iso := newTestIsolator(t, 1000)
	ctx := context.Background()
	f := shapingPair(t, iso, "c", isolator.Limits{NetBandwidthMbit: 50})
	wait := f.start(ctx, 6*time.Second) // + 1 s omitted
	time.Sleep(1200 * time.Millisecond)
	before := wireRate(t, iso, "c", "egress", time.Second)
	if err := iso.Update(ctx, "c", isolator.Limits{Network: true, NetBandwidthMbit: 10}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	down := wireRate(t, iso, "c", "egress", time.Second)
	for _, ifb := range []int{iso.txIFB, iso.rxIFB} {
		if got := classRate(t, ifb, mustIndex(t, iso, "c")); got != 10*mbit {
			t.Errorf("class rate on ifb %d = %d bit/s, want 10 Mbit/s", ifb, got)
		}
	}
	if err := iso.Update(ctx, "c", isolator.Limits{Network: true, NetBandwidthMbit: 100}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	up := wireRate(t, iso, "c", "egress", time.Second)
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("50 Mbit/s: %.1f, resized to 10: %.1f, resized to 100: %.1f", before, down, up)
	if down > 10*1.1 {
		t.Errorf("after resizing 50 → 10 Mbit/s the rate is %.1f (was %.1f)", down, before)
	}
	if up < 2*down || up > 100*1.05 {
		t.Errorf("after resizing 10 → 100 Mbit/s the rate is %.1f (was %.1f)", up, down)
	}
}

// TestBorrowing: on a 100 Mbit/s uplink, a best-effort container borrows what
// a guaranteed one (60 Mbit/s) leaves idle, yields it when the guaranteed one
// sends, and gets it back when it stops.
func TestBorrowing(t *testing.T) {
	iso := newTestIsolator(t, 100)
	// Upper bounds are strict (shaping never lets more through); lower ones
	// may miss on a loaded machine, so the scenario runs up to 3 times.
	for attempt := 1; ; attempt++ {
		alone, shared, after := borrowing(t, iso, fmt.Sprint(attempt))
		t.Logf("best-effort alone %.1f Mbit/s; with guaranteed: guaranteed %.1f, best-effort %.1f; after %.1f", alone, shared[0], shared[1], after)
		if alone > 105 || shared[0] > 63 || shared[1] > 50 || shared[0]+shared[1] > 105 {
			t.Fatal("more than the limits went through")
		}
		// Without borrowing, best-effort would get its 1 Mbit/s.
		if alone >= 50 && shared[0] >= 48 && after >= 50 {
			return
		}
		if attempt == 3 {
			t.Fatal("best-effort does not borrow the idle uplink, or guaranteed does not get its rate")
		}
	}
}

// borrowing runs the scenario of TestBorrowing once: best-effort alone, then
// with guaranteed (rates of guaranteed, best-effort), then alone again.
func borrowing(t *testing.T, iso *Isolator, suffix string) (alone float64, shared []float64, after float64) {
	ctx := context.Background()
	be := shapingPair(t, iso, "be"+suffix, isolator.Limits{Class: isolator.BestEffort})
	g := shapingPair(t, iso, "g"+suffix, isolator.Limits{NetBandwidthMbit: 60})

	waitBE := be.start(ctx, 9*time.Second) // + 1 s omitted
	time.Sleep(1200 * time.Millisecond)
	alone = wireRate(t, iso, "be"+suffix, "egress", 1500*time.Millisecond)

	waitG := g.start(ctx, 3*time.Second)
	time.Sleep(1500 * time.Millisecond)
	shared = wireRates(t, iso, "egress", 1500*time.Millisecond, "g"+suffix, "be"+suffix)
	if _, err := waitG(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	after = wireRate(t, iso, "be"+suffix, "egress", time.Second)
	if _, err := waitBE(); err != nil {
		t.Fatal(err)
	}
	return alone, shared, after
}

// wireRates measures the rates (Mbit/s) of several containers' classes in
// dir over the same d.
func wireRates(t testing.TB, iso *Isolator, dir string, d time.Duration, ids ...string) []float64 {
	t.Helper()
	b0 := make([]uint64, len(ids))
	for k, id := range ids {
		b0[k] = classBytes(t, iso, id, dir)
	}
	t0 := time.Now()
	time.Sleep(d)
	el := time.Since(t0).Seconds()
	out := make([]float64, len(ids))
	for k, id := range ids {
		out[k] = float64(classBytes(t, iso, id, dir)-b0[k]) * 8 / el / 1e6
	}
	return out
}

func mustIndex(t testing.TB, iso *Isolator, id string) uint32 {
	t.Helper()
	iso.mu.Lock()
	defer iso.mu.Unlock()
	r, ok := iso.recs[id]
	if !ok {
		t.Fatalf("no record of %s", id)
	}
	return r.Index
}

// classRate returns the configured rate (bit/s) of class 1:index on ifb.
func classRate(t testing.TB, ifb int, index uint32) uint64 {
	t.Helper()
	classes, err := dump(func() ([]netlink.Class, error) {
		return netlink.ClassList(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Index: ifb}}, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range classes {
		if h, ok := c.(*netlink.HtbClass); ok && h.Handle == netlink.MakeHandle(1, uint16(index)) {
			return h.Rate * 8
		}
	}
	t.Fatalf("no class 1:%x on ifb %d", index, ifb)
	return 0
}
