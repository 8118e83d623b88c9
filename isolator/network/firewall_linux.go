//go:build linux

package network

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	vnl "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/brimnode/brim/isolator"
)

// ipsDstNAT is the conntrack status bit of a connection whose destination
// was translated (IPS_DST_NAT, <linux/netfilter/nf_conntrack_common.h>).
const ipsDstNAT = 1 << 5

// icmpPktFiltered is ICMP "communication administratively prohibited"
// (ICMP_PKT_FILTERED), the answer to what a container may not send the host.
const icmpPktFiltered = 13

// fwTable is the nftables table that holds all of this isolator's rules;
// one table per bridge, replaced as a whole in one transaction and deleted
// as one object. No other table is ever touched.
func (i *Isolator) fwTable() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyIPv4, Name: "brim-" + i.cfg.Bridge}
}

// nftConn returns an nftables connection to the isolator's host namespace
// for a transaction of about msgs messages. The library asks an
// acknowledgement for every message and reads them after sending the
// whole batch: with the default socket buffers a table of 100 port
// mappings failed with ENOBUFS (acknowledgements lost: whether the batch
// applied cannot be told) and one of 1000 with EMSGSIZE. The buffers are
// sized to the batch (forced: beyond net.core.rmem_max, as root may).
func (i *Isolator) nftConn(msgs int) (*nftables.Conn, error) {
	size := max(1<<20, msgs*4096)
	c, err := nftables.New(nftables.WithNetNSFd(int(i.hostNS)), nftables.WithSockOptions(func(nc *netlink.Conn) error {
		raw, err := nc.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		err = raw.Control(func(fd uintptr) {
			serr = errors.Join(
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size),
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, size))
		})
		return errors.Join(err, serr)
	}))
	if err != nil {
		return nil, fmt.Errorf("open nftables: %w", err)
	}
	return c, nil
}

// Chains of the isolator's table that hold the port mappings.
const (
	chainPre = "prerouting"
	chainOut = "output"
)

// mappingTag is the comment of the rules of container id's port mappings
// (shown by `nft list table`), by which Release finds them.
func mappingTag(id string) []byte {
	return userdata.AppendString(nil, userdata.TypeComment, "brim container "+id)
}

// addMappingRules queues the two rules of one mapping.
func addMappingRules(c *nftables.Conn, t *nftables.Table, id string, m mapping) {
	dst := localDst()
	if m.HostIP.IsValid() {
		dst = addrMatch(16, netip.PrefixFrom(m.HostIP, 32), true)
	}
	notLoopback := addrMatch(16, netip.MustParsePrefix("127.0.0.0/8"), false)
	tag := mappingTag(id)
	c.AddRule(&nftables.Rule{Table: t, Chain: &nftables.Chain{Name: chainPre, Table: t}, UserData: tag,
		Exprs: slices.Concat(dst, l4port(m.Protocol, m.HostPort), dnat(m.addr, m.ContainerPort))})
	c.AddRule(&nftables.Rule{Table: t, Chain: &nftables.Chain{Name: chainOut, Table: t}, UserData: tag,
		Exprs: slices.Concat(notLoopback, dst, l4port(m.Protocol, m.HostPort), dnat(m.addr, m.ContainerPort))})
}

// addMappingsLocked installs the port mappings of r in one transaction,
// without touching the rest of the table (replacing it would re-register
// its hooks: ≈ 12 ms a launch). When that fails (the table is gone: someone
// deleted it) the whole table is made again. i.mu is held; r is recorded.
func (i *Isolator) addMappingsLocked(r record) error {
	if len(r.Limits.Ports) == 0 {
		return nil
	}
	c, err := i.nftConn(2 * len(r.Limits.Ports))
	if err != nil {
		return err
	}
	t := i.fwTable()
	for _, p := range r.Limits.Ports {
		addMappingRules(c, t, r.ID, mapping{PortMapping: p, addr: r.Address})
	}
	if err := c.Flush(); err != nil {
		return i.syncFirewallLocked("")
	}
	return nil
}

// delMappingsLocked removes the rules of container id's port mappings in
// one transaction, or makes the whole table again without them when that
// fails. i.mu is held.
func (i *Isolator) delMappingsLocked(id string) error {
	c, err := i.nftConn(16)
	if err != nil {
		return err
	}
	t := i.fwTable()
	tag := mappingTag(id)
	for _, name := range []string{chainPre, chainOut} {
		ch := &nftables.Chain{Name: name, Table: t}
		rules, err := c.GetRules(t, ch)
		if err != nil {
			return i.syncFirewallLocked(id)
		}
		for _, r := range rules {
			if bytes.Equal(r.UserData, tag) {
				r.Table, r.Chain = t, ch
				if err := c.DelRule(r); err != nil {
					return i.syncFirewallLocked(id)
				}
			}
		}
	}
	if err := c.Flush(); err != nil {
		return i.syncFirewallLocked(id)
	}
	return nil
}

// mapping is one port mapping of one container, with its address.
type mapping struct {
	isolator.PortMapping
	addr netip.Addr
}

// syncFirewallLocked (re)creates, in one transaction, the isolator's table
// with the port mappings of every recorded container but skip (one being
// cleaned up). New and Recover call it; a launch or exit changes only the
// mapping rules (addMappingsLocked, delMappingsLocked):
//
//	table ip brim-<bridge> {
//		chain input {	# containers → host
//			type filter hook input priority filter; policy accept;
//			iifname "<bridge>" ct state established,related accept
//			iifname "<bridge>" meta l4proto <proto> th dport <port> accept	# Config.HostAllow
//			iifname "<bridge>" meta l4proto tcp reject with tcp reset
//			iifname "<bridge>" reject with icmp admin-prohibited
//		}
//		chain forward {	# with Config.Isolate: container → container
//			type filter hook forward priority filter; policy accept;
//			iifname "<bridge>" oifname "<bridge>" ct status dnat accept
//			iifname "<bridge>" oifname "<bridge>" drop
//		}
//		chain prerouting {	# port mappings, from elsewhere
//			type nat hook prerouting priority dstnat;
//			fib daddr type local meta l4proto <proto> th dport <host port> dnat to <address>:<port> comment "brim container <id>"
//		}
//		chain output {	# port mappings, from the host itself
//			type nat hook output priority dstnat;
//			ip daddr != 127.0.0.0/8 fib daddr type local meta l4proto <proto> th dport <host port> dnat to <address>:<port>
//		}
//		chain postrouting {
//			type nat hook postrouting priority srcnat;
//			oifname "<bridge>" ip saddr <subnet> ct status dnat masquerade	# hairpin
//			ip saddr <subnet> oifname != "<bridge>" masquerade	# Config.NAT
//		}
//	}
//
// A mapping with a host address matches `ip daddr <address>` instead of
// `fib daddr type local`. Replacing the whole table makes this idempotent:
// a restarted agent, or a table someone emptied, gets exactly these rules.
func (i *Isolator) syncFirewallLocked(skip string) error {
	ids := make([]string, 0, len(i.recs))
	n := 32 + len(i.cfg.HostAllow)
	for id, r := range i.recs {
		if id != skip && len(r.Limits.Ports) > 0 {
			ids = append(ids, id)
			n += 2 * len(r.Limits.Ports)
		}
	}
	slices.Sort(ids)
	c, err := i.nftConn(n)
	if err != nil {
		return err
	}
	t := i.fwTable()
	c.AddTable(t)
	c.DelTable(t) // empties an existing table in the same transaction
	c.AddTable(t)
	accept := nftables.ChainPolicyAccept
	chain := func(name string, typ nftables.ChainType, hook *nftables.ChainHook, prio *nftables.ChainPriority) *nftables.Chain {
		ch := &nftables.Chain{Name: name, Table: t, Type: typ, Hooknum: hook, Priority: prio}
		if typ == nftables.ChainTypeFilter {
			ch.Policy = &accept
		}
		return c.AddChain(ch)
	}
	rule := func(ch *nftables.Chain, e ...[]expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(e...)})
	}
	br := i.cfg.Bridge
	verdict := func(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }

	in := chain("input", nftables.ChainTypeFilter, nftables.ChainHookInput, nftables.ChainPriorityFilter)
	rule(in, ifname(expr.MetaKeyIIFNAME, br, true), ctBits(expr.CtKeySTATE, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED), verdict(expr.VerdictAccept))
	for _, h := range i.cfg.HostAllow {
		rule(in, ifname(expr.MetaKeyIIFNAME, br, true), l4port(h.Protocol, h.Port), verdict(expr.VerdictAccept))
	}
	rule(in, ifname(expr.MetaKeyIIFNAME, br, true), l4proto(isolator.TCP), []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}})
	rule(in, ifname(expr.MetaKeyIIFNAME, br, true), []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: icmpPktFiltered}})

	if i.cfg.Isolate {
		fw := chain("forward", nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityFilter)
		between := slices.Concat(ifname(expr.MetaKeyIIFNAME, br, true), ifname(expr.MetaKeyOIFNAME, br, true))
		rule(fw, between, ctBits(expr.CtKeySTATUS, ipsDstNAT), verdict(expr.VerdictAccept))
		rule(fw, between, verdict(expr.VerdictDrop))
	}

	chain(chainPre, nftables.ChainTypeNAT, nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest)
	chain(chainOut, nftables.ChainTypeNAT, nftables.ChainHookOutput, nftables.ChainPriorityNATDest)
	for _, id := range ids {
		r := i.recs[id]
		for _, p := range r.Limits.Ports {
			addMappingRules(c, t, id, mapping{PortMapping: p, addr: r.Address})
		}
	}

	post := chain("postrouting", nftables.ChainTypeNAT, nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource)
	subnet := addrMatch(12, i.cfg.Subnet, true)
	rule(post, ifname(expr.MetaKeyOIFNAME, br, true), subnet, ctBits(expr.CtKeySTATUS, ipsDstNAT), []expr.Any{&expr.Masq{}})
	if i.cfg.NAT {
		rule(post, subnet, ifname(expr.MetaKeyOIFNAME, br, false), []expr.Any{&expr.Masq{}})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("install nftables table %s: %w", t.Name, err)
	}
	return nil
}

// removeTable deletes the isolator's table if there is one and reports
// whether it did. A host without nf_tables has none.
func (i *Isolator) removeTable() (bool, error) {
	c, err := i.nftConn(1)
	if err != nil {
		return false, nil
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return false, nil
	}
	t := i.fwTable()
	if !slices.ContainsFunc(tables, func(have *nftables.Table) bool { return have.Name == t.Name }) {
		return false, nil
	}
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("delete nftables table %s: %w", t.Name, err)
	}
	return true, nil
}

// ifname is `<key> == name` (eq) or `<key> != name`.
func ifname(key expr.MetaKey, name string, eq bool) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	op := expr.CmpOpEq
	if !eq {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: op, Register: 1, Data: b},
	}
}

// ctBits is `ct <key> & bits != 0` (ct state / ct status flags).
func ctBits(key expr.CtKey, bits uint32) []expr.Any {
	return []expr.Any{
		&expr.Ct{Key: key, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(bits), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

func protoNum(proto string) byte {
	if proto == isolator.UDP {
		return unix.IPPROTO_UDP
	}
	return unix.IPPROTO_TCP
}

// l4proto is `meta l4proto <proto>`.
func l4proto(proto string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protoNum(proto)}},
	}
}

// l4port is `meta l4proto <proto> th dport <port>`.
func l4port(proto string, port uint16) []expr.Any {
	return append(l4proto(proto),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
	)
}

// addrMatch is `ip saddr|daddr [!=] prefix`; offset 12 is the source
// address, 16 the destination.
func addrMatch(offset uint32, p netip.Prefix, eq bool) []expr.Any {
	network := p.Masked().Addr().As4()
	op := expr.CmpOpEq
	if !eq {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: net.CIDRMask(p.Bits(), 32), Xor: make([]byte, 4)},
		&expr.Cmp{Op: op, Register: 1, Data: network[:]},
	}
}

// localDst is `fib daddr type local`: any address of the host.
func localDst() []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
	}
}

// dnat is `dnat to <addr>:<port>`.
func dnat(addr netip.Addr, port uint16) []expr.Any {
	a := addr.As4()
	p := make([]byte, 2)
	binary.BigEndian.PutUint16(p, port)
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: a[:]},
		&expr.Immediate{Register: 2, Data: p},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

// forgetFlows deletes the connection tracking entries of flows translated
// to addr (a container whose mappings are gone). The kernel keeps
// translating a tracked flow for as long as it sees traffic, so a UDP
// client that keeps sending to a host port would otherwise never reach
// the next container mapped to it. A host without conntrack over netlink
// has nothing to delete.
func (i *Isolator) forgetFlows(addr netip.Addr) error {
	h, err := vnl.NewHandleAt(i.hostNS, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil
	}
	defer h.Close()
	f := &vnl.ConntrackFilter{}
	if err := f.AddIP(vnl.ConntrackReplySrcIP, addr.AsSlice()); err != nil {
		return fmt.Errorf("forget flows to %s: %w", addr, err)
	}
	if _, err := h.ConntrackDeleteFilters(vnl.ConntrackTable, unix.AF_INET, f); err != nil &&
		!errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EPROTONOSUPPORT) {
		return fmt.Errorf("forget flows to %s: %w", addr, err)
	}
	return nil
}
