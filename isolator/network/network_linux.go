//go:build linux

package network

import (
	"context"
	"errors"
	"fmt"
	"github.com/brimnode/brim/internal/lockfile"
	"hash/fnv"
	"io/fs"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/isolator"
)

// containerIf is the container's interface name inside its namespace.
const containerIf = "eth0"

// Isolator is the network isolator. Create it with New; the caller closes it
// with Close (containers keep their network) or Uninstall (everything goes).
// It is safe for concurrent use; calls that change kernel state are
// serialised.
type Isolator struct {
	cfg        Config
	store      store
	gw         netip.Addr
	vethPrefix string
	nl         *netlink.Handle // host namespace; safe for concurrent use
	// tcSock is a netlink socket in the host namespace for the requests
	// the netlink library cannot build (the leaf bfifo); used under mu.
	tcSock map[int]*nl.SocketHandle
	lock   *lockfile.Lock // flock on <StateDir>/.lock
	hostNS netns.NsHandle // the namespace New ran in (for nftables)
	bridge int            // link indexes
	txIFB  int
	rxIFB  int

	mu   sync.Mutex
	recs map[string]record
	// unsaved are the containers whose record is newer in recs than on
	// disk: its write failed (a full state dir) and is tried again
	// (saveLocked, retryUnsaved).
	unsaved map[string]error
	last    uint32 // index and sequence number of the newest allocation
	seq     uint64
	spares  []*spare
	pending map[string]bool // host-side names of spares being made
	closed  bool            // Close or Uninstall: no more spares
	held    map[string]heldPorts
	notHeld []error // recorded mappings New could not hold (NotHeld)

	refillc    chan struct{} // wakes the refiller (startRefiller)
	refillDone chan struct{}
	closeOnce  sync.Once

	// failStep, when set (tests only), is called after each step of
	// Prepare; an error makes Prepare fail there, half-way.
	failStep func(step string) error
}

var _ isolator.Isolator = (*Isolator)(nil)

// New returns an Isolator for cfg, creating the bridge (with the subnet's
// first address) and the two IFB devices when they are missing, and loading
// the IPAM records in cfg.StateDir. After an agent restart, call Recover.
// It installs (or replaces) the nftables table "brim-<bridge>": containers
// may reach the host only on cfg.HostAllow, the recorded containers' port
// mappings, with cfg.Isolate the forward rule between containers, with
// cfg.NAT the masquerade (and IPv4 forwarding on). It makes cfg.NetNSDir a mount point with shared propagation
// (as `ip netns` does with /run/netns), so that a process which copied the
// mount namespace before a container's netns file was mounted there (a shim
// started ahead of the launch) joins the namespace, not the empty file
// under the mount. Call it on a thread in the host network namespace (any
// goroutine of the agent): the isolator works in the namespace New ran in.
// The caller closes it (Close). Errors wrap ErrInvalid for a bad cfg and
// ErrLocked when another Isolator holds cfg.StateDir.
func New(cfg Config) (*Isolator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("configure network isolator: %w", err)
	}
	for _, d := range []string{cfg.StateDir, cfg.NetNSDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	lock, err := lockDir(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	if err := shareDir(cfg.NetNSDir); err != nil {
		_ = lock.Close()
		return nil, err
	}
	i, err := newLocked(cfg, lock)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	return i, nil
}

// lockDir locks dir/.lock; the kernel drops the lock when the process
// dies, so a killed agent never leaves it behind. The error wraps ErrLocked
// when another Isolator holds it.
func lockDir(dir string) (*lockfile.Lock, error) {
	l, err := lockfile.File(filepath.Join(dir, ".lock"))
	if errors.Is(err, lockfile.ErrLocked) {
		return nil, fmt.Errorf("%w: %w", ErrLocked, err)
	}
	return l, err
}

func newLocked(cfg Config, lock *lockfile.Lock) (*Isolator, error) {
	i, err := open(cfg, lock)
	if err != nil {
		return nil, err
	}
	if i.bridge, err = i.ensureBridge(); err != nil {
		i.release()
		return nil, err
	}
	if i.txIFB, err = i.ensureIFB(cfg.Bridge+"-tx", cfg.HostRateMbit); err != nil {
		i.release()
		return nil, err
	}
	if i.rxIFB, err = i.ensureIFB(cfg.Bridge+"-rx", cfg.HostRateMbit); err != nil {
		i.release()
		return nil, err
	}
	if cfg.NAT {
		if err := i.enableForwarding(); err != nil {
			i.release()
			return nil, err
		}
	}
	// The recorded containers' port mappings come back with the table;
	// Recover drops those of containers the agent no longer knows.
	if err := i.syncFirewallLocked(""); err != nil {
		i.release()
		return nil, err
	}
	i.holdRecordedLocked()
	i.refill()
	i.startRefiller()
	return i, nil
}

// open loads the records of cfg.StateDir and opens the netlink handles
// of the calling thread's network namespace (the host's); it makes
// nothing. The caller holds lock and calls release.
func open(cfg Config, lock *lockfile.Lock) (*Isolator, error) {
	st := store{dir: cfg.StateDir}
	recs, err := st.load()
	if err != nil {
		return nil, err
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(cfg.Bridge))
	i := &Isolator{
		cfg:        cfg,
		store:      st,
		gw:         addrAt(cfg.Subnet, 1),
		vethPrefix: fmt.Sprintf("bv%08x", h.Sum32()),
		recs:       recs,
		lock:       lock,
		pending:    map[string]bool{},
		held:       map[string]heldPorts{},
		unsaved:    map[string]error{},
	}
	i.last, i.seq = newest(recs)
	// One netlink socket for the host namespace instead of one per request.
	if i.hostNS, err = netns.Get(); err != nil {
		return nil, fmt.Errorf("open host netns: %w", err)
	}
	if i.nl, err = netlink.NewHandleAt(i.hostNS, unix.NETLINK_ROUTE); err != nil {
		_ = i.hostNS.Close() // failing with err
		return nil, fmt.Errorf("open netlink: %w", err)
	}
	sock, err := nl.GetNetlinkSocketAt(i.hostNS, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		i.nl.Close()
		_ = i.hostNS.Close() // failing with err
		return nil, fmt.Errorf("open netlink: %w", err)
	}
	i.tcSock = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: {Socket: sock}}
	return i, nil
}

// release closes the sockets and handles of a New that failed half-way
// (the state dir lock is New's to close).
func (i *Isolator) release() {
	for _, sh := range i.tcSock {
		sh.Close()
	}
	i.nl.Close()
	_ = i.hostNS.Close() // release has no caller to report to; the fd goes with the process
}

// Name implements isolator.Isolator.
func (i *Isolator) Name() string { return "network" }

// Gateway returns the bridge's address, the containers' default gateway.
func (i *Isolator) Gateway() netip.Addr { return i.gw }

// Address returns the address of container id, or an error wrapping
// isolator.ErrNotFound when it has no network prepared.
func (i *Isolator) Address(id string) (netip.Addr, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	r, ok := i.recs[id]
	if !ok {
		return netip.Addr{}, fmt.Errorf("address of %s: %w", id, isolator.ErrNotFound)
	}
	return r.Address, nil
}

func (i *Isolator) netnsPath(id string) string { return filepath.Join(i.cfg.NetNSDir, id) }

func (i *Isolator) vethName(index uint32) string {
	return fmt.Sprintf("%s%04x", i.vethPrefix, index)
}

func (i *Isolator) ensureBridge() (int, error) {
	name := i.cfg.Bridge
	l, err := i.nl.LinkByName(name)
	if isLinkNotFound(err) {
		la := netlink.NewLinkAttrs()
		la.Name = name
		if err := i.nl.LinkAdd(&netlink.Bridge{LinkAttrs: la}); err != nil {
			return 0, fmt.Errorf("create bridge %s: %w", name, err)
		}
		l, err = i.nl.LinkByName(name)
	}
	if err != nil {
		return 0, fmt.Errorf("find bridge %s: %w", name, err)
	}
	if l.Type() != "bridge" {
		return 0, fmt.Errorf("link %s is a %s, not a bridge: %w", name, l.Type(), ErrInvalid)
	}
	if err := i.nl.AddrReplace(l, ipNet(i.gw, i.cfg.Subnet.Bits())); err != nil {
		return 0, fmt.Errorf("set address of bridge %s: %w", name, err)
	}
	if err := i.nl.LinkSetUp(l); err != nil {
		return 0, fmt.Errorf("set bridge %s up: %w", name, err)
	}
	return l.Attrs().Index, nil
}

func ipNet(a netip.Addr, bits int) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, 32)}}
}

// Prepare implements isolator.Isolator. With limits.Network it creates the
// container's namespace, veth, address, route and HTB classes, and sets
// launch.NetNSPath (and BRIM_CONTAINER_IP in launch.Env); without it, it does
// nothing and the launcher gives the container a namespace with only
// loopback. limits.Ports must be in Config.PortRange; their host ports
// are bound (and held until the mappings go: hold_linux.go), then
// installed as DNAT rules once the container's address exists. A failure
// removes whatever was made. Errors wrap ErrExist, ErrExhausted,
// ErrInvalid (also for bad port mappings and ports outside the range,
// with isolator.ErrBadPort) or isolator.ErrPortInUse (a host port mapped
// to another container or held by a process of the host).
func (i *Isolator) Prepare(ctx context.Context, id string, limits isolator.Limits, launch *isolator.Launch) error {
	if !limits.Network {
		if len(limits.Ports) > 0 {
			return fmt.Errorf("prepare network of %s: port mappings need networking: %w", id, ErrInvalid)
		}
		return nil
	}
	if err := checkID(id); err != nil {
		return err
	}
	if err := isolator.CheckPorts(limits.Ports); err != nil {
		return fmt.Errorf("prepare network of %s: %w: %w", id, ErrInvalid, err)
	}
	for _, p := range limits.Ports {
		if !i.cfg.PortRange.Contains(p.HostPort) {
			return fmt.Errorf("prepare network of %s: port mapping %s: host port %d is outside the range reserved for port mappings (%s): %w: %w",
				id, p, p.HostPort, i.cfg.PortRange, ErrInvalid, isolator.ErrBadPort)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("prepare network of %s: %w", id, err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, ok := i.recs[id]; ok {
		return fmt.Errorf("prepare network of %s: %w", id, ErrExist)
	}
	if err := i.portsFreeLocked(limits.Ports); err != nil {
		return fmt.Errorf("prepare network of %s: %w", id, err)
	}
	if err := i.hostAddrsExist(limits.Ports); err != nil {
		return fmt.Errorf("prepare network of %s: %w", id, err)
	}
	// Bound before the rules exist, held until they are gone (hold_linux.go).
	held, err := i.holdPorts(limits.Ports)
	if err != nil {
		return fmt.Errorf("prepare network of %s: %w", id, err)
	}
	used := make(map[uint32]bool, len(i.recs))
	for _, r := range i.recs {
		used[r.Index] = true
	}
	first, last := indexRange(i.cfg.Subnet)
	idx, ok := nextIndex(used, i.last, first, last)
	if !ok {
		held.close()
		return fmt.Errorf("prepare network of %s: %s: %w", id, i.cfg.Subnet, ErrExhausted)
	}
	r := record{ID: id, Index: idx, Address: addrAt(i.cfg.Subnet, idx), Limits: limits, Seq: i.seq + 1}
	// The record goes first: whatever happens next, Cleanup and Recover
	// know what to look for.
	if err := i.store.put(r); err != nil {
		held.close()
		return fmt.Errorf("prepare network of %s: %w", id, err)
	}
	i.recs[id] = r
	i.held[id] = held
	i.last, i.seq = idx, r.Seq
	err = i.setup(r)
	if err == nil && len(r.Limits.Ports) > 0 {
		if err = i.addMappingsLocked(r); err == nil {
			err = i.step("ports")
		}
	}
	if err != nil {
		err = fmt.Errorf("prepare network of %s: %w", id, err)
		return errors.Join(err, i.cleanupLocked(id))
	}
	launch.NetNSPath = i.netnsPath(id)
	launch.Env = append(launch.Env, "BRIM_CONTAINER_IP="+r.Address.String())
	return nil
}

func (i *Isolator) step(name string) error {
	if i.failStep == nil {
		return nil
	}
	return i.failStep(name)
}

// setup makes the kernel objects of r, in an order that Cleanup undoes. It
// uses a spare namespace and veth when there is one (i.mu is held).
func (i *Isolator) setup(r record) error {
	name := i.vethName(r.Index)
	var nsf *os.File
	var host netlink.Link
	if sp := i.takeSpare(); sp != nil {
		// Renamed first, so that Cleanup finds it by its name whatever
		// fails next.
		nsf = sp.ns
		l, err := i.nl.LinkByName(sp.host)
		if err == nil {
			err = i.nl.LinkSetName(l, name)
		}
		if err != nil {
			_ = i.deleteLink(sp.host)
			_ = nsf.Close()
			return fmt.Errorf("rename veth %s to %s: %w", sp.host, name, err)
		}
		host = l
	} else {
		var err error
		if nsf, err = newNetNS(); err != nil {
			return err
		}
	}
	// Once bind-mounted, the mount holds the namespace (and a spare's veth
	// pair in it); before, closing the file destroys them.
	defer nsf.Close()
	if err := bindNetNS(nsf, i.netnsPath(r.ID)); err != nil {
		return err
	}
	if err := i.step("netns"); err != nil {
		return err
	}
	ns := netns.NsHandle(int(nsf.Fd()))

	if host != nil {
		err := i.nl.LinkSetMasterByIndex(host, i.bridge)
		if err == nil && i.cfg.Isolate {
			err = i.nl.LinkSetIsolated(host, true)
		}
		if err == nil {
			err = i.nl.LinkSetUp(host)
		}
		if err != nil {
			return fmt.Errorf("attach veth %s to %s: %w", name, i.cfg.Bridge, err)
		}
	} else {
		la := netlink.NewLinkAttrs()
		la.Name = name
		la.MasterIndex = i.bridge
		la.Flags = net.FlagUp
		veth := &netlink.Veth{LinkAttrs: la, PeerName: containerIf, PeerNamespace: netlink.NsFd(int(ns))}
		if err := i.nl.LinkAdd(veth); err != nil {
			return fmt.Errorf("create veth %s: %w", name, err)
		}
		host = veth
		// The container does not run yet: nothing crosses the port
		// before it is isolated.
		if i.cfg.Isolate {
			if err := i.nl.LinkSetIsolated(host, true); err != nil {
				return fmt.Errorf("isolate bridge port %s: %w", name, err)
			}
		}
	}
	if err := i.step("veth"); err != nil {
		return err
	}

	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("open netlink in netns: %w", err)
	}
	defer nh.Close()
	lo, err := nh.LinkByName("lo")
	if err == nil {
		err = nh.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("set loopback up: %w", err)
	}
	eth, err := nh.LinkByName(containerIf)
	if err != nil {
		return fmt.Errorf("find %s in netns: %w", containerIf, err)
	}
	if err := nh.AddrAdd(eth, ipNet(r.Address, i.cfg.Subnet.Bits())); err != nil {
		return fmt.Errorf("add address %s: %w", r.Address, err)
	}
	if err := nh.LinkSetUp(eth); err != nil {
		return fmt.Errorf("set %s up: %w", containerIf, err)
	}
	if err := nh.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: i.gw.AsSlice()}); err != nil {
		return fmt.Errorf("add default route via %s: %w", i.gw, err)
	}
	if err := i.step("address"); err != nil {
		return err
	}
	if err := i.shapeVeth(host.Attrs().Index, r); err != nil {
		return err
	}
	return i.step("shaping")
}

// VerifiesOnly implements isolator.Verifier: Isolate only checks that the
// init joined the namespace named in Launch.NetNSPath.
func (i *Isolator) VerifiesOnly() bool { return true }

// Isolate implements isolator.Isolator. The container joined its namespace
// when it was created; Isolate checks that pid is in it, so a launcher that
// ignored Launch.NetNSPath fails the launch instead of running a container
// without its network. A container without network is not checked.
func (i *Isolator) Isolate(ctx context.Context, id string, pid int) error {
	i.mu.Lock()
	_, ok := i.recs[id]
	i.mu.Unlock()
	if !ok {
		return nil
	}
	var want, got unix.Stat_t
	if err := unix.Stat(i.netnsPath(id), &want); err != nil {
		return fmt.Errorf("isolate network of %s: %w", id, err)
	}
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &got); err != nil {
		return fmt.Errorf("isolate network of %s: %w", id, err)
	}
	if got.Dev != want.Dev || got.Ino != want.Ino {
		return fmt.Errorf("isolate network of %s: pid %d is not in %s: %w", id, pid, i.netnsPath(id), ErrInvalid)
	}
	return nil
}

// Update implements isolator.Isolator: it changes the container's rate and
// class live (both directions). It returns an error wrapping
// isolator.ErrNotFound when the container has no network but limits ask for
// one; a container without network and limits without it is a no-op. A
// record that cannot be written (a full state dir) is kept in memory and
// written when it can (Unsaved): the classes changed all the same.
func (i *Isolator) Update(ctx context.Context, id string, limits isolator.Limits) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	r, ok := i.recs[id]
	if !ok {
		if !limits.Network {
			return nil
		}
		return fmt.Errorf("update network of %s: %w", id, isolator.ErrNotFound)
	}
	if err := i.applyLimits(r, limits); err != nil {
		return fmt.Errorf("update network of %s: %w", id, err)
	}
	return nil
}

// applyLimits sets the classes of r to limits and records them: in
// memory, and on disk when they changed (saveLocked).
func (i *Isolator) applyLimits(r record, limits isolator.Limits) error {
	s := classFor(limits, i.cfg.HostRateMbit)
	for _, ifb := range []int{i.txIFB, i.rxIFB} {
		if err := i.setClass(ifb, r.Index, s); err != nil {
			return fmt.Errorf("change htb class: %w", err)
		}
	}
	limits.Network = true
	limits.Ports = r.Limits.Ports // fixed at Prepare
	if reflect.DeepEqual(limits, r.Limits) {
		return nil // as recorded: nothing to write
	}
	r.Limits = limits
	i.recs[r.ID] = r
	i.saveLocked(r)
	return nil
}

// saveLocked writes r, already in recs. A write that fails (a full state
// dir) is no failure of what r describes, which exists: the record stays
// in memory, is reported (Unsaved) and written by retryUnsaved or the
// next change. Recover used to rewrite every record and fail on the
// first: an agent restarted on a full state dir did not start (`recover
// network: … write ipam state: … no space left on device`), and its
// containers ran unmanaged until space was freed (issue 30, chaos
// disk-full-recover).
func (i *Isolator) saveLocked(r record) {
	if err := i.store.put(r); err != nil {
		i.unsaved[r.ID] = err
		return
	}
	delete(i.unsaved, r.ID)
}

// retryUnsaved writes the records kept in memory (saveLocked); it stops
// at the first that fails again (the disk is still full).
func (i *Isolator) retryUnsaved() {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(i.unsaved)) {
		r, ok := i.recs[id]
		if !ok {
			delete(i.unsaved, id)
			continue
		}
		if i.saveLocked(r); i.unsaved[id] != nil {
			return
		}
	}
}

// Unsaved reports the containers whose IPAM record is only in memory,
// with the error of its last write (a full state dir): written once the
// disk allows, every recordRetry. Safe for concurrent use.
func (i *Isolator) Unsaved() map[string]error {
	i.mu.Lock()
	defer i.mu.Unlock()
	return maps.Clone(i.unsaved)
}

// Usage implements isolator.Isolator: the interface counters as seen from
// inside the container (rx = received by the container) and the counters of
// its HTB classes, "egress" (container → out) and "ingress". A container
// without network adds nothing.
func (i *Isolator) Usage(ctx context.Context, id string, stats *isolator.Statistics) error {
	i.mu.Lock()
	r, ok := i.recs[id]
	i.mu.Unlock()
	if !ok {
		return nil
	}
	ns, err := netns.GetFromPath(i.netnsPath(id))
	if err != nil {
		return fmt.Errorf("usage of %s: open netns: %w", id, err)
	}
	defer func() { _ = ns.Close() }() // read only; a close error changes no reading
	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("usage of %s: open netlink in netns: %w", id, err)
	}
	defer nh.Close()
	eth, err := nh.LinkByName(containerIf)
	if err != nil {
		return fmt.Errorf("usage of %s: find %s: %w", id, containerIf, err)
	}
	var tcs []isolator.TrafficControlStatistics
	for _, d := range []struct {
		name string
		ifb  int
	}{{"egress", i.txIFB}, {"ingress", i.rxIFB}} {
		cs, err := i.classStats(d.ifb, r.Index)
		if err != nil {
			return fmt.Errorf("usage of %s: %s class: %w", id, d.name, err)
		}
		t := isolator.TrafficControlStatistics{ID: d.name}
		if b := cs.Basic; b != nil {
			t.Bytes, t.Packets = b.Bytes, uint64(b.Packets)
		}
		if q := cs.Queue; q != nil {
			t.Backlog, t.Drops, t.Overlimits = uint64(q.Backlog), uint64(q.Drops), uint64(q.Overlimits)
			t.Qlen, t.Requeues = uint64(q.Qlen), uint64(q.Requeues)
		}
		if e := cs.RateEst; e != nil {
			t.RateBps, t.RatePps = uint64(e.Bps), uint64(e.Pps)
		}
		tcs = append(tcs, t)
	}
	s := eth.Attrs().Statistics
	if s == nil {
		return fmt.Errorf("usage of %s: no counters on %s", id, containerIf)
	}
	stats.HasNet = true
	stats.NetRxBytes, stats.NetRxPackets, stats.NetRxDropped, stats.NetRxErrors = s.RxBytes, s.RxPackets, s.RxDropped, s.RxErrors
	stats.NetTxBytes, stats.NetTxPackets, stats.NetTxDropped, stats.NetTxErrors = s.TxBytes, s.TxPackets, s.TxDropped, s.TxErrors
	stats.NetTrafficClass = tcs
	return nil
}

// Cleanup implements isolator.Isolator: it removes the container's classes,
// selectors, veth, namespace and record. It accepts a half-prepared
// container and is idempotent; the record stays until everything else is
// gone, so a failed Cleanup can be retried.
func (i *Isolator) Cleanup(ctx context.Context, id string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	err := i.cleanupLocked(id)
	i.askRefill()
	return err
}

// Release gives back what an exited container holds on the host — its HTB
// classes and queues, selectors, veth, namespace and address (the record
// goes, so the address can be handed out again) — as soon as it has
// exited, instead of at Cleanup: exited containers kept until removed would
// otherwise exhaust the subnet. Cleanup afterwards has nothing left to do.
// The caller keeps whatever it wants to show of the container's network
// (Address before Release). Idempotent; a container without network is a
// no-op.
func (i *Isolator) Release(ctx context.Context, id string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	err := i.cleanupLocked(id)
	i.askRefill()
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

func (i *Isolator) cleanupLocked(id string) error {
	r, ok := i.recs[id]
	if !ok {
		return nil
	}
	var errs []error
	if len(r.Limits.Ports) > 0 {
		if err := i.delMappingsLocked(id); err != nil {
			errs = append(errs, err)
		} else if err := i.forgetFlows(r.Address); err != nil {
			errs = append(errs, err)
		}
	}
	if err := i.unshape(r.Index); err != nil {
		errs = append(errs, err)
	}
	if err := i.deleteLink(i.vethName(r.Index)); err != nil {
		errs = append(errs, err)
	}
	if err := removeNetNS(i.netnsPath(id)); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		if err := i.store.remove(id); err != nil {
			errs = append(errs, err)
		} else {
			delete(i.recs, id)
			delete(i.unsaved, id)
			// Its rules are gone: a host process may have the port.
			i.releasePortsLocked(id)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clean up network of %s: %w", id, err)
	}
	return nil
}

func (i *Isolator) deleteLink(name string) error {
	l, err := i.nl.LinkByName(name)
	if isLinkNotFound(err) {
		return nil
	}
	if err == nil {
		err = i.nl.LinkDel(l)
	}
	if err != nil && !isGone(err) {
		return fmt.Errorf("delete link %s: %w", name, err)
	}
	return nil
}

// Recover implements isolator.Isolator: every recorded container that is not
// in known (or no longer asks for network) is cleaned up, the classes of the
// known ones are set to their limits again, and whatever carries this
// isolator's names without a record — netns files, veths, HTB classes and
// selectors — is removed. It writes nothing to adopt a container as
// recorded: on a full state dir it adopts what runs, keeps a changed
// record in memory and writes it when it can (Unsaved).
func (i *Isolator) Recover(ctx context.Context, known map[string]isolator.Limits) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	defer i.askRefill()
	var errs []error
	for id, r := range i.recs {
		l, ok := known[id]
		if !ok || !l.Network {
			if err := i.cleanupLocked(id); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := i.restore(r, l); err != nil {
			errs = append(errs, fmt.Errorf("restore network of %s: %w", id, err))
		}
	}
	if err := i.sweepLocked(); err != nil {
		errs = append(errs, err)
	}
	if err := i.syncFirewallLocked(""); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("recover network: %w", err)
	}
	return nil
}

// restore puts back the classes and selectors of a live container (a no-op
// when they are there) with limits l.
func (i *Isolator) restore(r record, l isolator.Limits) error {
	// The port follows Config.Isolate as it is now, also when the agent
	// restarted with another setting.
	name := i.vethName(r.Index)
	host, err := i.nl.LinkByName(name)
	if err == nil {
		err = i.nl.LinkSetIsolated(host, i.cfg.Isolate)
	}
	if err != nil {
		return fmt.Errorf("set isolation of bridge port %s: %w", name, err)
	}
	for _, d := range []struct {
		ifb int
		off int32
	}{{i.txIFB, offSrc}, {i.rxIFB, offDst}} {
		if err := i.setSelector(d.ifb, r.Index, r.Address, d.off); err != nil {
			return err
		}
	}
	return i.applyLimits(r, l)
}

// sweepLocked removes what carries this isolator's names but has no record.
func (i *Isolator) sweepLocked() error {
	live := make(map[uint32]bool, len(i.recs))
	for _, r := range i.recs {
		live[r.Index] = true
	}
	var errs []error
	ents, err := os.ReadDir(i.cfg.NetNSDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("list netns dir: %w", err))
	}
	for _, e := range ents {
		if _, ok := i.recs[e.Name()]; !ok {
			if err := removeNetNS(filepath.Join(i.cfg.NetNSDir, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	links, err := dump(i.nl.LinkList)
	if err != nil {
		errs = append(errs, fmt.Errorf("list links: %w", err))
	}
	for _, l := range links {
		name := l.Attrs().Name
		rest, ok := strings.CutPrefix(name, i.vethPrefix)
		if !ok || l.Type() != "veth" || i.isSpare(name) {
			continue
		}
		if n, err := strconv.ParseUint(rest, 16, 32); err == nil && live[uint32(n)] {
			continue
		}
		if err := i.deleteLink(name); err != nil {
			errs = append(errs, err)
		}
	}
	stray := map[uint32]bool{}
	for _, ifb := range []int{i.txIFB, i.rxIFB} {
		link := &netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Index: ifb}}
		classes, err := dump(func() ([]netlink.Class, error) { return i.nl.ClassList(link, 0) })
		if err != nil {
			errs = append(errs, fmt.Errorf("list classes: %w", err))
		}
		for _, c := range classes {
			h := c.Attrs().Handle
			if minor := h & 0xffff; h>>16 == 1 && minor != 1 && minor != defaultMinor && !live[minor] {
				stray[minor] = true
			}
		}
		filters, err := dump(func() ([]netlink.Filter, error) { return i.nl.FilterList(link, rootHandle) })
		if err != nil {
			errs = append(errs, fmt.Errorf("list filters: %w", err))
		}
		for _, f := range filters {
			if p := uint32(f.Attrs().Priority); !live[p] {
				stray[p] = true
			}
		}
	}
	for minor := range stray {
		if err := i.unshape(minor); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close releases the isolator's netlink socket, the sockets holding the
// mapped host ports and its state dir lock. Containers keep their
// network; a new Isolator on the same Config takes them over (Recover).
// When no container has networking any more, it puts back the host's IPv4
// forwarding as it was before Config.NAT turned it on: running
// containers need it, one that starts later turns it on again.
func (i *Isolator) Close() error {
	i.stopRefiller()
	var err error
	i.closeOnce.Do(func() {
		i.mu.Lock()
		for id := range i.held {
			i.releasePortsLocked(id)
		}
		if len(i.recs) == 0 {
			_, err = restoreForwarding(int(i.hostNS), i.cfg.StateDir)
		}
		i.mu.Unlock()
		i.release()
		err = errors.Join(err, i.lock.Close())
	})
	return err
}

// Uninstall removes every container's network (as Cleanup) and then the
// bridge, the IFB devices, the nftables table and the netns dir's mount,
// and puts back the host's IPv4 forwarding as it was before Config.NAT
// turned it on. The Isolator is unusable afterwards. For tests; a node
// whose agent is gone is taken out of service with Teardown.
func (i *Isolator) Uninstall(ctx context.Context) error {
	i.stopRefiller()
	i.mu.Lock()
	defer i.mu.Unlock()
	var errs []error
	for id := range i.recs {
		if err := i.cleanupLocked(id); err != nil {
			errs = append(errs, err)
		}
	}
	if err := i.sweepLocked(); err != nil {
		errs = append(errs, err)
	}
	for _, name := range []string{i.cfg.Bridge + "-tx", i.cfg.Bridge + "-rx", i.cfg.Bridge} {
		if err := i.deleteLink(name); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := i.removeTable(); err != nil {
		errs = append(errs, err)
	}
	if err := unshareDir(i.cfg.NetNSDir); err != nil {
		errs = append(errs, err)
	}
	if _, err := restoreForwarding(int(i.hostNS), i.cfg.StateDir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("uninstall network: %w", err)
	}
	return nil
}

// portsFreeLocked returns an error wrapping isolator.ErrPortInUse when a
// host port of ports is mapped to a recorded container. i.mu is held.
func (i *Isolator) portsFreeLocked(ports []isolator.PortMapping) error {
	for _, p := range ports {
		for _, r := range i.recs {
			for _, q := range r.Limits.Ports {
				if p.Conflicts(q) {
					return fmt.Errorf("host port %d/%s (%s): mapped to container %s (%s): %w", p.HostPort, p.Protocol, p, r.ID, q, isolator.ErrPortInUse)
				}
			}
		}
	}
	return nil
}

// hostAddrsExist returns an error wrapping ErrInvalid and
// isolator.ErrBadPort when a mapping names a host address that no
// interface of the host has: its rule would never match.
func (i *Isolator) hostAddrsExist(ports []isolator.PortMapping) error {
	var addrs []netlink.Addr
	for _, p := range ports {
		if !p.HostIP.IsValid() {
			continue
		}
		if addrs == nil {
			var err error
			if addrs, err = dump(func() ([]netlink.Addr, error) { return i.nl.AddrList(nil, netlink.FAMILY_V4) }); err != nil {
				return fmt.Errorf("list host addresses: %w", err)
			}
		}
		if !slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return a.IP.Equal(p.HostIP.AsSlice()) }) {
			return fmt.Errorf("port mapping %s: %s is not an address of this host: %w: %w", p, p.HostIP, ErrInvalid, isolator.ErrBadPort)
		}
	}
	return nil
}
