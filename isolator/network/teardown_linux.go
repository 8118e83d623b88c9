//go:build linux

package network

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/brimnode/brim/internal/lockfile"
)

// Teardown removes from the host everything an Isolator on cfg made, with
// no Isolator running and without making anything (`brim agent cleanup`,
// after the agent died or will not come back): the nftables table first
// (nothing is forwarded to a container any more), then each recorded
// container's veth, netns file, tracked flows and address record, then
// whatever carries the isolator's names without a record (netns files,
// veths), the IFBs with their classes, the bridge, the netns dir's mount
// and the dir itself, and puts back the host's IPv4 forwarding as it was
// before Config.NAT turned it on. The containers' processes should be
// gone first (their namespaces go with their last user).
//
// It returns what it did, one line each ("removed …", "restored …"); nothing on a host where
// there is nothing left (a second call). It carries on past errors and
// returns them joined. Call it on a thread in the host's network
// namespace, as New. Errors wrap ErrInvalid for a bad cfg and ErrLocked
// when an Isolator (a running agent) holds cfg.StateDir; then it removes
// nothing.
func Teardown(cfg Config) ([]string, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("tear down network: %w", err)
	}
	var lock *lockfile.Lock
	if _, err := os.Stat(cfg.StateDir); err == nil {
		if lock, err = lockDir(cfg.StateDir); err != nil {
			return nil, fmt.Errorf("tear down network: %w", err)
		}
		defer func() { _ = lock.Close() }() // releasing a flock: nothing to report
	}
	i, err := open(cfg, lock)
	if err != nil {
		return nil, fmt.Errorf("tear down network: %w", err)
	}
	defer i.release()
	var t teardownLog
	if removed, err := i.removeTable(); err != nil {
		t.keep(err)
	} else if removed {
		t.note("removed nftables table ip %s (port mappings, confinement, NAT)", i.fwTable().Name)
	}
	i.teardownRecords(&t)
	t.out, t.errs = i.teardownOrphans(t.out, t.errs)
	i.teardownIFBs(&t)
	i.teardownBridge(&t)
	i.teardownNetNSDir(&t)
	if did, err := restoreForwarding(int(i.hostNS), i.cfg.StateDir); err != nil {
		t.keep(err)
	} else if did != "" {
		t.note("%s", did)
	}
	if err := errors.Join(t.errs...); err != nil {
		return t.out, fmt.Errorf("tear down network: %w", err)
	}
	return t.out, nil
}

// teardownLog collects what Teardown did, one line each, and the errors
// it carried on past.
type teardownLog struct {
	out  []string
	errs []error
}

func (t *teardownLog) note(format string, a ...any) { t.out = append(t.out, fmt.Sprintf(format, a...)) }

func (t *teardownLog) keep(err error) {
	if err != nil {
		t.errs = append(t.errs, err)
	}
}

// teardownRecords removes each recorded container's veth, netns file and
// tracked flows, then its address record; a record whose parts could not
// all be removed stays for a retry.
func (i *Isolator) teardownRecords(t *teardownLog) {
	ids := make([]string, 0, len(i.recs))
	for id := range i.recs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := i.recs[id]
		var rerrs []error
		if i.linkExists(i.vethName(r.Index)) {
			if err := i.deleteLink(i.vethName(r.Index)); err != nil {
				rerrs = append(rerrs, err)
			} else {
				t.note("removed veth %s of container %s", i.vethName(r.Index), id)
			}
		}
		if path := i.netnsPath(id); exists(path) {
			if err := removeNetNS(path); err != nil {
				rerrs = append(rerrs, err)
			} else {
				t.note("removed netns %s", path)
			}
		}
		if len(r.Limits.Ports) > 0 {
			rerrs = append(rerrs, i.forgetFlows(r.Address))
		}
		if err := errors.Join(rerrs...); err != nil {
			t.keep(fmt.Errorf("tear down network of %s: %w", id, err))
			continue // the record stays for a retry
		}
		if err := i.store.remove(id); err != nil {
			t.keep(err)
			continue
		}
		delete(i.recs, id)
		t.note("removed address record %s of container %s", r.Address, id)
	}
}

// teardownIFBs removes the isolator's two IFBs (and so their classes);
// a link of that name that is not an IFB is left in place.
func (i *Isolator) teardownIFBs(t *teardownLog) {
	for _, name := range []string{i.cfg.Bridge + "-tx", i.cfg.Bridge + "-rx"} {
		l, err := i.nl.LinkByName(name)
		if err != nil {
			continue
		}
		if l.Type() != "ifb" {
			t.keep(fmt.Errorf("link %s is a %s, not this isolator's IFB: left in place", name, l.Type()))
			continue
		}
		classes, _ := dump(func() ([]netlink.Class, error) { return i.nl.ClassList(l, 0) })
		if err := i.deleteLink(name); err != nil {
			t.keep(err)
			continue
		}
		// The root class 1:1 and the default one are the IFB's own.
		t.note("removed ifb %s with %d container classes", name, max(len(classes)-2, 0))
	}
}

// teardownBridge removes the isolator's bridge, only if it is its own.
func (i *Isolator) teardownBridge(t *teardownLog) {
	l, err := i.nl.LinkByName(i.cfg.Bridge)
	if err != nil {
		return
	}
	// A wrong --network-bridge must not take another bridge (docker0,
	// virbr0) with it: the isolator's carries its gateway address.
	if err := i.ownBridge(l); err != nil {
		t.keep(err)
	} else if err := i.deleteLink(i.cfg.Bridge); err != nil {
		t.keep(err)
	} else {
		t.note("removed bridge %s", i.cfg.Bridge)
	}
}

// teardownNetNSDir unmounts the netns dir's shared mount and removes it.
func (i *Isolator) teardownNetNSDir(t *teardownLog) {
	if isMountPoint(i.cfg.NetNSDir) {
		if err := unshareDir(i.cfg.NetNSDir); err != nil {
			t.keep(err)
		} else {
			t.note("removed mount %s", i.cfg.NetNSDir)
		}
	}
	if err := os.Remove(i.cfg.NetNSDir); err == nil {
		t.note("removed directory %s", i.cfg.NetNSDir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.keep(fmt.Errorf("remove netns dir: %w", err))
	}
}

// teardownOrphans removes the netns files and veths with the isolator's
// names that no record is left for, as Recover's sweep does.
func (i *Isolator) teardownOrphans(out []string, errs []error) ([]string, []error) {
	ents, err := os.ReadDir(i.cfg.NetNSDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("list netns dir: %w", err))
	}
	for _, e := range ents {
		if _, ok := i.recs[e.Name()]; ok {
			continue
		}
		path := i.netnsPath(e.Name())
		if err := removeNetNS(path); err != nil {
			errs = append(errs, err)
		} else {
			out = append(out, "removed netns "+path+" (no record)")
		}
	}
	live := map[string]bool{}
	for _, r := range i.recs {
		live[i.vethName(r.Index)] = true
	}
	links, err := dump(i.nl.LinkList)
	if err != nil {
		errs = append(errs, fmt.Errorf("list links: %w", err))
	}
	for _, l := range links {
		name := l.Attrs().Name
		if !strings.HasPrefix(name, i.vethPrefix) || l.Type() != "veth" || live[name] {
			continue
		}
		if err := i.deleteLink(name); err != nil {
			errs = append(errs, err)
		} else {
			out = append(out, "removed veth "+name+" (no record)")
		}
	}
	return out, errs
}

// ownBridge returns an error unless l is a bridge with the isolator's
// gateway address (ensureBridge gives it one).
func (i *Isolator) ownBridge(l netlink.Link) error {
	if l.Type() != "bridge" {
		return fmt.Errorf("link %s is a %s, not a bridge: left in place", i.cfg.Bridge, l.Type())
	}
	addrs, err := dump(func() ([]netlink.Addr, error) { return i.nl.AddrList(l, netlink.FAMILY_V4) })
	if err != nil {
		return fmt.Errorf("list addresses of bridge %s: %w", i.cfg.Bridge, err)
	}
	if !slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return a.IP.Equal(i.gw.AsSlice()) }) {
		return fmt.Errorf("bridge %s has no address %s (the gateway of %s): not this isolator's, left in place (check --network-bridge and --network-subnet)", i.cfg.Bridge, i.gw, i.cfg.Subnet)
	}
	return nil
}

func (i *Isolator) linkExists(name string) bool {
	_, err := i.nl.LinkByName(name)
	return err == nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// isMountPoint reports whether path is a mount point of the calling
// process's mount namespace.
func isMountPoint(path string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && unescapeMount(f[4]) == path {
			return true
		}
	}
	return false
}

// unescapeMount undoes mountinfo's octal escapes of space, tab, newline
// and backslash.
func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}
