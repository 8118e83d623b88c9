//go:build linux

package network

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/brimnode/brim/internal/testutil"
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

// BenchmarkLatencyUnderLoad is the ping round trip of a container that
// downloads at its 20 Mbit/s limit (iperf3 -R from a server container on
// the same bridge), against the same download through a hand-made tc
// class in the same run: HTB with one 20 Mbit/s class on the sending
// veth, in the server's own namespace, with the default leaf (what an
// operator would write by hand; TCP small queues keep that queue short,
// because the sender sees its own qdisc). "unbounded-leaf" is brim's class
// with the leaf queue it had before (the default pfifo of 1000 packets):
// the IFB shaping happens after the packets left their sender's namespace,
// so nothing but the leaf's limit bounds the queue. Pings start once the
// download runs; goodput shows that the bounded leaf costs no throughput.
// The sender runs CUBIC, Linux's default and most servers' a download
// comes from (a BBR sender keeps the queue short by itself).
func BenchmarkLatencyUnderLoad(b *testing.B) {
	testutil.Require(b, haveIperf(), "iperf3 not installed (make deps)")
	_, err := exec.LookPath("busybox")
	testutil.Require(b, err == nil, "busybox not installed (make deps)")
	const mbit = 20
	iso := newTestIsolator(b, 1000)
	srvNS := prepare(b, iso, "lsrv", isolator.Limits{})
	cliNS := prepare(b, iso, "lcli", isolator.Limits{NetBandwidthMbit: mbit})
	srvAddr, idx := mustAddr(b, iso, "lsrv"), mustIndex(b, iso, "lcli")
	handCli, handSrv, handAddr := handMadeClass(b, mbit)
	for _, v := range []struct {
		name     string
		setup    func()
		cli, srv string
		addr     netip.Addr
	}{
		{name: "brim-leaf", cli: cliNS, srv: srvNS, addr: srvAddr},
		{name: "unbounded-leaf", cli: cliNS, srv: srvNS, addr: srvAddr, setup: func() {
			// Deleting the bfifo gives the class HTB's default leaf back.
			q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: iso.rxIFB, Handle: leafHandle(idx), Parent: netlink.MakeHandle(1, uint16(idx))}, QdiscType: "bfifo"}
			if err := netlink.QdiscDel(q); err != nil {
				b.Fatal(err)
			}
		}},
		{name: "hand-made-class", cli: handCli, srv: handSrv, addr: handAddr},
	} {
		if v.setup != nil {
			v.setup()
		}
		b.Run(v.name, func(b *testing.B) {
			var rtts []time.Duration
			var good float64
			for n := 0; n < b.N; n++ {
				r, g := pingUnderDownload(b, v.cli, v.srv, v.addr)
				rtts, good = append(rtts, r...), good+g
			}
			b.ReportMetric(ms(median(rtts)), "ping-p50-ms")
			b.ReportMetric(ms(pct(rtts, 90)), "ping-p90-ms")
			b.ReportMetric(good/float64(b.N), "goodput-Mbit/s")
		})
	}
}

// pingUnderDownload runs a 12 s download (iperf3 -R) from srv's server at
// addr into cli and, from its third second, 40 pings 0.2 s apart from cli
// to addr; it returns the round trips and the download's goodput.
func pingUnderDownload(b *testing.B, cli, srv string, addr netip.Addr) ([]time.Duration, float64) {
	b.Helper()
	iperfServer(b, srv, addr)
	ctx := context.Background()
	type result struct {
		mbit float64
		err  error
	}
	done := make(chan result, 1)
	go func() {
		g, err := iperfClient(ctx, cli, addr, 12*time.Second, true, 0, "-C", "cubic")
		done <- result{g, err}
	}()
	time.Sleep(3 * time.Second)
	out, err := exec.Command("nsenter", "--net="+cli, "busybox", "ping", "-c", "40", "-i", "0.2", "-W", "5", addr.String()).Output()
	r := <-done
	if r.err != nil {
		b.Fatal(r.err)
	}
	if err != nil {
		b.Fatalf("ping: %v: %s", err, out)
	}
	var rtts []time.Duration
	for _, line := range strings.Split(string(out), "\n") {
		_, t, ok := strings.Cut(line, "time=")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(t), " ms"), 64)
		if err == nil {
			rtts = append(rtts, time.Duration(v*float64(time.Millisecond)))
		}
	}
	if len(rtts) == 0 {
		b.Fatalf("no ping replies: %s", out)
	}
	return rtts, r.mbit
}

// handMadeClass makes two namespaces joined by a veth pair, with an HTB
// root and one class of rate = ceil = mbit on the server's end (the
// default leaf under it), and returns the client's and server's netns
// paths and the server's address.
func handMadeClass(b *testing.B, mbit int) (cli, srv string, srvAddr netip.Addr) {
	b.Helper()
	cliName, srvName := testutil.NewNetNS(b), testutil.NewNetNS(b)
	cli, srv = "/run/netns/"+cliName, "/run/netns/"+srvName
	srvAddr = netip.MustParseAddr("192.168.251.1")
	veth := testutil.UniqueName("hm")
	for _, args := range [][]string{
		{"link", "add", veth + "s", "netns", srvName, "type", "veth", "peer", "name", veth + "c", "netns", cliName},
		{"-n", srvName, "addr", "add", "192.168.251.1/24", "dev", veth + "s"},
		{"-n", cliName, "addr", "add", "192.168.251.2/24", "dev", veth + "c"},
		{"-n", srvName, "link", "set", veth + "s", "up"},
		{"-n", cliName, "link", "set", veth + "c", "up"},
		{"-n", srvName, "link", "set", "lo", "up"},
		{"-n", cliName, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			b.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	rate := fmt.Sprintf("%dmbit", mbit)
	for _, args := range [][]string{
		{"qdisc", "add", "dev", veth + "s", "root", "handle", "1:", "htb", "default", "10"},
		{"class", "add", "dev", veth + "s", "parent", "1:", "classid", "1:10", "htb", "rate", rate, "ceil", rate},
	} {
		if out, err := exec.Command("ip", append([]string{"netns", "exec", srvName, "tc"}, args...)...).CombinedOutput(); err != nil {
			b.Fatalf("tc %v: %v: %s", args, err, out)
		}
	}
	return cli, srv, srvAddr
}
