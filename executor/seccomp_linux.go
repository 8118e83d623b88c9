//go:build seccomp

package executor

import (
	"runtime"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM in every container: kernel modules and
// kexec, BPF and perf (kernel attack surface, host-wide effects), keyrings
// (not namespaced), clock and swap control, reboot, handle-based opens
// (escape a bind mount: CVE-2014-3519 "shocker"), userfaultfd (exploit
// primitive), and the mount API, setns and pivot_root (already denied by
// the missing CAP_SYS_ADMIN; defence in depth — seccomp is applied after the
// container's mounts are done). ptrace stays allowed (safe since Linux 4.8,
// needed by debuggers and strace).
var deniedSyscalls = []string{
	"acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module",
	"delete_module", "finit_module", "fsconfig", "fsmount", "fsopen", "fspick",
	"get_kernel_syms", "init_module", "ioperm", "iopl", "kexec_file_load",
	"kexec_load", "keyctl", "lookup_dcookie", "mount", "mount_setattr",
	"move_mount", "name_to_handle_at", "nfsservctl", "open_by_handle_at",
	"open_tree", "perf_event_open", "pivot_root", "quotactl", "quotactl_fd",
	"reboot", "request_key", "setns", "settimeofday", "stime", "swapoff",
	"swapon", "_sysctl", "sysfs", "syslog", "umount", "umount2", "uselib",
	"userfaultfd", "ustat", "vm86", "vm86old",
}

// seccompArches are the syscall ABIs a process on this host can use: the
// native one and the compat ABIs the kernel accepts from it (32-bit x86
// and x32 on amd64, 32-bit ARM on arm64). The filter must cover them all
// (a 32-bit int 0x80 call would otherwise bypass it) and nothing more:
// every architecture multiplies the filter libseccomp compiles in each
// container's init, on the launch path (about 0.5 ms of CPU for the two
// foreign ABIs of the former fixed list, measured with libseccomp 2.5.4).
func seccompArches() []specs.Arch {
	switch runtime.GOARCH {
	case "amd64":
		return []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}
	case "arm64":
		return []specs.Arch{specs.ArchAARCH64, specs.ArchARM}
	case "386":
		return []specs.Arch{specs.ArchX86}
	case "arm":
		return []specs.Arch{specs.ArchARM}
	default:
		return nil // libseccomp's native architecture only
	}
}

// defaultSeccomp is brim's default profile: allow everything except
// deniedSyscalls, user namespaces (unshare/clone with CLONE_NEWUSER: the
// usual way to reach otherwise privileged kernel code), and clone3, which
// fails with ENOSYS so that libc falls back to clone, whose flags a filter
// can inspect (clone3 passes them in memory). Unknown names (other
// architectures' syscalls) are ignored by libcontainer.
func defaultSeccomp() *specs.LinuxSeccomp {
	eperm := uint(unix.EPERM)
	enosys := uint(unix.ENOSYS)
	newUser := []specs.LinuxSeccompArg{{
		Index: 0, Value: unix.CLONE_NEWUSER, ValueTwo: unix.CLONE_NEWUSER, Op: specs.OpMaskedEqual,
	}}
	return &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: seccompArches(),
		Syscalls: []specs.LinuxSyscall{
			{Names: deniedSyscalls, Action: specs.ActErrno, ErrnoRet: &eperm},
			{Names: []string{"unshare", "clone"}, Action: specs.ActErrno, ErrnoRet: &eperm, Args: newUser},
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
		},
	}
}

// SeccompEnabled reports whether containers get the default seccomp
// profile (the binary was built with the seccomp tag).
const SeccompEnabled = true
