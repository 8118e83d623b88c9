//go:build linux

package network

import (
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/vishvananda/netlink"
)

// spare is a network namespace with its veth pair, made ahead of a launch by
// the refiller goroutine so that Prepare only has to rename, bind-mount and
// configure them. The
// namespace is held by an open file only: if the agent dies, the kernel
// destroys it, and the veth pair with it — spares never outlive the process.
type spare struct {
	ns   *os.File
	host string // host side, down and on no bridge until taken
}

// takeSpare returns a spare, or nil when there is none, and asks the
// refiller for another. i.mu is held.
func (i *Isolator) takeSpare() *spare {
	n := len(i.spares)
	if n == 0 {
		return nil
	}
	sp := i.spares[n-1]
	i.spares = i.spares[:n-1]
	i.askRefill()
	return sp
}

// recordRetry is how often records a full state dir kept in memory are
// written again (retryUnsaved).
const recordRetry = 2 * time.Second

// startRefiller starts the goroutine that makes spares when asked and
// writes the records kept in memory every recordRetry; the Isolator owns
// it, stopRefiller ends it and waits for it.
func (i *Isolator) startRefiller() {
	i.refillc = make(chan struct{}, 1)
	i.refillDone = make(chan struct{})
	go func() {
		defer close(i.refillDone)
		retry := time.NewTicker(recordRetry)
		defer retry.Stop()
		for {
			select {
			case _, ok := <-i.refillc:
				if !ok {
					return
				}
				i.refill()
			case <-retry.C:
				i.retryUnsaved()
			}
		}
	}()
}

// askRefill wakes the refiller without waiting for it. i.mu is held.
func (i *Isolator) askRefill() {
	if i.closed || i.refillc == nil || i.cfg.Spares <= 0 {
		return
	}
	select {
	case i.refillc <- struct{}{}:
	default: // a refill is already due
	}
}

// stopRefiller stops the refiller, waits for it and drops the spares; no
// more are made. Idempotent. i.mu is not held.
func (i *Isolator) stopRefiller() {
	i.mu.Lock()
	already := i.closed
	i.closed = true
	i.mu.Unlock()
	if !already && i.refillc != nil {
		close(i.refillc)
		<-i.refillDone
	}
	i.mu.Lock()
	for _, sp := range i.spares {
		i.dropSpare(sp)
	}
	i.spares = nil
	i.mu.Unlock()
}

// refill makes spares until there are Config.Spares of them, without holding
// i.mu while it works. Errors are dropped: a Prepare without a spare makes
// its own namespace and reports what fails.
func (i *Isolator) refill() {
	for {
		i.mu.Lock()
		if i.closed || len(i.spares)+len(i.pending) >= i.cfg.Spares {
			i.mu.Unlock()
			return
		}
		name := fmt.Sprintf("%ss%03x", i.vethPrefix, rand.IntN(0x1000))
		if i.pending[name] || i.isSpare(name) {
			i.mu.Unlock()
			continue
		}
		i.pending[name] = true
		i.mu.Unlock()
		sp, err := i.newSpare(name)
		i.mu.Lock()
		delete(i.pending, name)
		if err == nil {
			i.spares = append(i.spares, sp)
		}
		i.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// newSpare makes a spare whose host side is name. Names of spares of a
// dead agent may linger while the kernel destroys their namespaces: the
// next refill tries another.
func (i *Isolator) newSpare(name string) (*spare, error) {
	ns, err := newNetNS()
	if err != nil {
		return nil, err
	}
	la := netlink.NewLinkAttrs()
	la.Name = name
	if err := i.nl.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: containerIf, PeerNamespace: netlink.NsFd(int(ns.Fd()))}); err != nil {
		_ = ns.Close()
		return nil, fmt.Errorf("create veth %s: %w", name, err)
	}
	return &spare{ns: ns, host: name}, nil
}

// dropSpare deletes the spare's veth now (rather than when the kernel gets
// round to destroying its namespace) and closes the namespace.
func (i *Isolator) dropSpare(sp *spare) {
	_ = i.deleteLink(sp.host)
	_ = sp.ns.Close()
}

// isSpare reports whether name is the host side of a spare, made or being
// made. i.mu is held.
func (i *Isolator) isSpare(name string) bool {
	if i.pending[name] {
		return true
	}
	for _, sp := range i.spares {
		if sp.host == name {
			return true
		}
	}
	return false
}
