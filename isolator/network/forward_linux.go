//go:build linux

package network

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/brimnode/brim/internal/atomicfile"
)

// ipForward is the host's IPv4 forwarding switch (per network namespace:
// the namespace of the thread that opens it).
const ipForward = "/proc/sys/net/ipv4/ip_forward"

// forwardRecord, in Config.StateDir, holds the value ip_forward had
// before the first isolator turned it on (Config.NAT), so that what the
// agent changed on the host can be put back (RestoreForwarding). A name
// starting with "." is never taken for an IPAM record.
const forwardRecord = ".ip_forward.orig"

// enableForwarding turns IPv4 forwarding on in the host namespace
// (Config.NAT), recording the previous value first: once, so that an
// agent restarted over its own change does not record it as the host's.
func (i *Isolator) enableForwarding() error {
	return runInNetNS(int(i.hostNS), func() error {
		cur, err := os.ReadFile(ipForward)
		if err != nil {
			return fmt.Errorf("enable ip forwarding: %w", err)
		}
		if string(bytes.TrimSpace(cur)) == "1" {
			return nil
		}
		rec := filepath.Join(i.cfg.StateDir, forwardRecord)
		if _, err := os.Stat(rec); errors.Is(err, fs.ErrNotExist) {
			// Synced: it must outlive the machine's crash as the change does
			// not (a reboot resets ip_forward, and the record then says
			// what the host has anyway).
			if err := atomicfile.WriteFile(rec, bytes.TrimSpace(cur), 0o600); err != nil {
				return fmt.Errorf("enable ip forwarding: record the previous value: %w", err)
			}
		}
		if err := os.WriteFile(ipForward, []byte("1"), 0); err != nil {
			return fmt.Errorf("enable ip forwarding: %w", err)
		}
		return nil
	})
}

// restoreForwarding puts back the value of ip_forward recorded in
// stateDir by enableForwarding, in the network namespace ns, and removes
// the record. It returns what it did ("" when there was no record).
func restoreForwarding(ns int, stateDir string) (string, error) {
	rec := filepath.Join(stateDir, forwardRecord)
	prev, err := os.ReadFile(rec)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("restore ip forwarding: %w", err)
	}
	prev = bytes.TrimSpace(prev)
	if string(prev) != "0" && string(prev) != "1" {
		return "", fmt.Errorf("restore ip forwarding: %s holds %q, want 0 or 1", rec, prev)
	}
	var cur []byte
	err = runInNetNS(ns, func() error {
		var err error
		if cur, err = os.ReadFile(ipForward); err != nil {
			return err
		}
		return os.WriteFile(ipForward, prev, 0)
	})
	if err != nil {
		return "", fmt.Errorf("restore ip forwarding: %w", err)
	}
	if err := os.Remove(rec); err != nil {
		return "", fmt.Errorf("restore ip forwarding: %w", err)
	}
	return fmt.Sprintf("restored net.ipv4.ip_forward %s → %s (its value before the agent turned it on)", bytes.TrimSpace(cur), prev), nil
}
