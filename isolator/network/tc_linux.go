//go:build linux

package network

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/brimnode/brim/isolator"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// HTB handles on the IFB devices: root qdisc 1:, the uplink class 1:1, the
// class of unclassified traffic (ARP, anything with a foreign address) 1:ffff,
// and one class 1:<index> per container. Container indexes are ≤ 0xfffe
// because the subnet is at least a /16.
var (
	rootHandle    = netlink.MakeHandle(1, 0)
	uplinkHandle  = netlink.MakeHandle(1, 1)
	defaultHandle = netlink.MakeHandle(1, defaultMinor)
)

const defaultMinor = 0xffff

// bestEffortLimits classify traffic of no container (ARP, foreign addresses):
// lowest priority, borrowing only what is idle.
var bestEffortLimits = isolator.Limits{Class: isolator.BestEffort}

// IPv4 header offsets of the addresses, for u32 keys (relative to the
// network header).
const (
	offSrc = 12
	offDst = 16
)

// ensureIFB creates (or reuses) the IFB device name with an HTB root whose
// uplink class runs at hostMbit, and returns its index.
func (i *Isolator) ensureIFB(name string, hostMbit int64) (int, error) {
	l, err := i.nl.LinkByName(name)
	if isLinkNotFound(err) {
		la := netlink.NewLinkAttrs()
		la.Name = name
		la.TxQLen = 1000 // the IFB default (32) makes HTB leaves drop bursts
		if err := i.nl.LinkAdd(&netlink.Ifb{LinkAttrs: la}); err != nil && !errors.Is(err, unix.EEXIST) {
			return 0, fmt.Errorf("create ifb %s: %w", name, err)
		}
		l, err = i.nl.LinkByName(name)
	}
	if err != nil {
		return 0, fmt.Errorf("find ifb %s: %w", name, err)
	}
	if l.Type() != "ifb" {
		return 0, fmt.Errorf("link %s is a %s, not an ifb: %w", name, l.Type(), ErrInvalid)
	}
	if err := i.nl.LinkSetUp(l); err != nil {
		return 0, fmt.Errorf("set ifb %s up: %w", name, err)
	}
	idx := l.Attrs().Index
	qds, err := dump(func() ([]netlink.Qdisc, error) { return i.nl.QdiscList(l) })
	if err != nil {
		return 0, fmt.Errorf("list qdiscs of %s: %w", name, err)
	}
	haveRoot := false
	for _, q := range qds {
		if q.Attrs().Parent == netlink.HANDLE_ROOT && q.Attrs().Handle == rootHandle && q.Type() == "htb" {
			haveRoot = true
		}
	}
	if !haveRoot {
		q := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: rootHandle, Parent: netlink.HANDLE_ROOT})
		q.Defcls = defaultMinor
		if err := i.nl.QdiscReplace(q); err != nil {
			return 0, fmt.Errorf("add htb to %s: %w", name, err)
		}
	}
	if err := i.nl.ClassReplace(htbClass(idx, rootHandle, uplinkHandle, parentFor(hostMbit))); err != nil {
		return 0, fmt.Errorf("set uplink class on %s: %w", name, err)
	}
	unclassified := classFor(bestEffortLimits, hostMbit)
	if err := i.nl.ClassReplace(htbClass(idx, uplinkHandle, defaultHandle, unclassified)); err != nil {
		return 0, fmt.Errorf("set default class on %s: %w", name, err)
	}
	return idx, nil
}

func htbClass(link int, parent, handle uint32, s classSpec) *netlink.HtbClass {
	return netlink.NewHtbClass(
		netlink.ClassAttrs{LinkIndex: link, Parent: parent, Handle: handle},
		netlink.HtbClassAttrs{Rate: s.Rate, Ceil: s.Ceil, Prio: s.Prio, Quantum: s.Quantum},
	)
}

// setClass creates or changes the container's class on one IFB, and the
// byte-limited queue under it (see leafQueueBytes).
func (i *Isolator) setClass(ifb int, index uint32, s classSpec) error {
	if err := i.nl.ClassReplace(htbClass(ifb, uplinkHandle, netlink.MakeHandle(1, uint16(index)), s)); err != nil {
		return err
	}
	return i.setLeafQueue(ifb, index, leafQueueBytes(s))
}

// leafHandle is the handle of the queue under container index's class:
// <index>:0 (index ≥ 2, so never the root's 1:).
func leafHandle(index uint32) uint32 { return netlink.MakeHandle(uint16(index), 0) }

// setLeafQueue creates or changes the bfifo of limit bytes under the
// container's class on ifb (deleted with the class). The netlink library
// has no fifo qdisc type, so the request is built here: TCA_KIND "bfifo"
// and TCA_OPTIONS a struct tc_fifo_qopt { __u32 limit; }.
func (i *Isolator) setLeafQueue(ifb int, index uint32, limit uint32) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE|unix.NLM_F_ACK)
	req.Sockets = i.tcSock
	req.AddData(&nl.TcMsg{
		Family:  nl.FAMILY_ALL,
		Ifindex: int32(ifb),
		Handle:  leafHandle(index),
		Parent:  netlink.MakeHandle(1, uint16(index)),
	})
	req.AddData(nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated("bfifo")))
	opt := make([]byte, 4)
	nl.NativeEndian().PutUint32(opt, limit)
	req.AddData(nl.NewRtAttr(nl.TCA_OPTIONS, opt))
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("set bfifo of %d bytes under class 1:%x: %w", limit, index, err)
	}
	return nil
}

// leafQueueLimit returns the byte limit of the bfifo under the container's
// class on ifb, read back from the kernel (0 when there is none).
func (i *Isolator) leafQueueLimit(ifb int, index uint32) (uint32, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETQDISC, unix.NLM_F_DUMP)
	req.Sockets = i.tcSock
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(ifb)})
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWQDISC)
	if err != nil {
		return 0, fmt.Errorf("list qdiscs: %w", err)
	}
	for _, m := range msgs {
		tcm := nl.DeserializeTcMsg(m)
		if tcm.Ifindex != int32(ifb) || tcm.Handle != leafHandle(index) {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[tcm.Len():])
		if err != nil {
			return 0, fmt.Errorf("parse qdisc: %w", err)
		}
		var kind string
		var opt []byte
		for _, a := range attrs {
			switch a.Attr.Type {
			case nl.TCA_KIND:
				kind = string(bytes.TrimRight(a.Value, "\x00"))
			case nl.TCA_OPTIONS:
				opt = a.Value
			}
		}
		if kind == "bfifo" && len(opt) >= 4 {
			return nl.NativeEndian().Uint32(opt), nil
		}
	}
	return 0, nil
}

// selector classifies IPv4 packets whose address at off is addr into the
// container's class; its filter priority is the container's index, which is
// how it is found again to delete it.
func selector(ifb int, index uint32, addr netip.Addr, off int32) *netlink.U32 {
	a := addr.As4()
	return &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ifb, Parent: rootHandle, Priority: uint16(index), Protocol: unix.ETH_P_IP},
		ClassId:     netlink.MakeHandle(1, uint16(index)),
		Sel: &nl.TcU32Sel{
			Flags: nl.TC_U32_TERMINAL,
			Keys:  []nl.TcU32Key{{Mask: 0xffffffff, Val: binary.BigEndian.Uint32(a[:]), Off: off}},
		},
	}
}

// setSelector makes the container's selector on ifb the only filter at its
// priority: a u32 filter added without a handle is added beside an existing
// one, never replaces it, so whatever is there is deleted first.
func (i *Isolator) setSelector(ifb int, index uint32, addr netip.Addr, off int32) error {
	if err := i.delSelector(ifb, index); err != nil {
		return err
	}
	if err := i.nl.FilterAdd(selector(ifb, index, addr, off)); err != nil {
		return fmt.Errorf("add u32 selector %d: %w", index, err)
	}
	return nil
}

// delSelector deletes every filter at the container's priority on ifb.
func (i *Isolator) delSelector(ifb int, index uint32) error {
	f := &netlink.U32{FilterAttrs: netlink.FilterAttrs{LinkIndex: ifb, Parent: rootHandle, Priority: uint16(index), Protocol: unix.ETH_P_IP}}
	if err := i.nl.FilterDel(f); err != nil && !isGone(err) {
		return fmt.Errorf("delete u32 selector %d: %w", index, err)
	}
	return nil
}

// redirect sends everything crossing hook (ingress or egress of the host-side
// veth) to the IFB device ifb, where it is shaped and then sent on.
func redirect(link int, hook uint32, ifb int) *netlink.U32 {
	return &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: link, Parent: hook, Priority: 1, Protocol: unix.ETH_P_ALL},
		Actions:     []netlink.Action{netlink.NewMirredAction(ifb)},
	}
}

// shapeVeth puts the container's classes and selectors on both IFBs, then
// redirects the host-side veth's traffic to them.
func (i *Isolator) shapeVeth(veth int, r record) error {
	s := classFor(r.Limits, i.cfg.HostRateMbit)
	for _, d := range []struct {
		ifb int
		off int32
	}{{i.txIFB, offSrc}, {i.rxIFB, offDst}} {
		if err := i.setClass(d.ifb, r.Index, s); err != nil {
			return fmt.Errorf("add htb class: %w", err)
		}
		if err := i.setSelector(d.ifb, r.Index, r.Address, d.off); err != nil {
			return err
		}
	}
	clsact := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: veth, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := i.nl.QdiscAdd(clsact); err != nil {
		return fmt.Errorf("add clsact: %w", err)
	}
	if err := i.nl.FilterAdd(redirect(veth, netlink.HANDLE_MIN_INGRESS, i.txIFB)); err != nil {
		return fmt.Errorf("redirect egress to ifb: %w", err)
	}
	if err := i.nl.FilterAdd(redirect(veth, netlink.HANDLE_MIN_EGRESS, i.rxIFB)); err != nil {
		return fmt.Errorf("redirect ingress to ifb: %w", err)
	}
	return nil
}

// unshape removes the container's selectors and classes from both IFBs;
// what is already gone is not an error.
func (i *Isolator) unshape(index uint32) error {
	var errs []error
	for _, ifb := range []int{i.txIFB, i.rxIFB} {
		if err := i.delSelector(ifb, index); err != nil {
			errs = append(errs, err)
		}
		c := &netlink.HtbClass{ClassAttrs: netlink.ClassAttrs{LinkIndex: ifb, Parent: uplinkHandle, Handle: netlink.MakeHandle(1, uint16(index))}}
		if err := i.nl.ClassDel(c); err != nil && !isGone(err) {
			errs = append(errs, fmt.Errorf("delete htb class %d: %w", index, err))
		}
	}
	return errors.Join(errs...)
}

// classStats returns the counters of the container's class on ifb.
func (i *Isolator) classStats(ifb int, index uint32) (*netlink.ClassStatistics, error) {
	classes, err := dump(func() ([]netlink.Class, error) {
		return i.nl.ClassList(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Index: ifb}}, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("list classes: %w", err)
	}
	want := netlink.MakeHandle(1, uint16(index))
	for _, c := range classes {
		if c.Attrs().Handle == want && c.Attrs().Statistics != nil {
			return c.Attrs().Statistics, nil
		}
	}
	return nil, fmt.Errorf("class 1:%x: %w", index, unix.ENOENT)
}

// isGone reports a netlink error about an object that does not exist (any
// more): deleting it is then done.
func isGone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) || isLinkNotFound(err)
}

// dump runs a netlink dump again when the kernel reports that concurrent
// changes (links, classes being added elsewhere) interrupted it.
func dump[T any](f func() (T, error)) (T, error) {
	for try := 0; ; try++ {
		v, err := f()
		if !errors.Is(err, netlink.ErrDumpInterrupted) || try == 9 {
			return v, err
		}
	}
}

func isLinkNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}
