package containerizer

import (
	"debug/elf"
	"fmt"
	"os"

	"github.com/opencontainers/runc/libcontainer/exeseal"
	"golang.org/x/sys/unix"
)

// cloneShimBinary copies the shim binary once into a sealed memfd that
// every shim is executed from. libcontainer protects the host binary from
// a container overwriting it (CVE-2019-5736) by sealing a copy of
// /proc/self/exe before each container start — an overlayfs mount, or a
// full copy of the binary when overlayfs refuses (e.g. the binary's
// directory overlaps the state dir): ~20 ms for brim's size. A shim whose
// own executable is already a sealed memfd skips that step, so paying for
// the copy once per containerizer takes it off every launch. The memfd
// (the binary's size, in shared memory) lives until Close.
func cloneShimBinary(path, tmpDir string) (*os.File, error) {
	src, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("clone shim binary: %w", err)
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return nil, fmt.Errorf("clone shim binary: %w", err)
	}
	clone, err := exeseal.CloneBinary(src, fi.Size(), path, tmpDir)
	if err != nil {
		return nil, fmt.Errorf("clone shim binary: %w", err)
	}
	defer clone.Close()
	// Keep it clear of the low fds os/exec dup2s ExtraFiles onto in the
	// child: the child execs the agent's fd <n> (shimCommand) after those
	// dups.
	fd, err := unix.FcntlInt(clone.Fd(), unix.F_DUPFD_CLOEXEC, 100)
	if err != nil {
		return nil, fmt.Errorf("clone shim binary: %w", err)
	}
	return os.NewFile(uintptr(fd), "brim-shim-sealed"), nil
}

// shimCommand returns the executable path and argv[0] for a shim.
//
// The sealed copy is executed through the agent's own /proc entry, not
// the child's /proc/self: about one exec in 9,000 of /proc/self/fd/<n>
// from a freshly forked child failed with EACCES on this kernel when
// many shims started at once (pid_max 32768, so pids are reused within
// seconds), and the launch failed "start shim: fork/exec
// /proc/self/fd/100: permission denied". The agent's pid is stable
// while it runs, and its fd <n> is the same open file as the child's.
func (c *Containerizer) shimCommand() (path, argv0 string) {
	if c.shimExe != nil {
		return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), c.shimExe.Fd()), c.cfg.ShimBinary
	}
	return c.cfg.ShimBinary, c.cfg.ShimBinary
}

// staticBinary reports whether path is an ELF executable without a
// dynamic loader: only such a shim binary can serve as a warm sandbox's
// exec trampoline in a root filesystem other than the host's, which has
// no libraries for it (the Makefile links bin/brim-shim statically).
func staticBinary(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}
