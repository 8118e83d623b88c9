package executor

import (
	"bufio"
	"fmt"
	"io"
	"math/bits"
	"strconv"
	"strings"
)

// procPrivileges is what /proc/PID/status says about a process's
// privileges: the fields an exec is compared on with the container's
// init.
type procPrivileges struct {
	// Capability sets (CapInh, CapPrm, CapEff, CapBnd, CapAmb).
	Inh, Prm, Eff, Bnd, Amb uint64
	NoNewPrivs              bool
	// Seccomp is the mode (0 none, 1 strict, 2 filter); Filters the
	// number of filters (-1: the kernel does not say).
	Seccomp, Filters int
	// UIDs and GIDs: real, effective, saved, filesystem, as seen from the
	// reader's user namespace (the shim's: the host's).
	UIDs, GIDs [4]uint32
}

// parseStatus reads /proc/PID/status's privilege fields.
func parseStatus(r io.Reader) (procPrivileges, error) {
	p := procPrivileges{Filters: -1}
	seen := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		var err error
		switch k {
		case "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb":
			var n uint64
			n, err = strconv.ParseUint(v, 16, 64)
			*map[string]*uint64{"CapInh": &p.Inh, "CapPrm": &p.Prm, "CapEff": &p.Eff, "CapBnd": &p.Bnd, "CapAmb": &p.Amb}[k] = n
			seen++
		case "NoNewPrivs":
			p.NoNewPrivs = v == "1"
			seen++
		case "Seccomp":
			p.Seccomp, err = strconv.Atoi(v)
			seen++
		case "Seccomp_filters":
			p.Filters, err = strconv.Atoi(v)
		case "Uid", "Gid":
			ids := &p.UIDs
			if k == "Gid" {
				ids = &p.GIDs
			}
			f := strings.Fields(v)
			if len(f) != 4 {
				err = fmt.Errorf("%d fields", len(f))
			}
			for i := 0; err == nil && i < 4; i++ {
				var n uint64
				n, err = strconv.ParseUint(f[i], 10, 32)
				ids[i] = uint32(n)
			}
			seen++
		}
		if err != nil {
			return p, fmt.Errorf("parse status %s: %w", k, err)
		}
	}
	if err := sc.Err(); err != nil {
		return p, fmt.Errorf("read status: %w", err)
	}
	if seen < 9 {
		return p, fmt.Errorf("read status: %d of the 9 privilege fields", seen)
	}
	return p, nil
}

// beyond lists how exec is more privileged than init: a capability in
// any set that init lacks in the same set, no_new_privs off where init
// has it, a weaker seccomp mode or fewer filters, or root (any uid 0)
// where init has no uid 0. Empty: exec is at most init.
func beyond(exec, init procPrivileges) []string {
	var out []string
	for _, c := range []struct {
		name       string
		exec, init uint64
	}{
		{"effective", exec.Eff, init.Eff}, {"permitted", exec.Prm, init.Prm}, {"bounding", exec.Bnd, init.Bnd},
		{"inheritable", exec.Inh, init.Inh}, {"ambient", exec.Amb, init.Amb},
	} {
		if extra := c.exec &^ c.init; extra != 0 {
			out = append(out, fmt.Sprintf("%s capabilities %s", c.name, capNames(extra)))
		}
	}
	if init.NoNewPrivs && !exec.NoNewPrivs {
		out = append(out, "no_new_privs off")
	}
	if exec.Seccomp < init.Seccomp {
		out = append(out, fmt.Sprintf("seccomp mode %d, the container's %d", exec.Seccomp, init.Seccomp))
	} else if init.Filters >= 0 && exec.Filters >= 0 && exec.Filters < init.Filters {
		out = append(out, fmt.Sprintf("%d seccomp filters, the container's %d", exec.Filters, init.Filters))
	}
	if hasZero(exec.UIDs) && !hasZero(init.UIDs) {
		out = append(out, "root (uid 0) where the container's user is not")
	}
	return out
}

func hasZero(ids [4]uint32) bool {
	for _, id := range ids {
		if id == 0 {
			return true
		}
	}
	return false
}

// capNames names the capabilities of a set ("cap_sys_admin,…"; a bit
// without a name by its number).
func capNames(set uint64) string {
	var names []string
	for set != 0 {
		i := bits.TrailingZeros64(set)
		set &^= 1 << i
		if i < len(capabilityNames) {
			names = append(names, "cap_"+capabilityNames[i])
		} else {
			names = append(names, "cap_"+strconv.Itoa(i))
		}
	}
	return strings.Join(names, ",")
}

// capabilityNames are the kernel's capabilities by bit number.
var capabilityNames = []string{
	"chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid", "setuid",
	"setpcap", "linux_immutable", "net_bind_service", "net_broadcast", "net_admin", "net_raw",
	"ipc_lock", "ipc_owner", "sys_module", "sys_rawio", "sys_chroot", "sys_ptrace", "sys_pacct",
	"sys_admin", "sys_boot", "sys_nice", "sys_resource", "sys_time", "sys_tty_config", "mknod",
	"lease", "audit_write", "audit_control", "setfcap", "mac_override", "mac_admin", "syslog",
	"wake_alarm", "block_suspend", "audit_read", "perfmon", "bpf", "checkpoint_restore",
}

// capBits returns the set of capability names ("CAP_KILL", as in an OCI
// spec); an unknown name is an error.
func capBits(names []string) (uint64, error) {
	var set uint64
	for _, n := range names {
		i := capIndex(strings.ToLower(strings.TrimPrefix(strings.ToUpper(n), "CAP_")))
		if i < 0 {
			return 0, fmt.Errorf("unknown capability %q", n)
		}
		set |= 1 << i
	}
	return set, nil
}

func capIndex(name string) int {
	for i, n := range capabilityNames {
		if n == name {
			return i
		}
	}
	return -1
}
