//go:build linux

package network

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// natTable is the nftables table that holds this isolator's NAT rule; one
// table per bridge, replaced as a whole and deleted as one object.
func (i *Isolator) natTable() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyIPv4, Name: "brim-" + i.cfg.Bridge}
}

// nftConn returns an nftables connection to the isolator's host namespace.
func (i *Isolator) nftConn() (*nftables.Conn, error) {
	c, err := nftables.New(nftables.WithNetNSFd(int(i.hostNS)))
	if err != nil {
		return nil, fmt.Errorf("open nftables: %w", err)
	}
	return c, nil
}

// setupNAT enables IPv4 forwarding and (re)creates, in one transaction, the
// table whose postrouting rule masquerades what the subnet sends out of any
// interface but the bridge:
//
//	table ip brim-<bridge> {
//		chain postrouting {
//			type nat hook postrouting priority srcnat;
//			ip saddr <subnet> oifname != "<bridge>" masquerade
//		}
//	}
func (i *Isolator) setupNAT() error {
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0); err != nil {
		return fmt.Errorf("enable ip forwarding: %w", err)
	}
	c, err := i.nftConn()
	if err != nil {
		return err
	}
	t := i.natTable()
	c.AddTable(t)
	c.DelTable(t) // empties an existing table in the same transaction
	c.AddTable(t)
	ch := c.AddChain(&nftables.Chain{
		Name:     "postrouting",
		Table:    t,
		Type:     nftables.ChainTypeNAT,
		Hooknum:  nftables.ChainHookPostrouting,
		Priority: nftables.ChainPriorityNATSource,
	})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: masquerade(i.cfg.Bridge, i.cfg.Subnet.Masked().Addr().As4(), i.cfg.Subnet.Bits())})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("add nat table %s: %w", t.Name, err)
	}
	return nil
}

// removeNAT deletes the NAT table if there is one. A host without nf_tables
// has none: NAT off must not depend on it.
func (i *Isolator) removeNAT() error {
	c, err := i.nftConn()
	if err != nil {
		return nil
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil
	}
	t := i.natTable()
	for _, have := range tables {
		if have.Name != t.Name {
			continue
		}
		c.DelTable(t)
		if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete nat table %s: %w", t.Name, err)
		}
	}
	return nil
}

// masquerade is `ip saddr <network>/<bits> oifname != <bridge> masquerade`.
func masquerade(bridge string, network [4]byte, bits int) []expr.Any {
	ifname := make([]byte, unix.IFNAMSIZ)
	copy(ifname, bridge)
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: net.CIDRMask(bits, 32), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: network[:]},
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ifname},
		&expr.Masq{},
	}
}
