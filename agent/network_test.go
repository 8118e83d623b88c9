package agent

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/brimnode/brim/isolator"
)

// TestNetworkAccounting: net_bw of guaranteed containers is accounted
// against the total when it has some, revocable bandwidth is not, and the
// runtime gets the network limits; networking needs Options.Network.
func TestNetworkAccounting(t *testing.T) {
	ctx := context.Background()
	rt := newFakeRuntime(t.TempDir())
	a, err := New(Options{StateDir: t.TempDir(), Runtime: rt, Resources: Resources{MilliCPUs: 4000, MemMiB: 1024, NetMbit: 100}, Network: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	net := func(name string, mbit int64, revocable bool) Spec {
		s := spec(name, 100, 16)
		s.Network, s.Resources.NetMbit, s.Revocable = true, mbit, revocable
		return s
	}
	c, err := a.Launch(ctx, net("a", 60, false))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Limits.Network || c.Limits.NetBandwidthMbit != 60 {
		t.Errorf("limits %+v, want network at 60 Mbit/s", c.Limits)
	}
	if _, err := a.Launch(ctx, net("b", 60, false)); !errors.Is(err, ErrInsufficientResources) {
		t.Errorf("60 Mbit/s over the 40 left: %v, want ErrInsufficientResources", err)
	}
	r, err := a.Launch(ctx, net("r", 60, true))
	if err != nil {
		t.Fatalf("revocable 60 Mbit/s: %v", err)
	}
	if r.Limits.NetBandwidthMbit != 60 {
		t.Errorf("revocable limits %+v, want a 60 Mbit/s ceiling", r.Limits)
	}
	if got := a.Info().Used.NetMbit; got != 60 {
		t.Errorf("net_bw used %d, want 60 (revocable not accounted)", got)
	}
	if _, err := a.Resize(ctx, c.ID, Update{NetMbit: 120}); !errors.Is(err, ErrInsufficientResources) {
		t.Errorf("resize to 120 Mbit/s of 100: %v, want ErrInsufficientResources", err)
	}
	if c, err = a.Resize(ctx, c.ID, Update{NetMbit: 90}); err != nil || c.Limits.NetBandwidthMbit != 90 {
		t.Fatalf("resize to 90 Mbit/s: %+v, %v", c, err)
	}
	if got := a.Info().Used.NetMbit; got != 90 {
		t.Errorf("net_bw used %d after the resize, want 90", got)
	}
	plain, err := a.Launch(ctx, spec("plain", 100, 16))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Resize(ctx, plain.ID, Update{NetMbit: 5}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("net_bw resize of a container without networking: %v, want ErrInvalidArgument", err)
	}
	bad := spec("x", 100, 16)
	bad.Resources.NetMbit = 10
	if _, err := a.Launch(ctx, bad); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("net_bw without networking: %v, want ErrInvalidArgument", err)
	}

	noNet, err := New(Options{StateDir: t.TempDir(), Runtime: newFakeRuntime(t.TempDir()), Resources: Resources{MilliCPUs: 1000, MemMiB: 100}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { noNet.Close() })
	if _, err := noNet.Launch(ctx, net("n", 0, false)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("networking on an agent without it: %v, want ErrInvalidArgument", err)
	}
}

// TestNetBandwidthWithoutTotal is the regression test for net_bw charged
// but never admitted: on an agent whose total has no net_bw, one
// container with net_bw made every later launch fail "insufficient
// resources". Now such a request is refused, naming net_bw, and charges
// nothing; a container that holds net_bw from before (recovered after the
// operator dropped net_bw from the total) does not block later launches.
func TestNetBandwidthWithoutTotal(t *testing.T) {
	ctx := context.Background()
	rt := newFakeRuntime(t.TempDir())
	dir := t.TempDir()
	res := Resources{MilliCPUs: 4000, MemMiB: 1024}
	a, err := New(Options{StateDir: dir, Runtime: rt, Resources: res, Network: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	bw := spec("bw", 100, 16)
	bw.Network, bw.Resources.NetMbit = true, 50
	_, err = a.Launch(ctx, bw)
	var ie *InsufficientResourcesError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "asked net_bw:50, free net_bw:0 (net_bw not offered by this agent)") {
		t.Fatalf("net_bw on an agent without a net_bw total: %v, want it refused naming net_bw", err)
	}
	if got := a.Info().Used; got != (Resources{}) {
		t.Fatalf("refused launch charged %s", got)
	}
	for _, s := range []Spec{spec("plain", 100, 16), func() Spec { s := spec("net", 100, 16); s.Network = true; return s }()} {
		if _, err := a.Launch(ctx, s); err != nil {
			t.Fatalf("launch %s after the net_bw one: %v", s.Name, err)
		}
	}
	// Revocable bandwidth is a ceiling, borrowed and never accounted: allowed.
	rev := bw
	rev.Name, rev.Revocable = "rev", true
	if _, err := a.Launch(ctx, rev); err != nil {
		t.Fatalf("revocable net_bw without a total: %v", err)
	}
	a.Close()

	// A container launched while the total had net_bw, recovered by an
	// agent whose total has none: kept and accounted, later launches work.
	withBW, err := New(Options{StateDir: dir, Runtime: rt, Resources: Resources{MilliCPUs: 4000, MemMiB: 1024, NetMbit: 100}, Network: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := withBW.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	bw.Name = "bw2"
	if _, err := withBW.Launch(ctx, bw); err != nil {
		t.Fatal(err)
	}
	withBW.Close()
	b, err := New(Options{StateDir: dir, Runtime: rt, Resources: res, Network: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.Info().Used.NetMbit; got != 50 {
		t.Fatalf("recovered net_bw use %d, want 50", got)
	}
	if _, err := b.Launch(ctx, spec("after", 100, 16)); err != nil {
		t.Fatalf("plain launch next to a recovered net_bw container: %v", err)
	}
}

// TestPortMappings: port mappings need networking, valid ports and host
// ports in the agent's range (--network-port-range), reach
// the runtime in the limits, are checkpointed (a restarted agent still
// shows them), and a taken host port is ALREADY_EXISTS on the wire.
func TestPortMappings(t *testing.T) {
	ctx := context.Background()
	rt := newFakeRuntime(t.TempDir())
	dir := t.TempDir()
	a, err := New(Options{StateDir: dir, Runtime: rt, Resources: Resources{MilliCPUs: 4000, MemMiB: 1024}, Network: true,
		PortRange: isolator.PortRange{First: 5000, Last: 9000}})
	if err != nil {
		t.Fatal(err)
	}
	ports := []isolator.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: isolator.TCP}, {HostPort: 5353, ContainerPort: 53, Protocol: isolator.UDP}}
	for _, bad := range []struct {
		name    string
		network bool
		ports   []isolator.PortMapping
	}{
		{"without network", false, ports},
		{"port 0", true, []isolator.PortMapping{{HostPort: 0, ContainerPort: 80, Protocol: isolator.TCP}}},
		{"duplicate", true, []isolator.PortMapping{ports[0], {HostPort: 8080, ContainerPort: 81, Protocol: isolator.TCP}}},
		{"protocol", true, []isolator.PortMapping{{HostPort: 1, ContainerPort: 1, Protocol: "sctp"}}},
		{"outside the range", true, []isolator.PortMapping{{HostPort: 7999, ContainerPort: 80, Protocol: isolator.TCP}}},
		{"one outside the range", true, []isolator.PortMapping{ports[0], {HostPort: 9001, ContainerPort: 80, Protocol: isolator.UDP}}},
	} {
		s := spec(bad.name, 100, 16)
		s.Network, s.Ports = bad.network, bad.ports
		if _, err := a.Launch(ctx, s); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", bad.name, err)
		}
	}
	if n := len(a.List()); n != 0 {
		t.Errorf("%d containers after refused launches", n)
	}
	s := spec("web", 100, 16)
	s.Network, s.Ports = true, ports
	c, err := a.Launch(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if got := rt.containers[c.ID].limits.Ports; !reflect.DeepEqual(got, ports) {
		t.Errorf("runtime got ports %v, want %v", got, ports)
	}
	// Resizes keep them.
	if c, err = a.Resize(ctx, c.ID, Update{MilliCPUs: 200}); err != nil || !reflect.DeepEqual(c.Limits.Ports, ports) {
		t.Errorf("after a resize: %+v, %v", c, err)
	}
	a.Close()
	b, err := New(Options{StateDir: dir, Runtime: rt, Resources: Resources{MilliCPUs: 4000, MemMiB: 1024}, Network: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(c.ID)
	if err != nil || !reflect.DeepEqual(got.Limits.Ports, ports) {
		t.Errorf("after a restart: %+v, %v", got, err)
	}
}
