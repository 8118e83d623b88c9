//go:build linux

package network

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
)

// testConfig returns a Config with a unique bridge, a random /24 in
// 10.128.0.0/9 and private directories.
func testConfig(t testing.TB, hostMbit int64) Config {
	t.Helper()
	testutil.RequireRoot(t)
	dir := t.TempDir()
	return Config{
		Bridge:       testutil.UniqueName("brt"),
		Subnet:       netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + rand.IntN(128)), byte(rand.IntN(256)), 0}), 24),
		StateDir:     filepath.Join(dir, "state"),
		NetNSDir:     filepath.Join(dir, "netns"),
		HostRateMbit: hostMbit,
		// Every port: the tests map what they like, in namespaces of
		// their own (TestPortMappingHostService checks the range).
		PortRange: isolator.PortRange{First: 1, Last: 65535},
	}
}

// newTestIsolator returns an Isolator on a fresh bridge, uninstalled on
// cleanup (which also checks that nothing was left behind).
func newTestIsolator(t testing.TB, hostMbit int64) *Isolator {
	t.Helper()
	cfg := testConfig(t, hostMbit)
	iso, err := New(cfg)
	if err != nil {
		t.Fatalf("new isolator: %v", err)
	}
	t.Cleanup(func() { uninstall(t, iso) })
	return iso
}

func uninstall(t testing.TB, iso *Isolator) {
	t.Helper()
	if err := iso.Uninstall(context.Background()); err != nil {
		t.Errorf("uninstall: %v", err)
	}
	defer iso.Close()
	for _, name := range []string{iso.cfg.Bridge, iso.cfg.Bridge + "-tx", iso.cfg.Bridge + "-rx"} {
		if _, err := netlink.LinkByName(name); err == nil {
			t.Errorf("link %s left after uninstall", name)
		}
	}
	if l := leftovers(t, iso); len(l) > 0 {
		t.Errorf("left after uninstall: %v", l)
	}
}

// leftovers lists the kernel objects and records of iso's containers that
// exist while iso has no record of them.
func leftovers(t testing.TB, iso *Isolator) []string {
	t.Helper()
	var out []string
	live := map[uint32]bool{}
	iso.mu.Lock()
	for _, r := range iso.recs {
		live[r.Index] = true
	}
	iso.mu.Unlock()
	recs, err := iso.store.load()
	if err != nil {
		t.Fatal(err)
	}
	for id, r := range recs {
		if !live[r.Index] {
			out = append(out, "record "+id)
		}
	}
	ents, _ := os.ReadDir(iso.cfg.NetNSDir)
	for _, e := range ents {
		if _, ok := recs[e.Name()]; !ok {
			out = append(out, "netns file "+e.Name())
		}
	}
	links, err := dump(netlink.LinkList)
	if err != nil {
		t.Fatal(err)
	}
	iso.mu.Lock()
	defer iso.mu.Unlock()
	for _, l := range links {
		if iso.isSpare(l.Attrs().Name) {
			continue
		}
		if rest, ok := strings.CutPrefix(l.Attrs().Name, iso.vethPrefix); ok {
			var n uint32
			if _, err := fmt.Sscanf(rest, "%x", &n); err != nil || !live[n] {
				out = append(out, "link "+l.Attrs().Name)
			}
		}
	}
	for _, ifb := range []string{iso.cfg.Bridge + "-tx", iso.cfg.Bridge + "-rx"} {
		l, err := netlink.LinkByName(ifb)
		if err != nil {
			continue
		}
		classes, _ := dump(func() ([]netlink.Class, error) { return netlink.ClassList(l, 0) })
		for _, c := range classes {
			h := c.Attrs().Handle
			if m := h & 0xffff; m != 1 && m != defaultMinor && !live[m] {
				out = append(out, fmt.Sprintf("class %s 1:%x", ifb, m))
			}
		}
		filters, _ := dump(func() ([]netlink.Filter, error) { return netlink.FilterList(l, rootHandle) })
		for _, f := range filters {
			if p := uint32(f.Attrs().Priority); !live[p] {
				out = append(out, fmt.Sprintf("filter %s prio %d", ifb, p))
			}
		}
	}
	return out
}

// prepare prepares container id with limits and cleans it up at the end.
func prepare(t testing.TB, iso *Isolator, id string, limits isolator.Limits) string {
	t.Helper()
	limits.Network = true
	var l isolator.Launch
	if err := iso.Prepare(context.Background(), id, limits, &l); err != nil {
		t.Fatalf("prepare %s: %v", id, err)
	}
	t.Cleanup(func() {
		if err := iso.Cleanup(context.Background(), id); err != nil {
			t.Errorf("cleanup %s: %v", id, err)
		}
	})
	if l.NetNSPath == "" {
		t.Fatalf("prepare %s: no netns path", id)
	}
	return l.NetNSPath
}

// inNetNS runs fn on a thread in the namespace at path, then moves the
// thread back.
func inNetNS(path string, fn func() error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return runInNetNS(int(f.Fd()), fn)
}

func mustAddr(t testing.TB, iso *Isolator, id string) netip.Addr {
	t.Helper()
	a, err := iso.Address(id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// iperfServer starts a one-shot iperf3 server in the namespace at nsPath,
// listening on addr, and returns once it listens. It is killed on cleanup.
func iperfServer(t testing.TB, nsPath string, addr netip.Addr) {
	t.Helper()
	testutil.Require(t, haveIperf(), "iperf3 not installed (make deps)")
	cmd := exec.Command("nsenter", "--net="+nsPath, "iperf3", "-s", "-1", "--forceflush", "-B", addr.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start iperf3 server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Server listening") {
				ready <- nil
				for sc.Scan() {
				}
				return
			}
		}
		ready <- fmt.Errorf("iperf3 server exited before listening")
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("iperf3 server does not listen")
	}
}

func haveIperf() bool {
	_, err := exec.LookPath("iperf3")
	return err == nil
}

// iperfClient runs an iperf3 client in nsPath against server for d (after
// one omitted second) and returns the goodput in Mbit/s over the intervals
// that were not omitted, as the client saw them (sender side, or receiver
// side with reverse, where the server sends). With udpMbit > 0 it sends UDP
// at that rate instead of TCP. extra are more iperf3 options.
func iperfClient(ctx context.Context, nsPath string, server netip.Addr, d time.Duration, reverse bool, udpMbit int, extra ...string) (float64, error) {
	args := []string{"--net=" + nsPath, "iperf3", "-c", server.String(), "-J", "-O", "1", "-t", fmt.Sprint(int(d.Seconds()))}
	args = append(args, extra...)
	if reverse {
		args = append(args, "-R")
	}
	if udpMbit > 0 {
		args = append(args, "-u", "-b", fmt.Sprintf("%dM", udpMbit))
	}
	out, err := exec.CommandContext(ctx, "nsenter", args...).Output()
	if err != nil {
		return 0, fmt.Errorf("iperf3 client: %w: %s", err, out)
	}
	var res struct {
		Intervals []struct {
			Sum struct {
				Bytes   float64 `json:"bytes"`
				Seconds float64 `json:"seconds"`
				Omitted bool    `json:"omitted"`
			} `json:"sum"`
		} `json:"intervals"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, fmt.Errorf("parse iperf3 output: %w", err)
	}
	if res.Error != "" {
		return 0, fmt.Errorf("iperf3: %s", res.Error)
	}
	var bytes, secs float64
	for _, iv := range res.Intervals {
		if !iv.Sum.Omitted {
			bytes, secs = bytes+iv.Sum.Bytes, secs+iv.Sum.Seconds
		}
	}
	if secs == 0 {
		return 0, fmt.Errorf("iperf3: no intervals measured")
	}
	return bytes * 8 / secs / 1e6, nil
}

// classBytes returns the byte counter of id's class in direction dir
// ("egress" or "ingress").
func classBytes(t testing.TB, iso *Isolator, id, dir string) uint64 {
	t.Helper()
	var s isolator.Statistics
	if err := iso.Usage(context.Background(), id, &s); err != nil {
		t.Fatal(err)
	}
	for _, c := range s.NetTrafficClass {
		if c.ID == dir {
			return c.Bytes
		}
	}
	t.Fatalf("no %s class in %+v", dir, s.NetTrafficClass)
	return 0
}

// wireRate measures the rate (Mbit/s) through id's class in dir over d.
func wireRate(t testing.TB, iso *Isolator, id, dir string, d time.Duration) float64 {
	t.Helper()
	b0, t0 := classBytes(t, iso, id, dir), time.Now()
	time.Sleep(d)
	b1, t1 := classBytes(t, iso, id, dir), time.Now()
	return float64(b1-b0) * 8 / t1.Sub(t0).Seconds() / 1e6
}
